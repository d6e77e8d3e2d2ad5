"""What a run's output says about it (outcome.classify), with the database's
clock pinned: the line the agent ended with, as a whole, decides; a message
quoted in the middle of other text, or JSON the agent printed long before its
end, does not; and no reset further than the longest real window is believed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from watchdog.agents.outcome import (
    MAX_RESET,
    Outcome,
    OutputReader,
    Report,
    classify,
    compile_patterns,
)
from watchdog.errors import BadInput

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def verdict(*lines: str, status: int = 1, tz=UTC):
    return classify(Report(status, list(lines)), NOW, tz)


def read(*outputs: bytes | tuple[bytes, str], status: int = 1):
    reader = OutputReader()
    for out in outputs:
        raw, stream = out if isinstance(out, tuple) else (out, "stdout")
        reader.feed(raw, stream)
    return classify(reader.report(status), NOW, UTC)


@pytest.mark.parametrize(
    ("line", "outcome"),
    [
        ("Claude AI usage limit reached|1764604800", Outcome.USAGE_LIMIT),
        ("You've hit your session limit · resets 3:45am", Outcome.USAGE_LIMIT),
        ("You\u2019ve hit your weekly limit · resets Mon 9am", Outcome.USAGE_LIMIT),
        ("API Error: Request rejected (429) · This request would exceed", Outcome.USAGE_LIMIT),
        ("API Error: 429 rate_limit_error", Outcome.USAGE_LIMIT),
        ("ERROR: exceeded retry limit, last status: 429 Too Many Requests", Outcome.USAGE_LIMIT),
        ("API Error: 529 Overloaded. This is a server-side issue", Outcome.OUTAGE),
        ("API Error: Repeated 529 Overloaded errors", Outcome.OUTAGE),
        ("API Error: Connection refused (ECONNREFUSED)", Outcome.OUTAGE),
        ("Request timed out", Outcome.OUTAGE),
        ("stream error: stream disconnected before completion", Outcome.OUTAGE),
        ("[API Error: 503 Service Unavailable]", Outcome.OUTAGE),
        ("Not logged in · Please run /login", Outcome.NEEDS_HUMAN),
        ("Invalid API key · Please run /login", Outcome.NEEDS_HUMAN),
        ("\u23bf  Credit balance is too low", Outcome.NEEDS_HUMAN),
        ("  OAuth token has expired", Outcome.NEEDS_HUMAN),
        # M7: quoted in the middle of a line, they are the agent's work, not its end
        ("Test failed. The fixture says: You've hit your session limit", Outcome.TASK_FAILURE),
        ("src/auth.py:12: # Not logged in · Please run /login", Outcome.TASK_FAILURE),
        ("grep: tests/x.txt: API Error: 529 Overloaded", Outcome.TASK_FAILURE),
        ("FAILED tests/test_api.py::test_login - AssertionError", Outcome.TASK_FAILURE),
    ],
)
def test_the_line_as_a_whole_decides(line, outcome):
    assert verdict(line).outcome is outcome


@pytest.mark.parametrize("status", [0])
def test_exit_0_is_done_whatever_was_said(status):
    assert verdict("Not logged in", status=status).outcome is Outcome.DONE


@pytest.mark.parametrize("status", [130, 143, -2, -15])
def test_an_interrupt_is_an_interrupt(status):
    assert verdict("API Error: 529", status=status).outcome is Outcome.INTERRUPTED


@pytest.mark.parametrize(
    "line",
    [
        "You've hit your session limit · resets 9999-12-31T23:59:59Z",
        "Claude AI usage limit reached|99999999999999",
        "You've hit your usage limit. Upgrade, or try again in 3650 days",
        "You've hit your usage limit · try again in 99999999999999999 days",
    ],
)
def test_a_reset_further_than_the_longest_window_is_not_believed(line):
    v = verdict(line)
    assert v.outcome is Outcome.USAGE_LIMIT and v.reset is None  # probed instead
    assert "not believed" in v.line or "99999999999999999" in line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("You've hit your session limit · resets 3:45am", datetime(2026, 12, 2, 3, 45, tzinfo=UTC)),
        (
            "You've hit your usage limit · try again in 2 hours 5 minutes",
            NOW + timedelta(hours=2, minutes=5),
        ),
        ("You've hit your weekly limit · resets in 7 days", NOW + timedelta(days=7)),
    ],
)
def test_a_believable_reset_is_kept(line, expected):
    assert verdict(line).reset == expected
    assert expected - NOW <= MAX_RESET


def test_a_clock_reset_is_read_in_the_zone_it_names():
    v = verdict("You've hit your session limit · resets 3:45am (Europe/Berlin)")
    assert v.reset == datetime(2026, 12, 2, 3, 45, tzinfo=BERLIN)


RESULT_LOGIN = {"type": "result", "is_error": True, "result": "Not logged in · Please run /login"}
REJECTED = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "rejected", "resetsAt": int(NOW.timestamp()) + 3600},
}


def test_json_decides_only_as_the_last_result():
    line = lambda o: json.dumps(o).encode() + b"\n"  # noqa: E731
    # the agent's last word: it decides
    assert read(line(RESULT_LOGIN)).outcome is Outcome.NEEDS_HUMAN
    # M7: printed first, then 100 lines of work: it decides nothing
    later = [f"test line {i} ok\n".encode() for i in range(100)]
    failed = [b"FAILED: 1 test failed\n"]
    assert read(line(RESULT_LOGIN), *later, *failed).outcome is Outcome.TASK_FAILURE
    assert read(line(REJECTED), *later, *failed).outcome is Outcome.TASK_FAILURE
    # a rejected rate limit that ended the run: its reset is the parking's end
    final = {"type": "result", "is_error": True, "result": "You've hit your limit"}
    v = read(line(REJECTED), line(final))
    assert v.outcome is Outcome.USAGE_LIMIT and v.reset == NOW + timedelta(hours=1)
    # a warning on stderr after the result does not take its word away
    assert read(line(RESULT_LOGIN), (b"warning: x\n", "stderr")).outcome is Outcome.NEEDS_HUMAN
    # a reset ten years off from a rate_limit_event: not believed either
    far = {**REJECTED, "rate_limit_info": {"status": "rejected", "resetsAt": 2_080_000_000}}
    v = read(line(far), line(final))
    assert v.outcome is Outcome.USAGE_LIMIT and v.reset is None and "not believed" in v.line


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ("usagelimit:Quota exceeded", "'usagelimit' is not a class"),
        ("outage:(unclosed", "is not a regular expression"),
        ("done:finished", "is not a class a pattern can name"),
    ],
)
def test_a_bad_user_pattern_is_refused_with_its_line(patterns, message):
    with pytest.raises(BadInput, match=message):
        compile_patterns(patterns)


def test_a_user_pattern_is_tried_first_and_as_a_whole_line():
    patterns = compile_patterns("outage:Quota exceeded\nneeds_human:^Seat revoked")
    report = Report(1, ["Quota exceeded for project x"])
    assert classify(report, NOW, UTC, patterns).outcome is Outcome.OUTAGE
    report = Report(1, ["the docs say Quota exceeded here"])
    assert classify(report, NOW, UTC, patterns).outcome is Outcome.TASK_FAILURE


def test_a_run_that_ended_by_itself_done_is_done_even_if_a_stop_came_after():
    """Ctrl-C lands just after the agent finished: its work is not thrown away."""
    finished = Report(0, ["all tests pass"])
    assert classify(finished, NOW, UTC, interrupted=True).outcome is Outcome.DONE
    stopped = Report(0, ["bye"], signalled=True)  # it exited 0 on our SIGTERM
    assert classify(stopped, NOW, UTC, interrupted=True).outcome is Outcome.INTERRUPTED
    killed = Report(-15, [])
    assert classify(killed, NOW, UTC, interrupted=True).outcome is Outcome.INTERRUPTED


DEFERRED = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "stop_reason": "tool_deferred",
    "session_id": "s-deferred",
    "result": "",
    "deferred_tool_use": {
        "id": "toolu_01",
        "name": "Bash",
        "input": {"command": "git push origin main"},
    },
}


@pytest.mark.parametrize("status", [0, 1])
def test_a_tool_call_deferred_by_a_hook_needs_a_person_not_done(status):
    """Claude Code's -p exits 0 with stop_reason "tool_deferred" when a
    PreToolUse hook answers "defer": the work is not finished."""
    reader = OutputReader()
    reader.feed(json.dumps(DEFERRED).encode())
    report = reader.report(status)
    assert report.deferred == {
        "tool_name": "Bash",
        "tool_input": {"command": "git push origin main"},
    }
    verdict = classify(report, NOW, UTC)
    assert verdict.outcome is Outcome.NEEDS_INPUT
    assert verdict.line == "a tool call was deferred for a person: Bash(git push origin main)"


def test_a_result_that_names_no_deferred_call_is_still_held():
    reader = OutputReader()
    reader.feed(json.dumps({**DEFERRED, "deferred_tool_use": None}).encode())
    verdict = classify(reader.report(0), NOW, UTC)
    assert verdict.outcome is Outcome.NEEDS_INPUT
    assert verdict.line == "a tool call was deferred for a person"


def test_a_deferred_result_followed_by_more_output_decides_nothing():
    reader = OutputReader()
    reader.feed(json.dumps(DEFERRED).encode())
    reader.feed(b"and then the agent went on")
    assert classify(reader.report(0), NOW, UTC).outcome is Outcome.DONE
