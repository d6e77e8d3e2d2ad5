"""How a hook's answer is compared with the one its harness expects: an
expected ``"*"`` is any non-empty text (the reasons name the task); a dict
must have exactly the expected keys."""

from __future__ import annotations

from typing import Any


def matches(expected: Any, got: Any) -> bool:
    if expected == "*":
        return isinstance(got, str) and bool(got.strip())
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(expected)
            and all(matches(v, got[k]) for k, v in expected.items())
        )
    return bool(expected == got)
