"""What a run's end says (issue 42 item 1): for its outcome and what
:func:`~watchdog.agents.decide.decide` made of it, the line the loop prints,
the reason a task put back without an attempt spent is given, and the error
of an attempt spent. Pure, beside ``decide``'s table: the loop applies a
decision and says these words, with no chain of its own."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..ids import short_id
from ..text import escape_controls, one_line
from .decide import Decision, Move
from .outcome import Outcome, Report, Verdict, failure_text

#: the most of a title a loop's line shows
TITLE_CHARS = 60


def task_name(task: uuid.UUID | str, title: str) -> str:
    """A task as every line of the loop names it: its short id (what every
    command takes) and its title, on one line."""
    return f'task {short_id(task)} "{escape_controls(one_line(title, TITLE_CHARS))}"'


def due_words(agent: str, due: str) -> str:
    """Why nothing was claimed: the agent's next task waits until ``due``
    (the person's time)."""
    return f"the next task of {agent!r} is due at {due} (a retry's backoff or its --not-before)"


def held_words(agent: str) -> str:
    """Why nothing was claimed: a due task is held (R4: not an empty backlog)."""
    return (
        f"a task of {agent!r} is held by a lease (maybe a dead loop's) or waits for room "
        "under its concurrency key"
    )


def nothing_to_claim(agent: str, due: str | None, held: bool) -> str:
    """`afk claim`'s line when it took nothing: why, not only that."""
    why = [w for w in (due and due_words(agent, due), held and held_words(agent)) if w]
    if why:
        return "; ".join(why)
    return (
        f"no task of {agent!r} is due (none is left to do, or those left wait for a "
        "person or another task)"
    )


def failed_line(name: str, line: str, *, state: str, attempts: int, max_attempts: int,
                due: str | None) -> str:  # fmt: skip
    """The loop's line of an attempt spent, once the queue said what became
    of the task: tried again at ``due`` (the person's time), or failed."""
    if state == "failed":
        return f"{name}: {line}; failed, {attempts} of {max_attempts} attempts spent"
    when = due or "once it is claimed"
    return f"{name}: {line}; retry at {when}, attempt {attempts} of {max_attempts} spent"


@dataclass(frozen=True)
class Said:
    #: the loop's line of the run ("" for none: hold, ask, approval and a
    #: failure say their own)
    line: str
    #: the reason of a task put back with no attempt spent
    why: str
    #: the error of an attempt spent
    error: str
    #: what spent it, in the loop's line (:func:`failed_line`)
    spent: str = ""


def words(
    kind: Outcome,
    d: Decision,
    report: Report,
    verdict: Verdict,
    line: str,
    *,
    task: uuid.UUID,
    account: str,
    outages: int,
    title: str = "",
    scrub: Callable[[str], str] = lambda text: text,
) -> Said:
    """What a run of ``task`` under ``account`` that ended with ``kind``
    (``line``: its verdict's line, scrubbed) says, once decided as ``d``;
    ``outages``: the outages in a row, this one included."""
    stopped = scrub(
        f"{line}\n\nthe agent's last lines:\n{report.tail or '(none: it printed nothing)'}"
    )
    return Said(
        _line(kind, d, report, line, task_name(task, title), account, outages),
        _why(kind, d, report, line, stopped),
        _error(kind, report, verdict, line, stopped, scrub),
        _spent(kind, report, line),
    )


def _spent(kind: Outcome, report: Report, line: str) -> str:
    if kind is Outcome.TIMED_OUT:
        return f"{line}: stopped"
    if kind is Outcome.STALLED:
        return f"{line}, twice in a row: stopped"
    if kind is Outcome.INTERRUPTED:
        return f"its agent was stopped from outside twice in a row (exit {report.exit_status})"
    return line


def _error(
    kind: Outcome,
    report: Report,
    verdict: Verdict,
    line: str,
    stopped: str,
    scrub: Callable[[str], str],
) -> str:
    if kind is Outcome.TASK_FAILURE:
        return scrub(report.failure or failure_text(report, verdict))
    if kind is Outcome.STALLED:
        return f"{line}, twice in a row\n\n{stopped}"
    if kind is Outcome.INTERRUPTED:
        return (
            f"the agent was stopped from outside twice in a row (exit "
            f"{report.exit_status}); the agent's last lines:\n{report.tail}"
        )
    return stopped  # timed out


def _why(kind: Outcome, d: Decision, report: Report, line: str, stopped: str) -> str:
    if kind is Outcome.STALLED:
        return stopped[:1000]
    if kind is Outcome.OUTAGE:
        return f"provider outage: {line}; retried in {d.retry_in or 0:g}s"
    if kind is Outcome.USAGE_LIMIT:
        return f"usage limit: {line}"
    if kind is Outcome.NEEDS_HUMAN:
        return f"needs a human: {line}"
    if kind is Outcome.CANNOT_START:
        return f"paused: {line}"
    if d.ends_loop:  # interrupted: the loop was stopped
        return "paused: the supervisor was stopped"
    return (
        f"paused: the agent was stopped from outside (exit {report.exit_status}); "
        f"due again in {d.retry_in or 0:g}s"
    )


def _line(
    kind: Outcome,
    d: Decision,
    report: Report,
    line: str,
    name: str,
    account: str,
    outages: int,
) -> str:
    if d.move is Move.DONE:
        return f"{name}: done"
    if d.move in (Move.HOLD, Move.ASK, Move.APPROVAL):
        return ""  # (hold, ask and approval say their own)
    if d.move is Move.FAIL:
        return ""  # (said once the queue says what became of it: failed_line)
    if kind is Outcome.STALLED:
        return f"{name}: {line}: stopped, and put back with no attempt spent"
    if kind is Outcome.CANNOT_START:
        return (
            f"{line}; {name} paused with no attempt spent, and no other "
            "task started: fix the command, then run afk loop again"
        )
    if kind is Outcome.USAGE_LIMIT:
        return f"{name}: put back: account {account!r} hit a usage limit: {line}"
    if kind is Outcome.OUTAGE:
        return (
            f"{name}: put back: provider outage ({outages} in a row): {line}; "
            f"retried in {d.retry_in or 0:g}s"
        )
    if kind is Outcome.NEEDS_HUMAN:
        return (
            f"{name}: put back: account {account!r} needs a person: {line} (then: afk limit "
            f"--account {account} --clear)"
        )
    if d.ends_loop:
        return f"interrupted: {name} paused"
    return (
        f"{name}: its agent was stopped by a signal the loop did not send "
        f"(exit {report.exit_status}); paused without an attempt spent, going on"
    )
