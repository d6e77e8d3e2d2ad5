"""The side-effect ledger: a named effect of a task runs at most once per
task, whatever crashes, reclaims and retries happen around it
(``afk_task_effect``, statements in ``sql/effects.sql``). :meth:`Queue.effect`
is its door."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .checks import check_json_size
from .config import QueueSettings
from .db import Database, json_param
from .errors import EffectInDoubt, LeaseLost, TaskNotFound
from .fence import explain_fence
from .models import EffectContext


@dataclass(frozen=True)
class Recorded:
    """What an earlier call of an effect recorded: it is not run again."""

    result: Any


def effect_key(idem_key: str | None, task_id: uuid.UUID, name: str) -> str:
    return f"{idem_key if idem_key is not None else task_id}:{name}"


#: seconds between two looks at an effect another call is running
EFFECT_POLL = 0.2


def starter_id() -> str:
    """Who starts an effect: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def starter_alive(by: str | None) -> bool:
    """Whether an effect's starter still runs: a process of this host that
    exists (one of another host cannot be asked)."""
    host, _, pid = (by or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EffectLedger:
    """The effects of the tasks in ``db``; ``timeline`` gives the server's
    timeline (a token issued before a failover is told apart)."""

    def __init__(self, db: Database, settings: QueueSettings, timeline: Callable[[], int]) -> None:
        self.db, self.settings, self.timeline = db, settings, timeline

    def run(
        self,
        task_id: uuid.UUID,
        token: int,
        name: str,
        fn: Callable[[EffectContext], Any],
        *,
        transactional: bool = False,
    ) -> Any:
        """Run a named side effect of a claimed task at most once per task.

        On a later attempt of the same task (after a crash, a reclaim, a
        restart) the recorded result is returned and ``fn`` is not called.
        ``fn`` gets an :class:`EffectContext`; what it returns (JSON) is recorded.

        External effect (default): the start is fenced and refreshes the lease,
        ``fn`` runs with no transaction open, then the result is recorded
        (fenced). If the process dies after the call and before the record,
        the next attempt runs ``fn`` again: pass ``ctx.key`` to the remote
        side as an idempotency key to make that harmless. If the lease was lost
        meanwhile, the record raises :class:`LeaseLost`.

        ``transactional=True``: ``fn`` runs inside a transaction that holds the
        task row locked, writes through ``ctx.conn``, and its writes commit
        together with the record: exactly once. Keep it short, and use only
        ``ctx.conn`` inside it.
        """
        if transactional:
            return self._in_transaction(task_id, token, name, fn)
        begun = self.begin(task_id, token, name)
        if isinstance(begun, Recorded):
            return begun.result
        try:
            result = fn(EffectContext(task_id, name, begun))
        except Exception:
            # it failed, so it did not happen: the same token may run it again
            self.abandon(task_id, token, name)
            raise
        self.finish(task_id, token, name, result)
        return result

    def begin(
        self, task_id: uuid.UUID, token: int, name: str, by: str | None = None
    ) -> Recorded | str:
        """The start of an effect, fenced, by ``by`` (a host:pid, this
        process by default): what an earlier attempt recorded (then nothing
        runs), else the effect's idempotency key, and the caller runs it and
        then :meth:`finish` es or :meth:`abandon` s it. An effect started under
        this token by a call still running is waited for; one whose starter
        is gone is in doubt (:class:`EffectInDoubt`)."""
        while True:
            begin = self.db.one(
                "effect_begin",
                {
                    "id": task_id,
                    "token": token,
                    "name": name,
                    "lease_seconds": self.settings.lease_seconds,
                    "by": by or starter_id(),
                },
            )
            if begin is None:
                raise TaskNotFound(f"no task with id {task_id}")
            if begin["done"]:
                return Recorded(begin["result"])
            if not begin["fenced"]:
                explain_fence(begin, task_id, token, timeline=self.timeline, expired_ok=False)
            if begin["runs"] is not None:
                return effect_key(begin["idem_key"], task_id, name)  # started by this call
            # started under this token already: never twice. Wait for it; if
            # its call failed (abandoned), start it again
            done, result = self._await(task_id, name)
            if done:
                return Recorded(result)

    def finish(self, task_id: uuid.UUID, token: int, name: str, result: Any) -> None:
        """An effect that ran: ``result`` recorded, fenced (LeaseLost when the
        lease was lost meanwhile: the next attempt may run it again)."""
        check_json_size(f"result of effect {name!r}", result, self.settings.max_json_bytes)
        recorded = self.db.one(
            "effect_record",
            {
                "id": task_id,
                "token": token,
                "name": name,
                "result": json_param(result),
            },
        )
        if not recorded or recorded["runs"] is None:
            raise LeaseLost(
                f"lease lost: effect {name!r} of task {task_id} ran but could not "
                "be recorded; the next attempt may run it again"
            )

    def abandon(self, task_id: uuid.UUID, token: int, name: str) -> None:
        """An effect whose call failed: it did not happen, and the same token
        may run it again."""
        self.db.execute("effect_abandon", {"id": task_id, "token": token, "name": name})

    def forget(self, task_id: uuid.UUID, name: str) -> None:
        """An effect whose call raised before anything could happen (a
        program that could not be executed): its failed first start is not
        kept as "started, not recorded"."""
        self.db.execute("effect_forget", {"id": task_id, "name": name})

    def _await(self, task_id: uuid.UUID, name: str) -> tuple[bool, Any]:
        """An effect another call started under the same token: wait while its
        starter runs (on this host): (True, what it recorded), or (False, None)
        when its call failed. A starter that is gone, or on another host,
        leaves it in doubt."""
        while True:
            row = self.db.one("effect_state", {"id": task_id, "name": name})
            if row is not None and row["done"]:
                return True, row["result"]
            if row is not None and row["started_token"] is None:
                return False, None  # its call failed: it did not happen
            by = row["started_by"] if row else None
            if not starter_alive(by):
                where = f"by {by}" if by else "by another call"
                raise EffectInDoubt(
                    f"effect {name!r} of task {task_id} was started under this token {where}, "
                    "which is gone or on another host, and never recorded: the call may or "
                    "may not have happened, so it is not run again under this token"
                )
            time.sleep(EFFECT_POLL)

    def _in_transaction(
        self, task_id: uuid.UUID, token: int, name: str, fn: Callable[[EffectContext], Any]
    ) -> Any:
        with self.db.transaction() as conn:
            lock = self.db.one("effect_lock", {"id": task_id, "token": token, "name": name}, conn)
            if lock is None:
                raise TaskNotFound(f"no task with id {task_id}")
            if lock["done"]:
                return lock["result"]
            if not lock["fenced"]:
                explain_fence(lock, task_id, token, timeline=self.timeline)
            key = effect_key(lock["idem_key"], task_id, name)
            result = fn(EffectContext(task_id, name, key, conn))
            check_json_size(f"result of effect {name!r}", result, self.settings.max_json_bytes)
            self.db.execute(
                "effect_commit",
                {"id": task_id, "token": token, "name": name, "result": json_param(result)},
                conn,
            )
            return result

    def recorded(self, task_id: uuid.UUID) -> list[dict[str, Any]]:
        """The effects recorded (or started) for a task."""
        return self.db.all("effects", {"id": task_id})
