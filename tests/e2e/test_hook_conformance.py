"""Each harness's payloads, recorded from its hooks reference (the ``doc`` of
each file in tests/fixtures/hooks/), replayed through the real `afk hook` with
the task held or lost: the answer must be in that harness's shape, or nothing.
An expected ``"*"`` is any non-empty text (the reasons name the task)."""

from __future__ import annotations

import json

import pytest
from helpers import TESTS
from helpers.conformance import matches

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
