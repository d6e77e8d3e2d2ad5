"""The task credential in an agent's environment: which task it works on and
the lease token that fences its writes. ``afk loop`` writes it into the
environment of the agent it runs (with what is left of the task's budget),
and the SessionStart hook into a session's later shells; every ``afk``
command an agent runs and every hook read it from there. Its names are
written here once (``config`` lists them as afk's own variables)."""

from __future__ import annotations

from collections.abc import Mapping

TASK_ID = "AFK_TASK_ID"
TASK_TOKEN = "AFK_TASK_TOKEN"
#: the same token under a name no harness redacts (Gemini CLI drops
#: variables whose names say TOKEN from its hooks' environment)
TASK_LEASE = "AFK_TASK_LEASE"
#: what is left of the task's budget, in US dollars (afk loop only)
TASK_BUDGET = "AFK_TASK_BUDGET_USD"
#: the runner id of the process that holds the lease
RUNNER = "AFK_RUNNER_ID"

#: every name of the credential, the runner's with it
NAMES = (TASK_ID, TASK_TOKEN, TASK_LEASE, TASK_BUDGET, RUNNER)


def written(task_id: object, token: int, budget_left: float | None = None) -> dict[str, str]:
    """The credential of a task as environment variables."""
    env = {TASK_ID: str(task_id), TASK_TOKEN: str(token), TASK_LEASE: str(token)}
    if budget_left is not None:
        env.update(budget(budget_left))
    return env


def budget(left: float) -> dict[str, str]:
    """What is left of a task's budget, in dollars, never below zero."""
    return {TASK_BUDGET: f"{max(left, 0):.2f}"}


def read(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The task id and the token an environment gives (either may be None)."""
    return env.get(TASK_ID) or None, env.get(TASK_TOKEN) or env.get(TASK_LEASE) or None
