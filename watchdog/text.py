"""Agent text made safe to store, print and send: what an agent prints, or
writes through ``afk``, reaches the database, the digest, the pages, the
logs and other people's inboxes.

- :func:`plain`: no terminal escapes, no control characters but newlines and
  tabs (for what goes back to the agent itself, its brief);
- :func:`clean`: that, and every credential of a common shape hidden
  (:func:`watchdog.errors.redact`), for everything stored or shown to people;
- :func:`one_line`: one line, cut at a limit.
"""

from __future__ import annotations

import re

from .errors import redact

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: str) -> str:
    """No terminal escapes, no control characters but newlines and tabs."""
    return _CONTROL.sub("", _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))


def clean(text: str) -> str:
    """:func:`plain`, with every credential hidden: agent text as it may be
    stored, sent and shown."""
    return redact(plain(text))


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
