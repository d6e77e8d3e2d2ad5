"""What a run's end says (agents/words.py), beside decide's table: the
loop's line, the reason of a task put back, the error of an attempt spent."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from watchdog.agents.decide import Decision, Move, Rules, RunEnd, decide
from watchdog.agents.outcome import Outcome, Report, Verdict
from watchdog.agents.words import words

TASK = uuid.UUID(int=7)
NOW = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)


def said(kind: Outcome, d: Decision, status: int = 1, lines: list[str] | None = None):
    report = Report(status, lines if lines is not None else ["last words"])
    verdict = Verdict(kind, "the verdict")
    return words(kind, d, report, verdict, "the verdict", task=TASK, account="max-1", outages=2,
                 scrub=lambda text: text.replace("sk-secret", "[hidden]"))  # fmt: skip


@pytest.mark.parametrize(
    "kind, d, line, why",
    [
        (Outcome.USAGE_LIMIT, Decision(Move.PAUSE, park="usage_limit"),
         "account 'max-1' hit a usage limit: the verdict", "usage limit: the verdict"),
        (Outcome.OUTAGE, Decision(Move.RETRY, retry_in=60),
         "provider outage (2 in a row): the verdict",
         "provider outage: the verdict; retried in 60s"),
        (Outcome.NEEDS_HUMAN, Decision(Move.PAUSE, park="needs_human", ends_loop=True),
         "account 'max-1' needs a person: the verdict (then: afk limit --account max-1 --clear)",
         "needs a human: the verdict"),
        (Outcome.INTERRUPTED, Decision(Move.PAUSE, ends_loop=True),
         f"interrupted: task {TASK} paused", "paused: the supervisor was stopped"),
        (Outcome.INTERRUPTED, Decision(Move.PAUSE, retry_in=30),
         f"task {TASK}: its agent was stopped by a signal the loop did not send (exit 1); "
         "paused without an attempt spent, going on",
         "paused: the agent was stopped from outside (exit 1); due again in 30s"),
        (Outcome.DONE, Decision(Move.DONE), "", None),  # (done says nothing; no reason)
    ],
)  # fmt: skip
def test_the_line_and_the_reason(kind, d, line, why):
    got = said(kind, d)
    assert got.line == line
    if d.move in (Move.RETRY, Move.PAUSE):
        assert got.why == why


def test_an_attempt_spent_says_why_with_the_agents_last_lines_scrubbed():
    stalled = said(Outcome.STALLED, Decision(Move.FAIL), lines=["token sk-secret"])
    assert stalled.error.startswith("the verdict, twice in a row\n\nthe verdict\n\n")
    assert "[hidden]" in stalled.error and "sk-secret" not in stalled.error
    assert said(Outcome.TIMED_OUT, Decision(Move.FAIL), lines=[]).error == (
        "the verdict\n\nthe agent's last lines:\n(none: it printed nothing)"
    )


def test_every_outcome_a_run_can_end_with_has_its_words():
    """Adding an outcome: a decision that moves the task needs its words."""
    for kind in Outcome:
        for run in (RunEnd(), RunEnd(stalled_before=True, stopped_outside_before=True)):
            d = decide(kind, Rules(), NOW, run)
            got = said(kind, d)
            if d.move is Move.FAIL:
                assert got.error.strip(), kind
            if d.move in (Move.RETRY, Move.PAUSE):
                assert got.why.strip() and got.line.strip(), kind
