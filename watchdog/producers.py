"""How tasks enter the queue, as methods of the queue (:class:`Producers` is
one of :class:`~watchdog.queue.Queue`'s bases): a batch checked whole before
anything is written, then one statement (``enqueue`` in tasks.sql), or for a
large plain batch a COPY (``enqueue_copy``), with the same guarantees: a key
that exists already is a duplicate, skipped and reported; a task too big, a
dependency cycle or an unknown ``--after`` writes nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from . import tracing
from .checks import check_id, dumps_json
from .config import QueueSettings
from .db import Connection, Database
from .dependencies import dependency_cycle, is_task_id
from .errors import BadInput, Conflict
from .models import EnqueueResult, NewTask, checked_new_task, not_before_fields

#: a batch this large is copied into the table (COPY), not inserted by one
#: statement: measured faster from here on (bench/reports/2026-11-30-speed)
COPY_FROM = 100


class Producers:
    """Enqueueing, in order, in one statement."""

    db: Database
    settings: QueueSettings

    def enqueue(
        self,
        agent_id: str,
        tasks: Iterable[NewTask | Mapping[str, Any]],
        *,
        conn: Connection | None = None,
    ) -> EnqueueResult:
        """Add tasks to an agent's backlog, in order, in one statement.

        A task whose key exists already is skipped and reported as a duplicate,
        so enqueueing the same plan twice changes nothing. Pass ``conn`` to
        enqueue inside your own transaction. A batch of ``COPY_FROM`` tasks or
        more is copied straight into the table instead (see ``enqueue_copy``
        in tasks.sql), with the same guarantees.
        """
        agent_id = check_id("agent id", agent_id)
        batch = [self._check_new(t, i) for i, t in enumerate(tasks)]
        if not batch:
            raise BadInput("nothing to enqueue")
        kept: list[NewTask] = []
        positions: list[int] = []  # where each kept task was in the batch
        duplicates: list[str] = []
        seen: set[str] = set()
        for n, task in enumerate(batch):
            if task.key is not None:
                if task.key in seen:
                    duplicates.append(task.key)
                    continue
                seen.add(task.key)
            kept.append(task)
            positions.append(n)
        with tracing.span(
            f"enqueue {agent_id}",
            kind="producer",
            parent=tracing.caller_parent(),
            attributes={
                "messaging.system": tracing.SYSTEM,
                "messaging.operation.name": "enqueue",
                "messaging.operation.type": "send",
                "messaging.destination.name": agent_id,
                "messaging.batch.message_count": len(kept) if len(kept) > 1 else None,
            },
        ) as span:
            result = self._enqueue(
                agent_id, kept, positions, duplicates, conn, tracing.current_traceparent()
            )
            if len(result.enqueued) == 1:
                tracing.set_attributes(span, {"messaging.message.id": str(result.enqueued[0])})
            return result

    def _enqueue(
        self,
        agent_id: str,
        kept: list[NewTask],
        positions: list[int],
        duplicates: list[str],
        conn: Connection | None,
        trace_parent: str | None,
    ) -> EnqueueResult:
        plain = all(
            t.not_before is None
            and t.concurrency_key is None
            and not t.after
            and not t.ask_for
            and not t.requires
            and not t.profiles
            for t in kept
        )
        if not plain:
            self._refuse_cycles(kept, conn)
        if len(kept) >= COPY_FROM and plain:
            try:
                return self._enqueue_copy(agent_id, kept, positions, duplicates, conn, trace_parent)
            except Conflict:
                pass  # a key exists already: the statement below skips and reports it
        rows = [
            {
                "n": n,
                "title": task.title,
                "spec": task.spec,
                "idem_key": task.key,
                "max_attempts": task.max_attempts,
                "budget_usd": task.budget_usd,
                "workspace": None if task.workspace is None else dict(task.workspace),
                "trace_parent": trace_parent,
                **not_before_fields(task.not_before),
                "concurrency_key": task.concurrency_key,
                "concurrency_limit": task.concurrency_limit,
                "after": list(task.after) if task.after else None,
                "on_dep_failure": task.on_dep_failure,
                "ask_for": list(task.ask_for) if task.ask_for else None,
                "requires": list(task.requires) if task.requires else None,
                "profiles": list(task.profiles) if task.profiles else None,
            }
            for n, task in zip(positions, kept, strict=True)
        ]
        # one serialisation for the whole batch; the size cap is checked by
        # the statement itself, which then writes nothing
        payload = dumps_json("a spec", rows)
        max_bytes = self.settings.max_json_bytes
        result = self.db.all(
            "enqueue",
            {
                "agent_id": agent_id,
                "tasks": payload,
                "max_bytes": max_bytes,
                "default_max_attempts": self.settings.max_attempts,
            },
            conn,
        )
        refused = [r["too_big"] for r in result if r["too_big"] is not None]
        if refused:
            self._too_big(refused[0])
        unknown = [r["missing_ref"] for r in result if r["missing_ref"] is not None]
        if unknown:
            raise BadInput(
                f"task {unknown[0] + 1}: --after names a task id that no task has; "
                "nothing was enqueued"
            )
        taken = {r["idem_key"] for r in result if r["idem_key"] is not None}
        duplicates += [t.key for t in kept if t.key is not None and t.key not in taken]
        return EnqueueResult([r["id"] for r in result], duplicates)

    def _enqueue_copy(
        self,
        agent_id: str,
        tasks: list[NewTask],
        positions: list[int],
        duplicates: list[str],
        conn: Connection | None,
        trace_parent: str | None = None,
    ) -> EnqueueResult:
        """A large batch: reserve its ordinals, COPY it, read the ids back, in
        one transaction (a savepoint of the caller's). Raises Conflict, with
        nothing written, when a key exists already."""
        default = self.settings.max_attempts
        with self.db.transaction(conn) as c:
            reserved = self.db.row("enqueue_reserve", {"agent_id": agent_id, "n": len(tasks)}, c)
            first = reserved["first"]
            self.db.copy(
                "enqueue_copy",
                (
                    (
                        agent_id,
                        first + i,
                        t.title,
                        dumps_json("a spec", t.spec),
                        t.key,
                        t.max_attempts or default,
                        t.budget_usd,
                        None if t.workspace is None else dumps_json("a workspace", t.workspace),
                        trace_parent,
                    )
                    for i, t in enumerate(tasks)
                ),
                c,
            )
            copied = self.db.row(
                "enqueue_copied",
                {
                    "agent_id": agent_id,
                    "first": first,
                    "n": len(tasks),
                    "max_bytes": self.settings.max_json_bytes,
                },
                c,
            )
            if copied["too_big"] is not None:
                self._too_big(positions[copied["too_big"]])  # raises: rolls back
        return EnqueueResult(list(copied["ids"]), duplicates)

    def _refuse_cycles(self, kept: list[NewTask], conn: Connection | None) -> None:
        """BadInput naming the cycle when a task of the batch would wait for
        itself: through the batch's own keys, or through tasks enqueued
        before that wait for a key of this batch. (One read before the
        enqueue, only for a batch with dependencies.)"""
        if not any(t.after for t in kept):
            return
        batch = {t.key for t in kept if t.key is not None}
        outside = {r for t in kept for r in t.after or () if r not in batch}
        rows = (
            self.db.all(
                "dependency_graph",
                {"ids": [r for r in outside if is_task_id(r)], "keys": sorted(outside)},
                conn,
            )
            if outside
            else []
        )
        cycle = dependency_cycle(kept, rows)
        if cycle:
            raise BadInput("a dependency cycle: " + " -> ".join(cycle) + "; nothing was enqueued")

    def _too_big(self, position: int) -> NoReturn:
        raise BadInput(
            f"task {position + 1}: spec is over the limit of {self.settings.max_json_bytes} "
            "bytes; nothing was enqueued"
        )

    def _check_new(self, task: NewTask | Mapping[str, Any], index: int) -> NewTask:
        try:
            return checked_new_task(task)
        except BadInput as exc:
            raise BadInput(f"task {index + 1}: {exc}") from None
