"""What the end of an agent's run does, decided in one place: to the task
(finished, failed with an attempt spent, put back without one, held for a
person), to the account the agent ran under (parked, until when) and to
the loop (it goes on, or exits with a status). ``afk loop`` applies the
decision to a run it supervised; the StopFailure hook applies its account
half to a turn the client ended. A pure function, tested as a table
(tests/unit/test_decide.py): a new outcome is one branch here and one row
there.

The outage rule, the same for both: an outage puts the task back after a
backoff (the base, doubled for each outage in a row, capped); from the
``outage_breaker``-th outage in a row on, the account is parked for that
backoff too, so every loop on it waits instead of hammering the provider.
A StopFailure of ``overloaded`` or ``server_error`` is the client's verdict
after its own retries (Claude Code retries such errors ten times before it
gives up: https://code.claude.com/docs/en/errors), so the hook counts it
as the breaker's worth of outages in a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from ..config import LoopSettings
from ..errors import EXIT_PARKED
from .outcome import Outcome

#: the loop's exit status when a person must act (a login, a command that
#: cannot start)

#: outcomes that would retry a task: over its budget, it is held instead
HELD_OVER_BUDGET = (Outcome.TASK_FAILURE, Outcome.TIMED_OUT, Outcome.OUTAGE, Outcome.USAGE_LIMIT)
#: outcomes that a person decides instead when the agent was denied tools
ASKS_WHEN_DENIED = (Outcome.TASK_FAILURE, Outcome.TIMED_OUT)


class Move(StrEnum):
    """What happens to the task."""

    #: finished: done
    DONE = "done"
    #: failed: an attempt spent (retried after the queue's backoff, or failed
    #: for good at max_attempts)
    FAIL = "fail"
    #: back to todo, no attempt spent, due again after ``retry_in``
    RETRY = "retry"
    #: paused, no attempt spent (due again after ``retry_in`` if given)
    PAUSE = "pause"
    #: held for a person (over its budget): claimed by no one until then
    HOLD = "hold"
    #: a question for a person (the tools it was denied)
    ASK = "ask"
    #: held until a person decides the calls it waits for (afk approve, afk deny)
    APPROVAL = "approval"


@dataclass(frozen=True)
class Rules:
    """The settings a decision reads."""

    #: how long a usage limit with no reset time read parks the account:
    #: the first, doubled for each such limit in a row, up to the cap
    limit_probe_first_seconds: float = 60
    limit_probe_seconds: float = 1800
    #: an outage's backoff, doubled for each one in a row, up to the cap
    outage_backoff_seconds: float = 60
    outage_backoff_cap_seconds: float = 1800
    #: the outage in a row from which the account is parked too
    outage_breaker: int = 3
    #: how soon a task stopped from outside is due again
    requeue_seconds: float = 30


def rules_of(loop: LoopSettings, requeue_seconds: float) -> Rules:
    """The rules of a loop's (or a hook's) settings; ``requeue_seconds`` is
    the queue's backoff base."""
    return Rules(
        limit_probe_first_seconds=loop.limit_probe_first_seconds,
        limit_probe_seconds=loop.limit_probe_seconds,
        outage_backoff_seconds=loop.transient_backoff_seconds,
        outage_backoff_cap_seconds=loop.transient_backoff_cap_seconds,
        outage_breaker=loop.outage_breaker,
        requeue_seconds=requeue_seconds,
    )


@dataclass(frozen=True)
class Decision:
    move: Move
    #: seconds before the task is due again (None: at once)
    retry_in: float | None = None
    #: the account's parking: its kind (usage_limit, outage, needs_human),
    #: until when (None: until a person clears it)
    park: str | None = None
    park_until: datetime | None = None
    #: a usage limit that named no reset time: the parking is a probe
    probe: bool = False
    #: the loop exits after this run; with ``exit_status`` None, with the
    #: status of its own stop
    ends_loop: bool = False
    exit_status: int | None = None


@dataclass(frozen=True)
class RunEnd:
    """What is known of the run's end besides its outcome."""

    #: the reset time the agent's output named (a usage limit)
    reset: datetime | None = None
    #: outages in a row under this supervisor, this one included
    outages_in_a_row: int = 0
    #: usage limits in a row that named no reset, this one included
    guessed_in_a_row: int = 1
    #: the task's runs cost its budget
    over_budget: bool = False
    #: the client denied the agent tools it asked for
    denied: bool = False
    #: the loop itself was stopped (SIGINT, SIGTERM)
    stopped_by_loop: bool = False
    #: the task's last run was also stopped by a signal the loop did not send
    stopped_outside_before: bool = False
    #: the task's last ended run stalled too
    stalled_before: bool = False


def outage_backoff(rules: Rules, in_a_row: int) -> float:
    """The backoff of the ``in_a_row``-th outage in a row."""
    return float(
        min(
            rules.outage_backoff_seconds * 2 ** max(in_a_row - 1, 0),
            rules.outage_backoff_cap_seconds,
        )
    )


def usage_limit_until(
    rules: Rules, reset: datetime | None, now: datetime, guessed_in_a_row: int = 1
) -> datetime:
    """When a usage limit ends: the reset the agent named, else a guess, a
    probe that backs off: the first after a minute (the API may answer by
    then), doubled for each guess in a row, up to the cap."""
    if reset is not None and reset > now:
        return reset
    return now + timedelta(seconds=probe_after(rules, guessed_in_a_row))


def probe_after(rules: Rules, guessed_in_a_row: int) -> float:
    """Seconds until the ``guessed_in_a_row``-th guessed reset is probed."""
    first = min(rules.limit_probe_first_seconds, rules.limit_probe_seconds)
    return float(min(first * 2 ** max(guessed_in_a_row - 1, 0), rules.limit_probe_seconds))


def decide(outcome: Outcome, rules: Rules, now: datetime, run: RunEnd | None = None) -> Decision:
    """What a run that ended with ``outcome`` does (see the module's text)."""
    run = run or RunEnd()
    limit = Decision(
        Move.PAUSE,
        park="usage_limit",
        park_until=usage_limit_until(rules, run.reset, now, run.guessed_in_a_row),
        probe=run.reset is None or run.reset <= now,
    )
    if outcome is Outcome.NEEDS_APPROVAL:  # a call a rule names, waiting for a person
        return Decision(Move.APPROVAL)
    if outcome is Outcome.NEEDS_INPUT:  # a tool call deferred for a person
        return Decision(Move.ASK)
    if run.over_budget and outcome in HELD_OVER_BUDGET:
        if outcome is Outcome.USAGE_LIMIT:  # the account is parked all the same
            return Decision(Move.HOLD, park=limit.park, park_until=limit.park_until)
        return Decision(Move.HOLD)
    if run.denied and outcome in ASKS_WHEN_DENIED:
        return Decision(Move.ASK)
    if outcome is Outcome.DONE:
        return Decision(Move.DONE)
    if outcome in (Outcome.TASK_FAILURE, Outcome.TIMED_OUT):
        return Decision(Move.FAIL)
    if outcome is Outcome.STALLED:
        # the first stall in a row spends nothing (a hang is more often the
        # harness's than the task's); the second spends one
        return Decision(Move.FAIL) if run.stalled_before else Decision(Move.RETRY)
    if outcome is Outcome.CANNOT_START:
        return Decision(Move.PAUSE, ends_loop=True, exit_status=EXIT_PARKED)
    if outcome is Outcome.USAGE_LIMIT:
        return limit
    if outcome is Outcome.OUTAGE:
        backoff = outage_backoff(rules, run.outages_in_a_row)
        if run.outages_in_a_row >= rules.outage_breaker:
            until = now + timedelta(seconds=backoff)
            return Decision(Move.RETRY, retry_in=backoff, park="outage", park_until=until)
        return Decision(Move.RETRY, retry_in=backoff)
    if outcome is Outcome.NEEDS_HUMAN:
        return Decision(Move.PAUSE, park="needs_human", ends_loop=True, exit_status=EXIT_PARKED)
    # interrupted
    if run.stopped_by_loop:
        return Decision(Move.PAUSE, ends_loop=True)
    if run.stopped_outside_before:  # the second time in a row: the task's
        return Decision(Move.FAIL)
    return Decision(Move.PAUSE, retry_in=rules.requeue_seconds)


def account_outcomes() -> tuple[list[str], list[str]]:
    """From :func:`decide` itself: the outcomes whose run may park its
    account (a task that waited on its account), and of those the ones that
    wait for a reset rather than a person (the provider's: a limit, an
    outage). The digest's queries take them as parameters, never as a list
    of their own."""
    rules, now = Rules(), datetime(2000, 1, 1, tzinfo=UTC)
    worst = RunEnd(outages_in_a_row=rules.outage_breaker)
    decided = {o: decide(o, rules, now, worst) for o in Outcome}
    parking = [str(o) for o, d in decided.items() if d.park is not None]
    resets = [str(o) for o, d in decided.items() if d.park is not None and d.park_until]
    return parking, resets
