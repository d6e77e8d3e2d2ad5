"""A task's id as a person types it (issue 53 item 3): the whole id, or the
short one afk prints, and what each names."""

from __future__ import annotations

import uuid

import pytest

from watchdog.ids import id_range, names_task, short_id, task_id_prefix

TASK = "8ce4f0f5-12ab-4cde-8f01-23456789abcd"


@pytest.mark.parametrize(
    "typed, prefix",
    [
        ("8ce4f0f5", "8ce4f0f5"),
        (" 8CE4F0F5 ", "8ce4f0f5"),
        ("8ce4f0f5-12", "8ce4f0f512"),
        ("8ce4f0f512ab4cde8f0123456789abc", "8ce4f0f512ab4cde8f0123456789abc"),
        ("8ce4f0f", None),  # too short: 7 digits name thousands of tasks at scale
        ("8ce4f0fg", None),  # not hex
        (TASK, None),  # a whole id is no prefix
        (TASK.replace("-", ""), None),
        ("", None),
        ("--------", None),
        ("8ce4 f0f5", None),
    ],
)
def test_a_short_id_is_8_to_31_hex_digits_dashes_or_not(typed, prefix):
    assert task_id_prefix(typed) == prefix


def test_a_short_id_is_a_range_of_the_primary_key_that_holds_its_ids():
    low, high = id_range("8ce4f0f5")
    assert low == uuid.UUID("8ce4f0f5-0000-0000-0000-000000000000")
    assert high == uuid.UUID("8ce4f0f5-ffff-ffff-ffff-ffffffffffff")
    assert low <= uuid.UUID(TASK) <= high
    assert not low <= uuid.UUID("8ce4f0f6-0000-0000-0000-000000000000") <= high
    assert short_id(TASK) == "8ce4f0f5" and short_id(uuid.UUID(TASK)) == "8ce4f0f5"


@pytest.mark.parametrize(
    "typed, names",
    [
        (TASK, True),
        (TASK.upper(), True),
        (TASK.replace("-", ""), True),
        ("8ce4f0f5", True),
        ("8CE4F0F5-12AB", True),
        ("8ce4f0f6", False),
        ("8ce4f0f", False),
        ("7d1f2c3b-1111-4222-8333-944455556666", False),
        ("not an id", False),
        ("", False),
    ],
)
def test_what_a_typed_id_names(typed, names):
    assert names_task(typed, TASK) is names
    assert names_task(typed, uuid.UUID(TASK)) is names


def test_every_argument_that_names_a_task_takes_the_short_id():
    """P32's siblings: every command's argument that is a task's id is read
    by the one type the bootstrap resolves (a new one that is not fails
    here); an approval's id is a number of its own."""
    import argparse

    from watchdog.cli import build_parser
    from watchdog.cli.common import task_arg

    def actions(parser: argparse.ArgumentParser, path: str):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from actions(sub, f"{path} {name}")
            else:
                yield path, action

    named = {
        (path, action.dest): action.type
        for path, action in actions(build_parser(), "afk")
        if action.dest in ("id", "ids", "task", "tasks")
    }
    assert len(named) >= 14, named  # (the commands that take one)
    for (path, dest), kind in named.items():
        if path in ("afk approve", "afk deny"):
            assert kind is not task_arg
            continue
        assert kind is task_arg, f"{path}: its {dest} does not take the short id"
