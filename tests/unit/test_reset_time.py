"""When a usage limit resets, read from the agent's words (outcome.reset_time),
with the clock pinned: epochs, ISO times, durations, 12- and 24-hour clocks,
weekdays, months and days, named zones, across a DST change and the end of
a month or a year; None for what cannot be read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from watchdog.agents.outcome import reset_time

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
#: a Tuesday, 02:00 UTC (03:00 in Berlin, 21:00 the day before in New York)
NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def at(zone, *args: int) -> datetime:
    return datetime(*args, tzinfo=zone)


@pytest.mark.parametrize(
    "hint, now, tz, expected",
    [
        # epochs, seconds and milliseconds
        ("1764604800", NOW, UTC, datetime(2025, 12, 1, 16, 0, tzinfo=UTC)),
        ("1764604800000", NOW, UTC, datetime(2025, 12, 1, 16, 0, tzinfo=UTC)),
        # an ISO time with its offset
        ("2026-12-01T09:30:00+01:00", NOW, UTC, at(BERLIN, 2026, 12, 1, 9, 30)),
        # durations
        ("in 2 hours 5 minutes", NOW, UTC, NOW + timedelta(hours=2, minutes=5)),
        ("in 30m", NOW, UTC, NOW + timedelta(minutes=30)),
        ("in 1.5h", NOW, UTC, NOW + timedelta(minutes=90)),
        ("in 0 minutes", NOW, UTC, None),
        # 12-hour clocks, today or tomorrow in the zone given
        ("5am", NOW, BERLIN, at(BERLIN, 2026, 12, 1, 5, 0)),
        ("3:45pm", NOW, BERLIN, at(BERLIN, 2026, 12, 1, 15, 45)),
        ("2am", NOW, BERLIN, at(BERLIN, 2026, 12, 2, 2, 0)),  # 02:00 has passed
        ("12am", NOW, BERLIN, at(BERLIN, 2026, 12, 2, 0, 0)),
        ("12pm", NOW, BERLIN, at(BERLIN, 2026, 12, 1, 12, 0)),
        ("9 p.m.", NOW, NEW_YORK, at(NEW_YORK, 2026, 12, 1, 21, 0)),  # 21:00 was now
        # 24-hour clocks
        ("15:45", NOW, UTC, datetime(2026, 12, 1, 15, 45, tzinfo=UTC)),
        ("01:59", NOW, UTC, datetime(2026, 12, 2, 1, 59, tzinfo=UTC)),
        # a zone named in the text wins over the person's
        ("3pm (Europe/Berlin)", NOW, NEW_YORK, at(BERLIN, 2026, 12, 1, 15, 0)),
        ("10am (America/New_York)", NOW, BERLIN, at(NEW_YORK, 2026, 12, 1, 10, 0)),
        ("10am UTC", NOW, BERLIN, datetime(2026, 12, 1, 10, 0, tzinfo=UTC)),
        ("10am (Nowhere/Atlantis)", NOW, BERLIN, at(BERLIN, 2026, 12, 1, 10, 0)),
        # weekdays: the next one (today's, if the time is still ahead)
        ("Mon 9am", NOW, UTC, datetime(2026, 12, 7, 9, 0, tzinfo=UTC)),
        ("Tuesday 1am", NOW, UTC, datetime(2026, 12, 8, 1, 0, tzinfo=UTC)),
        ("Tue 3am", NOW, UTC, datetime(2026, 12, 1, 3, 0, tzinfo=UTC)),
        # months and days: this year's, else next year's
        ("Dec 24, 9am", NOW, UTC, datetime(2026, 12, 24, 9, 0, tzinfo=UTC)),
        ("Jan 2 9am", NOW, UTC, datetime(2027, 1, 2, 9, 0, tzinfo=UTC)),
        ("Nov 30 9am", NOW, UTC, datetime(2027, 11, 30, 9, 0, tzinfo=UTC)),
        ("Feb 30 9am", NOW, UTC, None),  # no such day
        # the end of a month and of a year roll over
        ("1am", datetime(2026, 11, 30, 23, 0, tzinfo=UTC), UTC, at(UTC, 2026, 12, 1, 1, 0)),
        ("1am", datetime(2026, 12, 31, 23, 0, tzinfo=UTC), UTC, at(UTC, 2027, 1, 1, 1, 0)),
        # across DST: the wall-clock time in its zone, whatever the offset
        # (Berlin leaves summer time on 2026-10-25 at 03:00)
        ("9am", datetime(2026, 10, 24, 12, 0, tzinfo=UTC), BERLIN, at(BERLIN, 2026, 10, 25, 9, 0)),
        (
            "Sun 9am",
            datetime(2026, 10, 20, 12, 0, tzinfo=UTC),
            BERLIN,
            at(BERLIN, 2026, 10, 25, 9, 0),
        ),
        # what cannot be read
        ("soon", NOW, UTC, None),
        ("13pm", NOW, UTC, None),
        ("", NOW, UTC, None),
        ("in 99999999999999 days", NOW, UTC, None),
    ],
)
def test_the_reset_an_agent_names(hint, now, tz, expected):
    got = reset_time(hint, now, tz)
    assert got == expected
    if expected is not None:
        assert got.utcoffset() == expected.utcoffset()  # (the same instant, the same offset)


def test_a_day_added_across_dst_keeps_the_wall_clock():
    """9am the day after the change is 08:00 UTC, not 07:00 (summer's)."""
    got = reset_time("9am", datetime(2026, 10, 24, 12, 0, tzinfo=UTC), BERLIN)
    assert got is not None and got.astimezone(UTC) == datetime(2026, 10, 25, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "tz, expected",
    [
        ("Europe/Berlin", BERLIN),
        (":America/New_York", NEW_YORK),  # (the POSIX form with a colon)
        ("Nowhere/Atlantis", None),  # unknown: this host's
        ("", None),
    ],
)
def test_the_zone_an_agents_words_are_read_in(tz, expected):
    import tzlocal

    from watchdog.agents.outcome import reading_zone

    assert reading_zone({"TZ": tz}) == (expected or tzlocal.get_localzone())


@pytest.mark.parametrize("tz, expected", [("Europe/Berlin", BERLIN), ("", None)])
def test_the_zone_of_the_persons_day(tz, expected):
    import tzlocal

    from watchdog.config import DigestSettings

    assert DigestSettings(tz=tz).day_zone() == (expected or tzlocal.get_localzone())


NOON = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "lines, expected",
    [
        # a StopFailure payload's message and details, as Claude Code writes them
        (["Claude AI usage limit reached|1796346000"], datetime.fromtimestamp(1796346000, UTC)),
        (["rate_limit", "You've hit your limit · resets 3pm (UTC)"], NOON.replace(hour=15)),
        (["Claude AI usage limit reached|99999999999"], None),  # years off: not believed
        (["API Error: 529 Overloaded"], None),  # not a usage limit
        ([], None),
    ],
)
def test_the_reset_a_stop_failure_names(lines, expected):
    from watchdog.agents.outcome import limit_reset

    assert limit_reset(lines, NOON, UTC) == expected
