"""What an operator (a person, or the watchdog service) does with the
queue, as methods of it (:class:`Operators` is one of
:class:`~watchdog.queue.Queue`'s bases): what the backlog holds and a task's
whole story, and retry, reclaim, prune. Its statements are
``sql/operators.sql``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from . import tracing
from .checks import check_id, check_text, parse_task_id
from .config import QueueSettings
from .db import Database
from .errors import BadInput, NotRunning, TaskNotFound
from .ids import id_range, task_id_prefix
from .models import ReclaimResult, Task, TaskRef, task_id_of
from .states import STATES


class Operators:
    """Reads of the backlog and an operator's changes to it."""

    db: Database
    settings: QueueSettings

    def retry(self, task_ids: Iterable[TaskRef], *, who: str | None = None) -> list[uuid.UUID]:
        """Put failed tasks back to todo (attempts reset, checkpoint kept).
        All or nothing: if any id is unknown or not failed, nothing changes."""
        ids = [task_id_of(t) for t in task_ids]
        if not ids:
            raise BadInput("no task ids given")
        rows = self.db.all("retry", {"ids": ids, "who": who})
        found = {r["id"]: str(r["state"]) for r in rows}
        missing = [str(i) for i in ids if i not in found]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            shown = ", ".join(missing[:5]) + more
            raise TaskNotFound(f"no task with id {shown}; nothing was retried")
        not_failed = [f"{i} ({s})" for i, s in found.items() if s != "failed"]
        if not_failed:
            raise NotRunning(
                f"only failed tasks can be retried: {', '.join(not_failed)}; nothing was retried"
            )
        return list(dict.fromkeys(ids))

    def cancel(
        self, task_ids: Iterable[TaskRef], *, reason: str | None = None, who: str | None = None
    ) -> list[uuid.UUID]:
        """A person's cancel of tasks not yet ended (todo, paused, blocked):
        failed for good with the reason. All or nothing: if any id is unknown,
        running or ended, nothing changes."""
        ids = [task_id_of(t) for t in task_ids]
        if not ids:
            raise BadInput("no task ids given")
        said = check_text("reason", reason) if reason is not None else None
        error = "cancelled by a person" + (f": {said}" if said else "")
        rows = self.db.all("cancel", {"ids": ids, "who": who, "error": error})
        found = {r["id"]: str(r["state"]) for r in rows}
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise TaskNotFound(f"no task with id {', '.join(missing[:5])}; nothing was cancelled")
        ended = [f"{i} ({s})" for i, s in found.items() if s not in ("todo", "paused", "blocked")]
        if ended:
            raise NotRunning(
                f"only a task not running and not ended can be cancelled: {', '.join(ended)} "
                "(a running one: afk pause it first); nothing was cancelled"
            )
        return list(dict.fromkeys(ids))

    def prune_done(self, retention: float, batch: int) -> int:
        """Delete up to ``batch`` done tasks (and their history) older than
        ``retention`` seconds; how many went."""
        row = self.db.one("prune", {"retention": retention, "batch": batch})
        return int(row["n"]) if row else 0

    def forget_agent(self, agent_id: str) -> None:
        """Delete an agent's whole backlog and its ordinal counter (what
        `afk demo` leaves behind)."""
        self.db.execute("forget_agent", {"agent_id": check_id("agent id", agent_id)})

    def reclaim(self, *, batch: int | None = None) -> ReclaimResult:
        """Expired leases: running -> paused (or failed once attempts are spent).
        Pages through them by id, ``batch`` rows per statement."""
        size = batch or self.settings.reclaim_batch
        after = uuid.UUID(int=0)
        paused = failed = statements = 0
        while True:
            row = self.db.row("reclaim", {"after_id": after, "batch": size})
            statements += 1
            paused += row["paused"]
            failed += row["failed"]
            for lost in row["traced"] or []:
                tracing.attempt_ended(lost["id"], lost, row["db_now"], "lease_lost", always=True)
            if row["scanned"] < size or row["last_id"] is None:
                return ReclaimResult(paused, failed, statements)
            after = row["last_id"]

    def status(self, agent_id: str | None = None) -> dict[str, int]:
        """The tasks per state (they add up to the backlog)."""
        counts = self.overview(agent_id)
        return {s: counts[s] for s in STATES}

    def overview(self, agent_id: str | None = None) -> dict[str, int]:
        """`afk status`: the tasks per state, and ``retrying``, the todo tasks
        and paused tasks that wait to retry after a spent attempt."""
        if agent_id is not None:
            agent_id = check_id("agent id", agent_id)
        counts = {r["state"]: r["n"] for r in self.db.all("status", {"agent_id": agent_id})}
        return {s: int(counts.get(s, 0)) for s in (*STATES, "retrying")}

    def resolve_id(self, value: str) -> str:
        """The whole id of the task ``value`` names: as given when it is one,
        else the one task whose id a short id begins (BadInput for none, or
        for several, named)."""
        prefix = task_id_prefix(value)
        if prefix is None:
            return str(parse_task_id(value))
        low, high = id_range(prefix)
        ids = [str(r["id"]) for r in self.db.all("ids_in_range", {"low": low, "high": high})]
        if not ids:
            raise BadInput(f"no task's id begins {value.strip()!r}")
        if len(ids) > 1:
            more = " and more" if len(ids) > 3 else ""
            raise BadInput(
                f"{value.strip()!r} begins the ids of several tasks ({', '.join(ids[:3])}{more}): "
                "give more of the id"
            )
        return ids[0]

    def show(self, task: TaskRef) -> tuple[Task, list[dict[str, Any]]]:
        """The task and its history, oldest first."""
        task_id = task_id_of(task)
        row = self.db.one("show", {"id": task_id})
        if row is None:
            raise TaskNotFound(f"no task with id {task_id}")
        history: list[dict[str, Any]] = row["history"]
        return Task.from_row(row), history

    def waits_for(self, task: TaskRef) -> list[dict[str, Any]]:
        """What a task waits for: ``ref`` as given, and the ``id``, ``title``
        and ``state`` of the task it names (None while no task has the key)."""
        rows = self.db.all("task_after", {"id": task_id_of(task)})
        return [{**r, "id": None if r["id"] is None else str(r["id"])} for r in rows]

    def states_by_key(self, keys: Iterable[str]) -> dict[str, str]:
        """The state of each task of these idempotency keys (a key no task
        has is left out)."""
        rows = self.db.all("states_by_key", {"keys": list(keys)})
        return {r["idem_key"]: r["state"] for r in rows}

    def dead(
        self, agent_id: str | None = None, *, since_seconds: float | None = None, limit: int = 1000
    ) -> list[Task]:
        """Failed tasks, newest first."""
        if agent_id is not None:
            agent_id = check_id("agent id", agent_id)
        if since_seconds is not None and not 0 < since_seconds <= 100 * 365 * 86400:
            raise BadInput("since must be positive and at most 100 years")
        rows = self.db.all(
            "dead", {"agent_id": agent_id, "since_seconds": since_seconds, "limit": limit}
        )
        return [Task.from_row(r) for r in rows]
