"""The fence: a write carries the lease token of its claim, and a statement
that changed nothing returns the task as it was; this module says why (the
hooks' zombie check reads the same row)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import NoReturn

from .db import Row
from .errors import BadInput, LeaseLost, TaskNotFound
from .models import Task
from .states import FINISHED

#: a token is the server's timeline above its low 40 bits (migration 0009)
TOKEN_SEQ_BITS = 40


def fenced(
    row: Row | None, task_id: uuid.UUID, token: int, timeline: Callable[[], int] | None = None
) -> Task:
    """Interpret a fenced write: the updated task, or why nothing changed."""
    if row is None:
        raise TaskNotFound(f"no task with id {task_id}")
    if row["id"] is not None:
        return Task.from_row(row)
    explain_fence(row, task_id, token, timeline=timeline)


def explain_fence(
    row: Row,
    task_id: uuid.UUID,
    token: int,
    expired_ok: bool = True,
    timeline: Callable[[], int] | None = None,
) -> NoReturn:
    """Raise the reason a fenced statement did not apply, from the row as it
    was (``cur_state``, ``cur_token``). ``timeline`` gives the server's
    timeline, asked only when the token is newer than the task's."""
    state, current = str(row["cur_state"]), row["cur_token"] or 0
    issued_on = token >> TOKEN_SEQ_BITS
    if token > current and issued_on and timeline is not None and issued_on < timeline():
        # a claim lost in a failover issued it on an earlier timeline
        raise LeaseLost(
            f"lease lost: token {token} was issued for task {task_id} by a "
            "claim that a database failover lost; nothing was changed"
        )
    if token <= 0 or token > current:
        raise BadInput(f"token {token} was never issued for task {task_id}")
    if state == "running" and token == current and not expired_ok:
        raise LeaseLost(
            f"lease lost: the lease of task {task_id} has run out; heartbeat or "
            "checkpoint more often, or claim with a longer lease"
        )
    held = bool(row.get("cur_held"))
    clause = lost_clause(state, current, token, held=held)
    raise LeaseLost(f"lease lost: task {task_id} {clause}; nothing was changed")


def lost_clause(state: str, current: int, token: int, *, held: bool = False) -> str:
    """Why a task is no longer held under ``token`` (``current`` is its
    token now), as a clause after its name: the one wording of the fence,
    for the API's errors and for the hooks' deny. ``held``: the task waits
    for a person (a question asked, a budget reached)."""
    if current != token:
        return f"was claimed again since (token {current} replaced {token})"
    if state in FINISHED:
        return f"is {state}, no longer running"
    if state == "running":
        return "has run out of its lease"
    if held:
        return (
            f"is {state}, waiting for a person (a question asked, or its budget reached): "
            "stop working on it; it runs again once a person answers or raises the budget"
        )
    return f"is {state} (its lease ran out and it was reclaimed, or it was paused)"
