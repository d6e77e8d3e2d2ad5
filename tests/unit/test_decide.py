"""What the end of a run does (watchdog/agents/decide.py), as a table: one row per
outcome and circumstance, with the clock pinned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watchdog.agents.decide import (
    EXIT_PARKED,
    Decision,
    Move,
    Rules,
    RunEnd,
    decide,
    outage_backoff,
)
from watchdog.agents.outcome import Outcome

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
RULES = Rules(
    limit_probe_first_seconds=60,
    limit_probe_seconds=900,
    outage_backoff_seconds=30,
    outage_backoff_cap_seconds=100,
    outage_breaker=3,
    requeue_seconds=45,
)
LATER = NOW + timedelta(hours=2)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


P = EXIT_PARKED


#: what each end of a run does: every outcome a run's end can be has its rows
TABLE = [
    (Outcome.DONE, RunEnd(), Decision(Move.DONE)),
    (Outcome.TASK_FAILURE, RunEnd(), Decision(Move.FAIL)),
    (Outcome.TIMED_OUT, RunEnd(), Decision(Move.FAIL)),
    # a first stall spends nothing and goes back at once; a second spends one
    (Outcome.STALLED, RunEnd(), Decision(Move.RETRY)),
    (Outcome.STALLED, RunEnd(stalled_before=True), Decision(Move.FAIL)),
    # a command that cannot start: paused, and the loop stops for a person
    (Outcome.CANNOT_START, RunEnd(), Decision(Move.PAUSE, ends_loop=True, exit_status=P)),
    # a usage limit: parked until the reset named, else for the probe
    (
        Outcome.USAGE_LIMIT,
        RunEnd(reset=LATER),
        Decision(Move.PAUSE, park="usage_limit", park_until=LATER),
    ),
    # (issue 41 item 7: no reset read is a guess: probed after a minute,
    # doubling for each guess in a row, up to the probe's cap)
    (
        Outcome.USAGE_LIMIT,
        RunEnd(),
        Decision(Move.PAUSE, park="usage_limit", park_until=at(60), probe=True),
    ),
    (
        Outcome.USAGE_LIMIT,
        RunEnd(guessed_in_a_row=2),
        Decision(Move.PAUSE, park="usage_limit", park_until=at(120), probe=True),
    ),
    (
        Outcome.USAGE_LIMIT,
        RunEnd(guessed_in_a_row=4),
        Decision(Move.PAUSE, park="usage_limit", park_until=at(480), probe=True),
    ),
    (
        Outcome.USAGE_LIMIT,
        RunEnd(guessed_in_a_row=9),
        Decision(Move.PAUSE, park="usage_limit", park_until=at(900), probe=True),
    ),
    (  # a reset already past is no reset
        Outcome.USAGE_LIMIT,
        RunEnd(reset=NOW - timedelta(minutes=1)),
        Decision(Move.PAUSE, park="usage_limit", park_until=at(60), probe=True),
    ),
    # outages: the backoff doubles in a row (capped), the account is parked
    # from the breaker on
    (Outcome.OUTAGE, RunEnd(outages_in_a_row=1), Decision(Move.RETRY, retry_in=30)),
    (Outcome.OUTAGE, RunEnd(outages_in_a_row=2), Decision(Move.RETRY, retry_in=60)),
    (
        Outcome.OUTAGE,
        RunEnd(outages_in_a_row=3),
        Decision(Move.RETRY, retry_in=100, park="outage", park_until=at(100)),
    ),
    (
        Outcome.OUTAGE,
        RunEnd(outages_in_a_row=7),
        Decision(Move.RETRY, retry_in=100, park="outage", park_until=at(100)),
    ),
    # a login or credit that needs a person: parked with no end, loop stops
    (
        Outcome.NEEDS_HUMAN,
        RunEnd(),
        Decision(Move.PAUSE, park="needs_human", ends_loop=True, exit_status=P),
    ),
    # interrupted: by the loop's own stop, or from outside (once, twice)
    (Outcome.INTERRUPTED, RunEnd(stopped_by_loop=True), Decision(Move.PAUSE, ends_loop=True)),
    (Outcome.INTERRUPTED, RunEnd(), Decision(Move.PAUSE, retry_in=45)),
    (Outcome.INTERRUPTED, RunEnd(stopped_outside_before=True), Decision(Move.FAIL)),
    # over its budget, what would retry is held for a person instead
    (Outcome.TASK_FAILURE, RunEnd(over_budget=True), Decision(Move.HOLD)),
    (Outcome.TIMED_OUT, RunEnd(over_budget=True), Decision(Move.HOLD)),
    (Outcome.OUTAGE, RunEnd(over_budget=True, outages_in_a_row=5), Decision(Move.HOLD)),
    (  # ... and a usage limit still parks the account
        Outcome.USAGE_LIMIT,
        RunEnd(over_budget=True, reset=LATER),
        Decision(Move.HOLD, park="usage_limit", park_until=LATER),
    ),
    (Outcome.DONE, RunEnd(over_budget=True), Decision(Move.DONE)),
    # tools denied: a person is asked, instead of a blind retry
    (Outcome.TASK_FAILURE, RunEnd(denied=True), Decision(Move.ASK)),
    (Outcome.TIMED_OUT, RunEnd(denied=True), Decision(Move.ASK)),
    (Outcome.DONE, RunEnd(denied=True), Decision(Move.DONE)),
    (
        Outcome.USAGE_LIMIT,
        RunEnd(denied=True, reset=LATER),
        Decision(Move.PAUSE, park="usage_limit", park_until=LATER),
    ),
    # over budget comes before denied
    (Outcome.TASK_FAILURE, RunEnd(over_budget=True, denied=True), Decision(Move.HOLD)),
    # a tool call deferred by a hook (Claude Code's "defer"): a person
    # answers; never done, no attempt spent, the loop goes on
    (Outcome.NEEDS_INPUT, RunEnd(), Decision(Move.ASK)),
    (Outcome.NEEDS_INPUT, RunEnd(over_budget=True), Decision(Move.ASK)),
    # a call an --ask-for rule names: held until a person decides it, even
    # over its budget (issue 43)
    (Outcome.NEEDS_APPROVAL, RunEnd(), Decision(Move.APPROVAL)),
    (Outcome.NEEDS_APPROVAL, RunEnd(over_budget=True, denied=True), Decision(Move.APPROVAL)),
]


@pytest.mark.parametrize("outcome, run, expected", TABLE)
def test_what_each_end_of_a_run_does(outcome, run, expected):
    assert decide(outcome, RULES, NOW, run) == expected


def test_every_outcome_a_run_can_end_with_has_its_rows():
    """Adding an outcome is its member, its branch of decide and its rows
    here: a member without a row fails (how the queue itself ends a run,
    lease_lost and over_budget, is ``Settled``, no outcome)."""
    assert set(Outcome) - {row[0] for row in TABLE} == set()


def test_the_hook_counts_a_stop_failure_outage_as_the_breakers_worth():
    """The StopFailure hook passes the breaker as the count: one outage the
    client gave up on parks the account, as the breaker-th would."""
    got = decide(Outcome.OUTAGE, RULES, NOW, RunEnd(outages_in_a_row=RULES.outage_breaker))
    assert got.park == "outage" and got.park_until == at(outage_backoff(RULES, 3))


@pytest.mark.parametrize("n, seconds", [(0, 30), (1, 30), (2, 60), (3, 100), (30, 100)])
def test_the_outage_backoff_doubles_up_to_its_cap(n, seconds):
    assert outage_backoff(RULES, n) == seconds


def test_the_outcomes_that_wait_on_an_account_come_from_the_table():
    """The digest's lists (tasks that waited on their account; runs of a
    limit or an outage) are decide's, passed to its query, never a copy."""
    from watchdog.agents.decide import account_outcomes

    assert account_outcomes() == (
        ["usage_limit", "outage", "needs_human"],
        ["usage_limit", "outage"],
    )
    digest = (Path(__file__).parents[2] / "watchdog" / "sql" / "digest.sql").read_text()
    assert "'usage_limit'" not in digest and "'needs_human'" not in digest
