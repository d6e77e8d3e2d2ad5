"""How an agent's run ended, read from what it said: the classes a supervisor
acts on (``afk loop``, ``examples/worker.py``, the ``StopFailure`` hook).
The classes are the members of :class:`Outcome`, each said at its member;
what each does to the task and the account is ``decide``'s table. How the
queue itself ends a run (its lease lost, its budget spent) is
:class:`Settled`, never a class of a run's output.

Only the agent's last few lines are read (and its JSON result and rate-limit
objects, when it prints them: Claude Code's ``--output-format json`` and
``stream-json``, Codex CLI's ``exec --json``), never the whole output: a tool
result that quotes "Not logged in" from a file the agent read must not park
an account. This module reads no database and no clock of its own: the
caller passes the database's now.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import BadInput
from ..text import clean, one_line


class Outcome(StrEnum):
    """What a run's end is classified as."""

    #: the agent exited 0
    DONE = "done"
    #: the account hit its usage limit: the reset is read from the message
    #: (an epoch, a clock time, a weekday and time, "in 2 hours"), else
    #: ``AFK_LIMIT_PROBE_SECONDS`` from now
    USAGE_LIMIT = "usage_limit"
    #: the provider is down or overloaded
    OUTAGE = "outage"
    #: logged out, a bad key, no credit: nothing more runs on this account
    #: until a person acts
    NEEDS_HUMAN = "needs_human"
    #: exit 130/143, or stopped by SIGINT/SIGTERM/SIGHUP/SIGKILL
    INTERRUPTED = "interrupted"
    #: anything else: the task's own failure
    TASK_FAILURE = "task_failure"
    #: the agent asked a person a question (`afk ask`): held until answered
    NEEDS_INPUT = "needs_input"
    #: a call an --ask-for rule names waits for a person's approval (issue
    #: 43): held, no attempt spent, until `afk approve` / `afk deny`
    NEEDS_APPROVAL = "needs_approval"
    #: the agent printed nothing and fired no hook for the stall time: stopped
    STALLED = "stalled"
    #: the run reached its cap (afk loop --max-run): stopped, an attempt spent
    TIMED_OUT = "timed_out"
    #: the agent's command could not run (not found, not executable, a bad
    #: interpreter): a person's problem, not the task's
    CANNOT_START = "cannot_start"


class Settled(StrEnum):
    """How the queue ended a run, where the run's end is not what decided
    it: never a verdict, never a row of ``decide``'s table."""

    #: the supervisor lost the task's lease while the agent ran
    LEASE_LOST = "lease_lost"
    #: the task's runs cost what its budget allows: held for a person,
    #: whatever the run's own end was
    OVER_BUDGET = "over_budget"


#: every outcome a run's record (``afk_run.outcome``) may hold
RUN_OUTCOMES: tuple[Outcome | Settled, ...] = (*Outcome, *Settled)


#: how an agent that a signal stopped exits (the signal's number, negated, or
#: a shell's 128 + N): INT, TERM, HUP and KILL, which a person or a supervisor
#: sends; an interrupt, not the task's failure
STOPPED_BY_A_SIGNAL = frozenset(
    code
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
    for code in (-sig, 128 + sig)
)
#: lines of the agent's output a verdict reads (the last ones, not blank)
TELLING_LINES = 3
#: lines of output kept as a run's tail and a failure's error text
TAIL_LINES = 20
#: characters of that tail
TAIL_CHARS = 4000
#: a JSON line longer than this is not parsed, and no more of one line is
#: read at a time (the rest of a longer one passes through unread)
MAX_JSON_LINE = 1 << 20
#: the most one run of an agent is believed to cost, in US dollars
MAX_RUN_COST = 1000.0
#: characters of one line of text kept (a longer one is cut)
MAX_KEPT_LINE = 2000

_APOS = "['\u2019]"
#: the built-in patterns, most specific class first. A pattern may name a
#: group ``reset``: the text the reset time is read from.
DEFAULT_PATTERNS: tuple[tuple[Outcome, str], ...] = (
    (Outcome.NEEDS_HUMAN, r"Not logged in"),
    (Outcome.NEEDS_HUMAN, r"Please run /login"),
    (Outcome.NEEDS_HUMAN, r"Invalid API key"),
    (Outcome.NEEDS_HUMAN, r"OAuth token (?:has )?(?:expired|been revoked|revoked)"),
    (Outcome.NEEDS_HUMAN, r"Credit balance is too low"),
    (Outcome.NEEDS_HUMAN, r"organi[sz]ation (?:has been |is |was )?disabled"),
    (Outcome.NEEDS_HUMAN, r"\b(?:authentication_failed|billing_error)\b"),
    (Outcome.USAGE_LIMIT, r"Claude AI usage limit reached\|(?P<reset>\d{9,13})"),
    (Outcome.USAGE_LIMIT, rf"You{_APOS}ve hit your (?:[\w-]+ )*?limit"),
    (
        Outcome.USAGE_LIMIT,
        r"\b(?:5-hour|five-hour|weekly|session|daily|usage|Opus|Sonnet) limit reached",
    ),
    (Outcome.USAGE_LIMIT, r"Request rejected \(429\)"),
    (Outcome.USAGE_LIMIT, r"API Error: 429\b"),
    (Outcome.USAGE_LIMIT, r"usage_limit_reached|last status: 429\b"),
    (Outcome.OUTAGE, r"API Error: 5\d\d\b"),
    (Outcome.OUTAGE, r"\b529\b|\bOverloaded\b|overloaded_error"),
    (Outcome.OUTAGE, r"Request timed out"),
    (Outcome.OUTAGE, r"Unable to connect to API"),
    (Outcome.OUTAGE, r"API Error: Connection (?:refused|reset|error)"),
    (Outcome.OUTAGE, r"\b(?:ECONNREFUSED|ECONNRESET|ETIMEDOUT|EAI_AGAIN)\b"),
    (Outcome.OUTAGE, r"Server is temporarily limiting requests"),
    (Outcome.OUTAGE, r"Internal server error|Service Unavailable|Bad Gateway|Gateway Timeout"),
    (Outcome.OUTAGE, r"last status: 5\d\d\b|stream disconnected before completion"),
)
#: the furthest reset believed: the longest real window (a weekly limit),
#: and a day more for zones and clocks. A later one is read as no reset at
#: all (the account is probed again), and said so: one line must not park an
#: account for centuries
MAX_RESET = timedelta(days=8)
#: characters of a telling line the patterns are tried on
MATCH_CHARS = 500
#: what a client puts before its own message on a line ("API Error: 529 ...",
#: "ERROR: ...", "[API Error: ...]", a bullet): a pattern counts where the
#: message starts, or anywhere in a line the client marks as its error
_CLIENT_PREFIX = re.compile(
    r"^[\s\[\u23bf\u25cf\u2717\u00d7\u2022>*-]*"
    r"(?P<prefix>(?:api error|stream error|error|fatal)\]?:)?",
    re.I,
)
#: where a reset time is said, when the pattern names no ``reset`` group
_RESET_HINT = re.compile(r"(?:\bresets?(?: at)?|\btry again)\s+(?P<reset>[^\n]+)", re.I)


def compile_patterns(extra: str = "") -> list[tuple[Outcome, re.Pattern[str]]]:
    """The built-in patterns after the user's own (``AFK_LIMIT_PATTERNS``
    and its siblings): lines of ``CLASS:REGEX`` (or a bare REGEX, a usage
    limit), tried first. A bad one is refused with its line number."""
    ours: list[tuple[Outcome, re.Pattern[str]]] = []
    for number, line in enumerate(extra.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, regex = line.partition(":")
        try:
            outcome = Outcome(kind.strip())
        except ValueError:
            if re.fullmatch(r"[A-Za-z_-]+", kind.strip()):  # a class, misspelt
                raise BadInput(
                    f"limit pattern {number}: {kind.strip()!r} is not a class "
                    "(usage_limit, outage, needs_human); a bare regular expression "
                    "that holds a colon is written usage_limit:REGEX"
                ) from None
            outcome, regex = Outcome.USAGE_LIMIT, line
        if outcome not in (Outcome.USAGE_LIMIT, Outcome.OUTAGE, Outcome.NEEDS_HUMAN):
            raise BadInput(f"limit pattern {number}: {kind} is not a class a pattern can name")
        try:
            ours.append((outcome, re.compile(regex, re.I)))
        except re.error as exc:
            raise BadInput(f"limit pattern {number} is not a regular expression: {exc}") from None
    return ours + [(o, re.compile(p, re.I)) for o, p in DEFAULT_PATTERNS]


@dataclass
class Report:
    """What a supervisor read of one run of the agent."""

    exit_status: int
    #: the last lines of stdout and stderr, in arrival order, cleaned
    lines: list[str] = field(default_factory=list)
    session_id: str | None = None
    cost_usd: float | None = None
    turns: int | None = None
    usage: dict[str, Any] | None = None
    #: the JSON result's text when it reported an error
    result_error: str | None = None
    #: the API's HTTP status in the JSON result, when it says one
    api_status: int | None = None
    #: a rejected rate_limit_event's reset (epoch seconds)
    rejected_until: float | None = None
    #: why a cost the agent reported was not believed
    cost_refused: str | None = None
    #: why the supervisor stopped the agent itself: "stalled" or "timed_out"
    stopped_for: str | None = None
    #: what it said (the line): seconds of silence, or the cap
    stopped_after: float | None = None
    #: why the agent's command could not run at all
    cannot_start: str | None = None
    #: whether the supervisor signalled the agent (a stop, a stall, the cap):
    #: an agent that ended by itself, done, is done even if a stop came after
    signalled: bool = False
    #: the tools the agent was denied (Claude Code's permission_denials):
    #: each {tool_name, tool_input}, bounded and scrubbed
    permission_denials: list[dict[str, Any]] | None = None
    #: a tool call a PreToolUse hook deferred (Claude Code's ``-p`` ends with
    #: ``stop_reason: "tool_deferred"``): {tool_name, tool_input}, or {} when
    #: the result names none; None when nothing was deferred
    deferred: dict[str, Any] | None = None
    #: what the supervisor adds to the run's record (a workspace's lineage,
    #: its check)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the error of a failure the supervisor found (a check that failed),
    #: instead of the agent's last lines
    failure: str | None = None

    def denied(self) -> str:
        """The denied tools as a person reads them: Bash(git push origin main), ..."""
        return ", ".join(describe_tool(d) for d in self.permission_denials or [])

    @property
    def tail(self) -> str:
        text = "\n".join(self.lines[-TAIL_LINES:])
        return text[-TAIL_CHARS:]

    def telling(self) -> list[str]:
        """The lines a verdict reads: the result's error, then the last few."""
        lines = [line for line in self.lines if line.strip()][-TELLING_LINES:]
        return ([self.result_error] if self.result_error else []) + lines

    def to_run(self, outcome: Outcome | Settled, scrub: Any = None) -> dict[str, Any]:
        """The run's record (``afk_run``)."""
        tail = scrub(self.tail) if scrub else self.tail
        return {
            "outcome": str(outcome),
            "exit_status": self.exit_status,
            "output_tail": tail,
            "session_id": self.session_id,
            "cost_usd": self.cost_usd,
            "turns": self.turns,
            "usage": self.usage,
            "permission_denials": self.permission_denials,
            **({"deferred": self.deferred} if self.deferred is not None else {}),
            **self.extra,
        }


class OutputReader:
    """Reads an agent's output as it streams: keeps the last lines and the
    JSON objects that say how the run went. Thread-safe enough for two
    readers (stdout, stderr) appending to one deque."""

    def __init__(self, keep: int = 200) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self.found: dict[str, Any] = {}
        self._codex_usage: dict[str, int] = {}
        #: lines of stdout since the last result object: a result with text
        #: after it is not what the agent ended with, and decides nothing
        self._after_result = 0
        #: when the agent last said anything (time.monotonic()): a sign of life
        self.last_at = time.monotonic()

    def feed(self, raw: bytes, stream: str = "stdout") -> None:
        """One line of output (at most :data:`MAX_JSON_LINE` bytes of it) of
        ``stream``. Never raises: whatever cannot be read is text, and a
        reader that died would leave the rest of the night's output unread."""
        try:
            self._feed(raw, stream)
        except Exception as exc:  # a bug of ours must not stop the reading
            self.lines.append(f"(afk could not read a line of output: {type(exc).__name__})")

    def _feed(self, raw: bytes, stream: str) -> None:
        self.last_at = time.monotonic()
        text = clean(raw.decode("utf-8", "replace")).rstrip("\n")
        stripped = text.strip()
        if stripped.startswith("{") and len(stripped) < MAX_JSON_LINE:
            try:
                obj = json.loads(stripped)
            except (ValueError, RecursionError):  # nested too deep: text
                obj = None
            if isinstance(obj, dict):
                self._json(obj)
                return
        if stream == "stdout" and stripped:
            self._after_result += 1
        for line in text.split("\n"):
            self.lines.append(line if len(line) <= MAX_KEPT_LINE else line[:MAX_KEPT_LINE] + "…")

    def _json(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "result":  # Claude Code's json / stream-json result
            self.found["result"] = obj
            self._after_result = 0
        elif kind == "rate_limit_event":
            nested = obj.get("rate_limit_info")
            info: dict[str, Any] = nested if isinstance(nested, dict) else obj
            if str(info.get("status", "")).lower() == "rejected":
                self.found["rejected"] = info
        elif kind == "thread.started" and isinstance(obj.get("thread_id"), str):
            self.found["session_id"] = obj["thread_id"]  # Codex CLI exec --json
        elif kind == "turn.completed" and isinstance(obj.get("usage"), dict):
            for key, value in obj["usage"].items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self._codex_usage[key] = self._codex_usage.get(key, 0) + value
            self.found["codex_usage"] = dict(self._codex_usage)
        elif kind in ("turn.failed", "error"):
            inner = obj.get("error")
            error: dict[str, Any] = inner if isinstance(inner, dict) else obj
            message = error.get("message")
            if isinstance(message, str):
                self.lines.append(clean(message))

    def report(self, exit_status: int) -> Report:
        r = Report(exit_status, list(self.lines))
        result = self.found.get("result")
        if isinstance(result, dict):
            r.session_id = _str(result.get("session_id"))
            r.cost_usd, r.cost_refused = believed_cost(result.get("total_cost_usd"))
            turns = result.get("num_turns")
            r.turns = turns if isinstance(turns, int) and not isinstance(turns, bool) else None
            r.usage = result.get("usage") if isinstance(result.get("usage"), dict) else None
            last_word = self._after_result == 0  # nothing on stdout after it
            status = result.get("api_error_status")
            r.api_status = status if isinstance(status, int) and last_word else None
            text = result.get("result")
            failed = result.get("is_error") is True and last_word
            if failed and isinstance(text, str) and text.strip():
                r.result_error = clean(text).strip()[:MAX_KEPT_LINE]
            r.permission_denials = denials(result.get("permission_denials"))
            if result.get("stop_reason") == "tool_deferred" and last_word:
                r.deferred = deferred_call(result.get("deferred_tool_use"))
            rejected = self.found.get("rejected")
            if failed and isinstance(rejected, dict):  # the limit that ended the run
                r.rejected_until = _epoch(rejected.get("resetsAt", rejected.get("resets_at")))
        elif "session_id" in self.found:
            r.session_id = self.found["session_id"]
        if r.usage is None and "codex_usage" in self.found:
            r.usage = self.found["codex_usage"]
        return r


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    #: the line that decided it (for a reason and the logs)
    line: str
    #: a usage limit's reset, when the message says one
    reset: datetime | None = None


def classify(
    report: Report,
    now: datetime,
    tz: tzinfo,
    patterns: list[tuple[Outcome, re.Pattern[str]]] | None = None,
    *,
    interrupted: bool = False,
) -> Verdict:
    """The outcome of a run, from its exit status and its telling lines.
    ``now`` is the database's clock (clock times are read relative to it, in
    zone ``tz`` unless the message names one)."""
    status = report.exit_status
    if interrupted and (status != 0 or report.signalled):
        # (an agent that finished by itself before the stop reached it: done)
        return Verdict(Outcome.INTERRUPTED, f"interrupted (exit {status})")
    if report.stopped_for == "stalled":
        return Verdict(
            Outcome.STALLED,
            f"stalled: no output and no hook for {report.stopped_after or 0:g}s",
        )
    if report.stopped_for == "timed_out":
        return Verdict(
            Outcome.TIMED_OUT, f"timed out: still running after {report.stopped_after or 0:g}s"
        )
    if report.cannot_start is not None:
        return Verdict(Outcome.CANNOT_START, report.cannot_start)
    if status in STOPPED_BY_A_SIGNAL:
        return Verdict(Outcome.INTERRUPTED, f"interrupted (exit {status})")
    if report.deferred is not None:  # ended waiting for a person, whatever its exit
        line = "a tool call was deferred for a person"
        return Verdict(
            Outcome.NEEDS_INPUT,
            f"{line}: {describe_tool(report.deferred)}" if report.deferred else line,
        )
    if status == 0:
        return Verdict(Outcome.DONE, "exit 0")
    if report.rejected_until is not None:
        try:
            until: datetime | None = datetime.fromtimestamp(report.rejected_until, UTC)
        except (OverflowError, OSError, ValueError):
            until = None
        return believed(Verdict(Outcome.USAGE_LIMIT, "rate_limit_event: rejected", until), now)
    patterns = patterns if patterns is not None else compile_patterns()
    for whole in report.telling():
        line = whole[:MATCH_CHARS]
        for outcome, pattern in patterns:
            match = said_by_the_client(pattern, line)
            if match is None:
                continue
            reset = _reset_of(match, line, now, tz) if outcome is Outcome.USAGE_LIMIT else None
            return believed(Verdict(outcome, one_line(line), reset), now)
    if report.api_status == 429:
        return Verdict(Outcome.USAGE_LIMIT, f"API error {report.api_status}")
    if report.api_status is not None and report.api_status >= 500:
        return Verdict(Outcome.OUTAGE, f"API error {report.api_status}")
    if status < 0:
        return Verdict(Outcome.TASK_FAILURE, f"agent killed by signal {-status}")
    return Verdict(Outcome.TASK_FAILURE, f"agent exited {status}")


def limit_reset(
    lines: list[str],
    now: datetime,
    tz: tzinfo,
    patterns: list[tuple[Outcome, re.Pattern[str]]] | None = None,
) -> datetime | None:
    """The reset a usage-limit message among ``lines`` names (a StopFailure
    hook's payload: its message and details), believed as :func:`classify`
    believes one; None when none does."""
    patterns = patterns if patterns is not None else compile_patterns()
    for whole in lines:
        line = whole[:MATCH_CHARS]
        for outcome, pattern in patterns:
            match = said_by_the_client(pattern, line) if outcome is Outcome.USAGE_LIMIT else None
            if match is not None:
                reset = _reset_of(match, line, now, tz)
                return believed(Verdict(outcome, "", reset), now).reset
    return None


def _reset_of(match: re.Match[str], line: str, now: datetime, tz: tzinfo) -> datetime | None:
    """The reset a usage-limit pattern's match names: its ``reset`` group,
    else the words after "resets" or "try again" on its line."""
    hint = match.groupdict().get("reset")
    if hint is None:
        found = _RESET_HINT.search(line, match.start())
        hint = found.group("reset") if found else None
    return reset_time(hint, now, tz) if hint else None


def said_by_the_client(pattern: re.Pattern[str], line: str) -> re.Match[str] | None:
    """``pattern``'s match in ``line`` when the line is the message itself:
    the match starts the line (after a bullet or a bracket), or the line is
    one the client marks as its error ("API Error: ...", "ERROR: ..."). A
    message quoted in the middle of other text (a grep hit, a test's
    fixture) is not the agent's own, and says nothing about the account."""
    start = _CLIENT_PREFIX.match(line)
    assert start is not None  # (it matches the empty string)
    if start.group("prefix"):
        return pattern.search(line)
    match = pattern.search(line, start.end())
    return match if match is not None and match.start() == start.end() else None


def believed(verdict: Verdict, now: datetime) -> Verdict:
    """``verdict`` with a reset further than :data:`MAX_RESET` dropped (the
    account is probed instead), and its line saying so."""
    if verdict.reset is None or verdict.reset <= now + MAX_RESET:
        return verdict
    try:
        said = f"{verdict.reset:%Y-%m-%d %H:%M %Z}".strip()
    except ValueError:
        said = "a date out of range"
    days = MAX_RESET.days
    note = f" (its reset, {said}, is more than {days} days off: not believed; probing)"
    return Verdict(verdict.outcome, one_line(verdict.line + note, 400), None)


def failure_text(report: Report, verdict: Verdict, scrub: Any = None) -> str:
    """A task failure's error: its telling line first (the digest groups by
    it), then how the agent exited and its last lines."""
    lines = [line for line in report.telling() if line.strip()]
    head = lines[-1].strip() if lines else verdict.line
    text = f"{head}\n\n{verdict.line}; the agent's last lines:\n{report.tail}"
    return scrub(text) if scrub else text


# -- reset times -------------------------------------------------------------

_RELATIVE = re.compile(
    r"(\d+(?:\.\d+)?)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b", re.I
)
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_CLOCK_12 = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s?m\b\.?", re.I)
_CLOCK_24 = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b")
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEKDAY = re.compile(r"\b(mon|tue|wed|thu|fri|sat|sun)[a-z]*\b", re.I)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_DAY = re.compile(
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})\b", re.I
)
_ZONE = re.compile(r"\b((?:[A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?)|UTC|GMT)\b")


def reset_time(hint: str, now: datetime, tz: tzinfo) -> datetime | None:
    """:func:`read_reset`, None for a time no calendar holds ("in 10^12 days")."""
    try:
        return read_reset(hint, now, tz)
    except (OverflowError, OSError, ValueError):
        return None


def read_reset(hint: str, now: datetime, tz: tzinfo) -> datetime | None:
    """When a usage limit resets, from the words after "resets" (or "try
    again"): an epoch (seconds or milliseconds), an ISO 8601 time, a duration
    ("in 2 hours 5 minutes"), or a clock time ("3:45pm", "5am", "15:45")
    with an optional weekday or month and day, in the zone the text names
    ("(Europe/Berlin)") or ``tz``: the next such time after ``now``. None when
    nothing can be read."""
    hint = hint.strip().strip(".")
    digits = re.match(r"^(\d{9,13})\b", hint)
    if digits:
        return datetime.fromtimestamp(_epoch(digits.group(1)) or 0, UTC)
    parsed: datetime | None = None
    with contextlib.suppress(ValueError):
        parsed = datetime.fromisoformat(hint.split()[0]) if hint else None
    if parsed is not None and parsed.tzinfo is not None:
        return parsed
    if re.match(r"^in\b", hint, re.I):
        seconds = sum(
            float(n) * _UNIT_SECONDS[unit[0].lower()] for n, unit in _RELATIVE.findall(hint)
        )
        return now + timedelta(seconds=seconds) if seconds > 0 else None
    zone = _zone(hint) or tz
    hour = minute = None
    clock = _CLOCK_12.search(hint)
    if clock:
        hour = int(clock.group(1)) % 12 + (12 if clock.group(3).lower() == "p" else 0)
        minute = int(clock.group(2) or 0)
        if int(clock.group(1)) > 12 or minute > 59:
            return None
    else:
        clock24 = _CLOCK_24.search(hint)
        if clock24:
            hour, minute = int(clock24.group(1)), int(clock24.group(2))
    if hour is None or minute is None:
        return None
    local = now.astimezone(zone)
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    month_day = _MONTH_DAY.search(hint)
    weekday = _WEEKDAY.search(hint)
    if month_day:
        month = _MONTHS.index(month_day.group(1).lower()[:3]) + 1
        try:
            candidate = candidate.replace(month=month, day=int(month_day.group(2)))
            if candidate <= local:
                candidate = candidate.replace(year=candidate.year + 1)
        except ValueError:
            return None
    elif weekday:
        ahead = (_WEEKDAYS.index(weekday.group(1).lower()) - candidate.weekday()) % 7
        candidate += timedelta(days=ahead)
        if candidate <= local:
            candidate += timedelta(days=7)
    elif candidate <= local:
        candidate += timedelta(days=1)
    # the wall-clock time in its zone (a day added across a DST change keeps it)
    return candidate.replace(tzinfo=zone)


def reading_zone(env: Mapping[str, str] | None = None) -> tzinfo:
    """The zone a clock time in an agent's words is read in (and a time a
    person types without one): ``TZ`` of the environment the agent ran in,
    else this host's. The one resolver of it; the person's day (the digest,
    the daily budget) is :meth:`~watchdog.config.DigestSettings.day_zone`."""
    name = (os.environ if env is None else env).get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    import tzlocal

    zone: tzinfo = tzlocal.get_localzone()
    return zone


def _zone(text: str) -> tzinfo | None:
    for name in _ZONE.findall(text):
        if name in ("UTC", "GMT"):
            return UTC
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return None


def _epoch(value: Any) -> float | None:
    """Seconds since the epoch from seconds, milliseconds or an ISO string."""
    if isinstance(value, str):
        if value.strip().isdigit():
            value = int(value.strip())
        else:
            try:
                return datetime.fromisoformat(value).timestamp()
            except ValueError:
                return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value / 1000 if value > 1e11 else float(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


#: denied tools kept of one run, and characters of each one's input
MAX_DENIALS = 20
MAX_DENIED_INPUT = 500


def denials(value: Any) -> list[dict[str, Any]] | None:
    """Claude Code's ``permission_denials`` (each ``{tool_name, tool_use_id,
    tool_input}``) as a run keeps them: the tool and its input, bounded, with
    every credential hidden; None when there are none."""
    if not isinstance(value, list):
        return None
    out: list[dict[str, Any]] = []
    for item in value[:MAX_DENIALS]:
        if not isinstance(item, dict) or not isinstance(item.get("tool_name"), str):
            continue
        raw = item.get("tool_input")
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
        text = clean(text)
        tool_input: Any = text[:MAX_DENIED_INPUT]
        if isinstance(raw, dict) and len(text) <= MAX_DENIED_INPUT:
            with contextlib.suppress(ValueError):
                tool_input = json.loads(text)  # (scrubbed, as an object again)
        out.append({"tool_name": clean(item["tool_name"])[:100], "tool_input": tool_input})
    return out or None


def deferred_call(value: Any) -> dict[str, Any]:
    """Claude Code's ``deferred_tool_use`` (``{id, name, input}``) as a run
    keeps it: the tool and its input, as :func:`denials` keeps a denied one;
    {} when the result names no call."""
    if not isinstance(value, dict):
        return {}
    kept = denials([{"tool_name": value.get("name"), "tool_input": value.get("input")}])
    return kept[0] if kept else {}


def describe_tool(denial: dict[str, Any]) -> str:
    """``Bash(git push origin main)``: a tool and the gist of its input."""
    given = denial.get("tool_input")
    if isinstance(given, dict):
        gist = next(
            (given[k] for k in ("command", "file_path", "path", "url", "pattern") if k in given),
            json.dumps(given, ensure_ascii=False),
        )
    else:
        gist = given
    return f"{denial.get('tool_name')}({one_line(str(gist or ''), 80)})"


def believed_cost(value: Any) -> tuple[float | None, str | None]:
    """A run's cost as its agent reported it, when it can be one: a finite
    number of dollars from 0 to :data:`MAX_RUN_COST`; else None, and why (a
    negative cost would pay a budget back, a huge one fills every page)."""
    if value is None:
        return None, None
    cost = _number(value)
    if cost is None or not 0 <= cost <= MAX_RUN_COST:
        shown = str(value)[:40]
        return None, (
            f"the agent reported a cost of {shown}, which no run costs "
            f"(from $0 to ${MAX_RUN_COST:,.0f}); it was not recorded"
        )
    return cost, None
