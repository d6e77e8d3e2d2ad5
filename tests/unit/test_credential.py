"""The task credential in an agent's environment: written once, read back
the same, and every name of it one of afk's own variables (an agent's `afk`
commands never warn about a variable afk gave it)."""

from __future__ import annotations

import uuid

import pytest

from watchdog.agents import credential
from watchdog.config import OTHER_ENV, known_env

TASK = uuid.UUID("0b0e5f7c-1d2e-4f60-8a9b-0c1d2e3f4a5b")


def test_what_is_written_is_read_back():
    assert credential.read(credential.written(TASK, 42)) == (str(TASK), "42")


@pytest.mark.parametrize(
    "env, got",
    [
        ({}, (None, None)),
        ({"AFK_TASK_ID": str(TASK)}, (str(TASK), None)),
        # the lease name carries the token where a harness dropped TOKEN
        ({"AFK_TASK_ID": str(TASK), "AFK_TASK_LEASE": "7"}, (str(TASK), "7")),
        ({"AFK_TASK_TOKEN": "8", "AFK_TASK_LEASE": "7"}, (None, "8")),
        # an empty value is no value
        ({"AFK_TASK_ID": "", "AFK_TASK_TOKEN": ""}, (None, None)),
    ],
)
def test_the_credential_read_from_an_environment(env, got):
    assert credential.read(env) == got


@pytest.mark.parametrize(
    "left, budget", [(None, None), (1.234, "1.23"), (0.0, "0.00"), (-3.0, "0.00")]
)
def test_the_budget_left_is_written_in_dollars_never_below_zero(left, budget):
    assert credential.written(TASK, 1, left).get("AFK_TASK_BUDGET_USD") == budget


def test_every_name_of_the_credential_is_one_of_afks_variables():
    assert set(credential.NAMES) <= set(OTHER_ENV) <= set(known_env())
    assert set(credential.written(TASK, 1, 2.0)) <= set(credential.NAMES)
