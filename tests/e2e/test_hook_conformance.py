"""Each harness's payloads, recorded from its hooks reference (the ``doc`` of
each file in tests/fixtures/hooks/), replayed through the real `afk hook` with
the task held or lost: the answer must be in that harness's shape, or nothing.
An expected ``"*"`` is any non-empty text (the reasons name the task)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import TESTS

from watchdog import NewTask


@pytest.fixture
def afk(afk_through):
    """Every hook here runs twice: straight against the database, and
    answered by the watchdog service."""
    return afk_through


FIXTURES = TESTS / "fixtures" / "hooks"
CASES = [
    pytest.param(recorded, case, id=f"{path.stem}: {case['case']}")
    for path in sorted(FIXTURES.glob("*.json"))
    for recorded in [json.loads(path.read_text())]
    for case in recorded["cases"]
]


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


def test_every_harness_has_recorded_payloads():
    assert {p.stem for p in FIXTURES.glob("*.json")} == {
        "claude",
        "codex",
        "gemini",
        "cursor",
        "copilot",
    }


def test_the_matcher_can_fail():
    assert not matches({"a": "*"}, {"a": ""})
    assert not matches({"a": "*"}, {"a": "x", "b": 1})
    assert not matches(None, {})


@pytest.mark.parametrize(("recorded", "case"), CASES)
def test_a_recorded_payload_gets_its_harness_answer(afk, queue, sql, recorded, case):
    queue.enqueue("agent", [NewTask("port the parser", {"repo": "acme"})])
    task = queue.claim("agent", runner="a-supervisor")
    if case["task"] == "lost":
        sql.expire(task.id)
        assert queue.reclaim()
    args = [*recorded["args"], *(["--gate"] if case.get("gate") else [])]
    proc = afk.hook(
        *args,
        input=json.dumps(case["payload"]).encode(),
        env={"AFK_TASK_ID": str(task.id), "AFK_TASK_LEASE": str(task.token)},
    )
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    out = proc.stdout.decode()
    got = json.loads(out) if out.strip() else None
    assert matches(case["expect"], got), got
