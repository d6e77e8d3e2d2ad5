"""What the queue hands out and takes in: a task as a row of ``afk_task``,
a new task, and the results of the batch, effect and reclaim calls."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .agents.approvals import parse as parse_rule
from .agents.harnesses import harness_label
from .checks import (
    MAX_ATTEMPTS,
    check_budget,
    check_id,
    check_label,
    check_name,
    check_text,
    check_workspace,
    json_type,
    parse_task_id,
)
from .db import Connection, Row
from .errors import BadInput
from .states import State


@dataclass(frozen=True)
class Task:
    id: uuid.UUID
    agent_id: str
    ordinal: int
    title: str
    spec: dict[str, Any]
    state: State
    checkpoint: dict[str, Any]
    idem_key: str | None
    attempts: int
    max_attempts: int
    lease_until: datetime | None
    lease_owner: str | None
    token: int
    last_error: str | None = None
    run_after: datetime | None = None
    result: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: the lease length of the claim: a heartbeat extends the lease by this much
    lease_seconds: float | None = None
    #: what the task's runs may cost together, in US dollars (None: no limit)
    budget_usd: float | None = None
    #: the workspace it asked for (watchdog.workspaces): repo, base, branch,
    #: verify, require_changes; None: it runs where its supervisor runs
    workspace: dict[str, Any] | None = None
    #: the W3C traceparent of the span that enqueued it (tracing on)
    trace_parent: str | None = None
    #: at most its key's limit of tasks of one key run at a time (0019)
    concurrency_key: str | None = None
    #: what it does when a task it waits for fails (0020; None: it waits for none)
    on_dep_failure: str | None = None
    #: when its current (or last) attempt was claimed (0031)
    claimed_at: datetime | None = None
    #: calls of its runs a person must approve (afk enqueue --ask-for, 0032)
    ask_for: list[str] | None = None
    #: the labels a claimer must offer (afk enqueue --requires, --harness; 0036)
    requires: list[str] | None = None
    #: the profiles it may run under, one of them (afk enqueue --profiles; 0037)
    profiles: list[str] | None = None

    @classmethod
    def from_row(cls, row: Row) -> Task:
        return cls(
            id=row["id"],
            agent_id=row["agent_id"],
            ordinal=row["ordinal"],
            title=row["title"],
            spec=row["spec"],
            state=State(row["state"]),
            checkpoint=row["checkpoint"],
            idem_key=row["idem_key"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            lease_until=row["lease_until"],
            lease_owner=row.get("lease_owner"),
            token=row.get("lease_token") or 0,
            last_error=row["last_error"],
            run_after=row.get("run_after"),
            result=row.get("result"),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            lease_seconds=row.get("lease_seconds"),
            budget_usd=None if row.get("budget_usd") is None else float(row["budget_usd"]),
            workspace=row.get("workspace"),
            trace_parent=row.get("trace_parent"),
            concurrency_key=row.get("concurrency_key"),
            on_dep_failure=row.get("on_dep_failure"),
            claimed_at=row.get("claimed_at"),
            ask_for=row.get("ask_for"),
            requires=row.get("requires"),
            profiles=row.get("profiles"),
        )

    def to_json(self) -> dict[str, Any]:
        """The task as the CLI prints it."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, uuid.UUID):
                value = str(value)
            out[key] = value
        return out


#: the fields of a new task given as a mapping
NEW_TASK_FIELDS = frozenset(
    {
        "title",
        "spec",
        "key",
        "max_attempts",
        "budget_usd",
        "workspace",
        "not_before",
        "concurrency_key",
        "concurrency_limit",
        "after",
        "on_dep_failure",
        "ask_for",
        "requires",
        "profiles",
        "harness",
    }
)


@dataclass(frozen=True)
class NewTask:
    title: str
    spec: Mapping[str, Any] = field(default_factory=dict)
    key: str | None = None
    max_attempts: int | None = None
    #: what its runs may cost together (US dollars); reached, it waits for a person
    budget_usd: float | None = None
    #: a git worktree of its own: {"repo", "base", "branch", "verify",
    #: "require_changes"} (watchdog.workspaces.request checks one)
    workspace: Mapping[str, Any] | None = None
    #: not claimable before then: a time, or seconds from now (the database's)
    not_before: datetime | float | None = None
    #: a shared thing it uses (``repo:app``): at most the key's limit of
    #: tasks of one key run at a time, across agents and runners
    concurrency_key: str | None = None
    #: that limit (default 1), set by the key's first task: later ones keep it
    concurrency_limit: int | None = None
    #: the tasks it waits for (ids or keys; a key may come later): blocked
    #: until each is done
    after: Sequence[str] | None = None
    #: when one of them fails: "cancel" (the default: it fails too), "run"
    #: (it runs anyway), or "hold" (it waits until a person retries it)
    on_dep_failure: str | None = None
    #: calls of its runs a person must approve (permission rules, issue 43),
    #: besides its loop's --ask-for
    ask_for: Sequence[str] | None = None
    #: labels a loop must advertise to take it (afk loop --label; issue 44)
    requires: Sequence[str] | None = None
    #: the profiles it may run under, one of them (afk enqueue --profiles)
    profiles: Sequence[str] | None = None
    #: the harness it must run under (afk enqueue --harness claude): kept as
    #: the required label harness:claude, which a loop offers for the
    #: harnesses of its profiles
    harness: str | None = None


@dataclass(frozen=True)
class EnqueueResult:
    #: ids of the rows inserted, in the order given
    enqueued: list[uuid.UUID]
    #: keys that were already taken (by an earlier batch or earlier in this one)
    duplicates: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"enqueued": [str(i) for i in self.enqueued], "duplicates": self.duplicates}


@dataclass(frozen=True)
class Claimed:
    """What a claim found: the task, or when the next one is due."""

    task: Task | None
    #: nothing claimed: when the agent's earliest task in backoff is due (None:
    #: none is waiting)
    next_at: datetime | None
    #: the database's clock at the claim (to sleep until next_at by)
    db_now: datetime
    #: nothing claimed: until when a lease (maybe a dead holder's) or another
    #: task's concurrency key holds a task of the agent (None: nothing does)
    held_until: datetime | None = None


@dataclass(frozen=True)
class BatchResult:
    done: list[uuid.UUID]
    #: tasks whose lease was lost: not finished
    lost: list[uuid.UUID]


@dataclass(frozen=True)
class ReclaimResult:
    paused: int = 0
    failed: int = 0
    statements: int = 0

    @property
    def total(self) -> int:
        return self.paused + self.failed


TaskRef = Task | uuid.UUID | str


@dataclass(frozen=True)
class EffectContext:
    """What an effect function is given."""

    task_id: uuid.UUID
    name: str
    #: ``{idem_key}:{name}`` (the task id stands in for a missing key): pass it
    #: to any API that accepts an idempotency key, to close the window between
    #: the call and its record
    key: str
    #: the transaction of a transactional effect: write with it, and your rows
    #: commit together with the effect's record (None for an external effect)
    conn: Connection | None = None


def task_id_of(task: TaskRef) -> uuid.UUID:
    """The id of a task or of a bare task id (no token needed: a read, or an
    operator's change)."""
    return task.id if isinstance(task, Task) else parse_task_id(task)


def task_ref(task: TaskRef, token: int | None) -> tuple[uuid.UUID, int]:
    if isinstance(task, Task):
        return task.id, task.token if token is None else token
    if token is None:
        raise BadInput("a lease token is needed with a bare task id")
    if isinstance(token, bool) or not isinstance(token, int):
        raise BadInput(f"not a lease token: {token!r}")
    return parse_task_id(task), token


# -- the checks of a new task --------------------------------------------

#: how many tasks one task may wait for
MAX_AFTER = 100
#: --ask-for rules and labels one task may carry
MAX_ASK_FOR, MAX_REQUIRES, MAX_PROFILES = 50, 20, 20


def _listed(given: Any, most: int, name: str, what: str) -> list[str]:
    """A task's list of words (None: none), each a string, ``most`` at most."""
    if given is None:
        return []
    if isinstance(given, str) or not isinstance(given, list | tuple) or len(given) > most:
        raise BadInput(f"{name} must be a list of {what}, {most} at most")
    if not all(isinstance(x, str) for x in given):
        raise BadInput(f"{name} must be a list of {what}, {most} at most")
    return list(given)


#: what a dependent does when a task it waits for fails
ON_DEP_FAILURE = ("cancel", "run", "hold")
#: the furthest ahead a task may be made to start (a year)
MAX_START = 366 * 86400


def checked_new_task(task: NewTask | Mapping[str, Any]) -> NewTask:
    """One task of a batch, checked (the same object when it needs no
    change: a batch of 100k is checked in a blink)."""
    if not isinstance(task, NewTask) and isinstance(task, Mapping):
        unknown = set(task) - NEW_TASK_FIELDS
        if unknown:
            raise BadInput(f"unknown field(s) {sorted(unknown)}")
        task = NewTask(
            title=task.get("title"),  # type: ignore[arg-type]
            spec=task.get("spec") or {},
            key=task.get("key"),
            max_attempts=task.get("max_attempts"),
            budget_usd=task.get("budget_usd"),
            workspace=task.get("workspace"),
            not_before=task.get("not_before"),
            concurrency_key=task.get("concurrency_key"),
            concurrency_limit=task.get("concurrency_limit"),
            after=task.get("after"),
            on_dep_failure=task.get("on_dep_failure"),
            ask_for=task.get("ask_for"),
            requires=task.get("requires"),
            profiles=task.get("profiles"),
            harness=task.get("harness"),
        )
    for rule in _listed(
        task.ask_for, MAX_ASK_FOR, "ask_for", "permission rules (Bash(git push:*))"
    ):
        parse_rule(rule)
    for label in _listed(task.requires, MAX_REQUIRES, "requires", "labels (gpu, linux)"):
        check_label(label)
    for name in _listed(task.profiles, MAX_PROFILES, "profiles", "profile names (max-1)"):
        check_name("profile", name)
    if task.harness is not None:
        needs = harness_label(task.harness)
        requires = [*(task.requires or ()), *([] if needs in (task.requires or ()) else [needs])]
        task = dataclasses.replace(task, requires=requires, harness=None)
    if task.workspace is not None:
        check_workspace(task.workspace)
    if task.concurrency_key is not None:
        check_id("concurrency key", task.concurrency_key)
    if task.after is not None:
        after = task.after
        if isinstance(after, str) or not isinstance(after, list | tuple):
            raise BadInput("after must be a list of task ids or keys")
        if len(after) > MAX_AFTER:
            raise BadInput(f"after names more than {MAX_AFTER} tasks")
        for ref in after:
            check_id("an after ref", ref)
        if len(set(after)) != len(after):
            raise BadInput("after names one task twice")
    if task.on_dep_failure is not None:
        if task.on_dep_failure not in ON_DEP_FAILURE:
            raise BadInput("on_dep_failure must be cancel, run or hold")
        if not task.after:
            raise BadInput("on_dep_failure goes with after (the tasks it waits for)")
    if task.concurrency_limit is not None:
        lim = task.concurrency_limit
        if task.concurrency_key is None:
            raise BadInput("a concurrency limit goes with a concurrency key")
        if isinstance(lim, bool) or not isinstance(lim, int) or not 1 <= lim <= 10_000:
            raise BadInput("concurrency limit must be a whole number from 1 to 10000")
    check_text("title", task.title)
    if task.key is not None:
        check_id("key", task.key)
    is_dict = type(task.spec) is dict
    if not is_dict and not isinstance(task.spec, Mapping):
        raise BadInput(f"spec must be a JSON object, not {json_type(task.spec)}")
    max_attempts = task.max_attempts
    if max_attempts is not None and (
        not isinstance(max_attempts, int)
        or isinstance(max_attempts, bool)
        or not 1 <= max_attempts <= MAX_ATTEMPTS
    ):
        raise BadInput(f"max_attempts must be a whole number from 1 to {MAX_ATTEMPTS}")
    if task.budget_usd is not None:
        check_budget(task.budget_usd)
    if is_dict:
        return task
    return dataclasses.replace(task, spec=dict(task.spec))


def not_before_fields(value: datetime | float | None) -> dict[str, Any]:
    """A task's start time as the enqueue statement takes it: a time, or
    seconds from the database's now."""
    if value is None:
        return {}
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise BadInput("not_before needs a time zone (an ISO 8601 offset)")
        if value.year >= 9999:  # afk_held() is the end of year 9999: never claimable
            raise BadInput("not_before is too far ahead (a task held for good is paused)")
        return {"not_before_at": value.isoformat()}
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_START:
        raise BadInput("not_before must be a time, or seconds from now up to a year")
    return {"not_before_in": float(value)}
