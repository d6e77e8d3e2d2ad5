"""Where a loop over several profiles runs a task it claimed (issue 44 item
2): the profiles it fits (--profiles, --harness), the profile of the session
it resumes, each account's parking and --switch-after."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from watchdog.agents.profiles import Profile, fits, offered, place
from watchdog.models import Task
from watchdog.states import State

NOW = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)
ONE = Profile("one", "claude", ["claude", "-p"], {}, "max-1")
TWO = Profile("two", "claude", ["claude", "-p"], {"CLAUDE_CONFIG_DIR": "/c2"}, "max-2")
CX = Profile("cx", "codex", ["codex", "exec"], {}, "openai")
LOOP = [ONE, TWO, CX]


def task(profiles: list[str] | None = None, requires: list[str] | None = None) -> Task:
    return Task(uuid.uuid4(), "a", 1, "t", {}, State.RUNNING, {}, None, 1, 3, None, "r", 7,
                requires=requires, profiles=profiles)  # fmt: skip


def minutes(n: float) -> datetime:
    return NOW + timedelta(minutes=n)


@pytest.mark.parametrize(
    "t, profile, expected",
    [
        (task(), ONE, True),
        (task(profiles=["two"]), ONE, False),
        (task(profiles=["two", "one"]), ONE, True),
        (task(requires=["harness:codex"]), ONE, False),
        (task(requires=["harness:codex", "gpu"]), CX, True),
        (task(profiles=["cx"], requires=["harness:claude"]), CX, False),
    ],
)
def test_fits(t, profile, expected):
    assert fits(t, profile) is expected


def test_a_loop_offers_the_harnesses_of_its_profiles_once_each():
    assert offered(LOOP) == ["harness:claude", "harness:codex"]
    other = Profile("sh", "other", ["sh"], {}, "sh")
    assert offered([other]) == []


SWITCH = 15 * 60.0


@pytest.mark.parametrize(
    "t, session, parked, expected",
    [
        # no session: the first profile it fits whose account is not parked
        (task(), None, {}, ("one", False, None)),
        (task(), None, {"max-1": minutes(30)}, ("two", False, None)),
        (task(profiles=["two", "cx"]), None, {"max-2": None}, ("cx", False, None)),
        (task(requires=["harness:codex"]), None, {}, ("cx", False, None)),
        # its session's profile, not parked: kept, even behind the first
        (task(), "two", {}, ("two", False, None)),
        # parked until within --switch-after: it waits for the reset
        (task(), "two", {"max-2": minutes(10)}, (None, False, minutes(10))),
        (task(), "two", {"max-2": minutes(15)}, (None, False, minutes(15))),
        # parked longer, or until a person clears it: it moves, fresh
        (task(), "two", {"max-2": minutes(16)}, ("one", True, None)),
        (task(), "two", {"max-2": None}, ("one", True, None)),
        # a session of a profile this loop does not have: fresh here
        (task(), "elsewhere", {}, ("one", True, None)),
        # a session of a profile it no longer fits: fresh under one it fits
        (task(profiles=["cx"]), "two", {}, ("cx", True, None)),
        # every profile it fits parked: not now (the earliest known end)
        (
            task(profiles=["one", "two"]),
            None,
            {"max-1": minutes(40), "max-2": minutes(20)},
            (None, False, minutes(20)),
        ),
        (task(profiles=["one"]), None, {"max-1": None}, (None, False, None)),
    ],
)
def test_place(t, session, parked, expected):
    placed = place(t, session, LOOP, parked, NOW, SWITCH)
    name = placed.profile.name if placed.profile else None
    assert (name, placed.fresh, placed.until) == expected


def test_switch_after_zero_moves_at_once():
    placed = place(task(), "two", LOOP, {"max-2": minutes(1)}, NOW, 0)
    assert placed.profile is ONE and placed.fresh
    assert "stays parked longer than --switch-after" in placed.why
