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
                 title="port the parser",
                 scrub=lambda text: text.replace("sk-secret", "[hidden]"))  # fmt: skip


NAME = 'task 00000000 "port the parser"'


@pytest.mark.parametrize(
    "kind, d, line, why",
    [
        (Outcome.USAGE_LIMIT, Decision(Move.PAUSE, park="usage_limit"),
         f"{NAME}: put back: account 'max-1' hit a usage limit: the verdict",
         "usage limit: the verdict"),
        (Outcome.OUTAGE, Decision(Move.RETRY, retry_in=60),
         f"{NAME}: put back: provider outage (2 in a row): the verdict; retried in 60s",
         "provider outage: the verdict; retried in 60s"),
        (Outcome.NEEDS_HUMAN, Decision(Move.PAUSE, park="needs_human", ends_loop=True),
         f"{NAME}: put back: account 'max-1' needs a person: the verdict (then: afk limit "
         "--account max-1 --clear)",
         "needs a human: the verdict"),
        (Outcome.INTERRUPTED, Decision(Move.PAUSE, ends_loop=True),
         f"interrupted: {NAME} paused", "paused: the supervisor was stopped"),
        (Outcome.INTERRUPTED, Decision(Move.PAUSE, retry_in=30),
         f"{NAME}: its agent was stopped by a signal the loop did not send (exit 1); "
         "paused without an attempt spent, going on",
         "paused: the agent was stopped from outside (exit 1); due again in 30s"),
        (Outcome.STALLED, Decision(Move.RETRY),
         f"{NAME}: the verdict: stopped, and put back with no attempt spent", None),
        (Outcome.DONE, Decision(Move.DONE), f"{NAME}: done", None),
        # an attempt spent is said once the queue says what became of the task
        (Outcome.TASK_FAILURE, Decision(Move.FAIL), "", None),
        (Outcome.TIMED_OUT, Decision(Move.FAIL), "", None),
    ],
)  # fmt: skip
def test_the_line_and_the_reason(kind, d, line, why):
    got = said(kind, d)
    assert got.line == line
    if d.move in (Move.RETRY, Move.PAUSE) and why is not None:
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


@pytest.mark.parametrize(
    "kind, state, due, line",
    [
        (Outcome.TASK_FAILURE, "todo", "2026-12-04T03:00:05+01:00",
         f"{NAME}: the verdict; retry at 2026-12-04T03:00:05+01:00, attempt 2 of 5 spent"),
        (Outcome.TASK_FAILURE, "failed", None,
         f"{NAME}: the verdict; failed, 2 of 5 attempts spent"),
        (Outcome.TIMED_OUT, "todo", None,
         f"{NAME}: the verdict: stopped; retry at once it is claimed, attempt 2 of 5 spent"),
        (Outcome.STALLED, "failed", None,
         f"{NAME}: the verdict, twice in a row: stopped; failed, 2 of 5 attempts spent"),
        (Outcome.INTERRUPTED, "todo", "T",
         f"{NAME}: its agent was stopped from outside twice in a row (exit 1); retry at T, "
         "attempt 2 of 5 spent"),
    ],
)  # fmt: skip
def test_an_attempt_spent_says_the_task_what_spent_it_and_what_comes_next(kind, state, due, line):
    """Issue 53 item 2 (P31): the loop said nothing when a task failed its
    check or was retried. One line: the task by its short id and title, what
    spent the attempt, and when it is tried again (or that it failed)."""
    from watchdog.agents.words import failed_line, task_name

    spent = said(kind, Decision(Move.FAIL)).spent
    name = task_name(TASK, "port the parser")
    assert failed_line(name, spent, state=state, attempts=2, max_attempts=5, due=due) == line


def test_a_task_is_named_by_its_short_id_and_its_title_on_one_line():
    from watchdog.agents.words import task_name

    long = "fix\nthe login\x1b[31m page " + "x" * 200
    got = task_name("8ce4f0f5-12ab-4cde-8f01-23456789abcd", long)
    assert got.startswith('task 8ce4f0f5 "fix') and "\n" not in got and "\x1b" not in got
    assert len(got) < 100


@pytest.mark.parametrize(
    ("due", "held", "said"),
    [
        (None, False, "no task of 'a' is due (none is left to do, or those left wait for a "
         "person or another task)"),
        ("2026-12-08T03:10:00+01:00", False, "the next task of 'a' is due at "
         "2026-12-08T03:10:00+01:00 (a retry's backoff or its --not-before)"),
        (None, True, "a task of 'a' is held by a lease (maybe a dead loop's) or waits for "
         "room under its concurrency key"),
    ],
)  # fmt: skip
def test_nothing_to_claim_says_why(due, held, said):
    from watchdog.agents.words import nothing_to_claim

    assert nothing_to_claim("a", due, held) == said
