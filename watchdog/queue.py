"""The queue's Python API. Every method validates its input before it writes,
runs one statement, and never keeps a transaction open while a task runs."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, overload

from . import sql, tracing
from .checks import (
    MAX_ERROR,
    check_id,
    check_json_size,
    check_lease,
    check_object,
    check_text,
)
from .config import QueueSettings
from .db import Connection, Database, Row, json_param
from .effects import EffectLedger
from .errors import AccountParked, BadInput, LeaseLost, TaskNotFound, redact
from .fence import explain_fence, fenced
from .keepalive import Keepalive
from .models import (
    BatchResult,
    Claimed,
    EffectContext,
    Task,
    TaskRef,
    task_id_of,
    task_ref,
)
from .operators import Operators
from .people import People
from .producers import Producers
from .workspaces import Worktrees

logger = logging.getLogger(__name__)


def default_runner_id() -> str:
    """One id per worker: host, process and thread. A runner id must name one
    concurrent worker, since a claim first resumes the runner's own in-flight
    task: two threads sharing one would take over each other's task."""
    thread = threading.current_thread()
    suffix = "" if thread is threading.main_thread() else f":{thread.native_id}"
    return f"{socket.gethostname()}:{os.getpid()}{suffix}"


#: the step's parameters whose NULL changes what it does (no task to finish,
#: no account, no run to end, ...): written into its text when NULL
_STEP_SHAPE = (
    "id",
    "token",
    "ok",
    "error",
    "result",
    "agent_id",
    "runner",
    "account",
    "run",
    "labels",
    "profiles",
)


class Queue(Producers, People, Operators, Worktrees):
    """A durable task queue in one PostgreSQL database.

    >>> q = Queue.connect("postgresql://localhost/afk")
    >>> q.enqueue("agent-1", [NewTask("fix the flaky test", key="issue-12")])
    >>> task = q.claim("agent-1", runner="laptop-1")
    >>> q.checkpoint(task, {"files": ["tests/test_x.py"]})
    >>> q.done(task)

    Writes by a worker are fenced by the token its claim issued: once the
    lease is lost they raise :class:`LeaseLost` and change nothing.
    """

    def __init__(self, db: Database, *, settings: QueueSettings | None = None) -> None:
        """A queue on ``db`` with ``settings`` (the defaults if None). It reads
        no environment and starts no server: :meth:`connect` is the door from
        a DSN, and the one that reads the environment."""
        if not isinstance(db, Database):
            raise BadInput(
                "Queue() takes a Database; Queue.connect(dsn) opens one from a DSN "
                "(or from AFK_DSN, the config file or the embedded server)"
            )
        self.db = db
        self.settings = settings or QueueSettings()

    @property
    def ledger(self) -> EffectLedger:
        """The side-effect ledger (:mod:`watchdog.effects`)."""
        return EffectLedger(self.db, self.settings, self._timeline)

    @classmethod
    def connect(
        cls,
        dsn: str | None = None,
        *,
        config: str | None = None,
        settings: QueueSettings | None = None,
        pool_size: int | None = 4,
    ) -> Queue:
        """The queue at ``dsn``, else where the environment points, resolved
        the way the ``afk`` command resolves it: ``AFK_DSN``, the systemd
        credential, the config file (``config`` or ``AFK_CONFIG``), else the
        embedded server (started if need be). ``settings`` are given, or read
        as defaults < TOML < ``AFK_*``. ``pool_size`` None: one connection."""
        from .config import load_all
        from .resolve import resolve_dsn

        if settings is not None and dsn is not None:
            return cls(Database(dsn, pool_size=pool_size), settings=settings)
        loaded = load_all(config)
        return cls(
            Database(resolve_dsn(dsn, settings=loaded), pool_size=pool_size),
            settings=settings or loaded.queue,
        )

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def migrate(self) -> list[str]:
        return self.db.migrate()

    # -- workers ----------------------------------------------------------

    def claim(
        self,
        agent_id: str,
        *,
        runner: str | None = None,
        lease_seconds: float | None = None,
        account: str | None = None,
    ) -> Task | None:
        """Take the agent's next task, or None. A runner that restarts with the
        same id gets its own in-flight task back first. With ``account``, a
        parked account raises :class:`AccountParked` (see :meth:`take`)."""
        return self.take(agent_id, runner=runner, lease_seconds=lease_seconds, account=account).task

    def take(
        self,
        agent_id: str,
        *,
        runner: str | None = None,
        lease_seconds: float | None = None,
        account: str | None = None,
        labels: Sequence[str] = (),
        profiles: Sequence[str] | None = None,
    ) -> Claimed:
        """:meth:`claim`, telling also when the next task is due if none is.

        ``account`` names what a usage limit applies to (a supervisor's login):
        while it is parked nothing is claimed and :class:`AccountParked` says
        until when; a claim under it starts a recorded run of the task.
        ``labels``: what the claimer offers (a task that requires labels is
        taken only by a claimer that has every one); ``profiles``: the
        profiles it can run a task under now (a task that names profiles is
        taken only by a claimer that can use one of them)."""
        agent_id = check_id("agent id", agent_id)
        runner = default_runner_id() if runner is None else check_id("runner id", runner)
        if account is not None:
            account = check_id("account", account)
        lease = self._lease(lease_seconds)
        row = self._step(
            agent_id=agent_id,
            runner=runner,
            lease_seconds=lease,
            account=account,
            labels=labels,
            profiles=profiles,
        )
        if row.get("parked_account") is not None:
            raise AccountParked(row["parked_account"], row["parked_until"], row["parked_reason"])
        task = Task.from_row(row) if row["id"] is not None else None
        return Claimed(task, row["next_at"], row["db_now"], row.get("held_until"))

    def claim_many(
        self,
        agent_id: str,
        limit: int,
        *,
        runner: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[Task]:
        """Up to ``limit`` of the agent's next tasks in one statement (each with
        its own token). For throughput; it does not resume in-flight tasks."""
        agent_id = check_id("agent id", agent_id)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise BadInput("limit must be a whole number from 1 to 10000")
        runner = default_runner_id() if runner is None else check_id("runner id", runner)
        rows = self.db.all(
            "claim_batch",
            {
                "agent_id": agent_id,
                "runner": runner,
                "limit": limit,
                "lease_seconds": check_lease(
                    self.settings.lease_seconds if lease_seconds is None else lease_seconds
                ),
            },
        )
        return [Task.from_row(r) for r in rows]

    def done_many(self, tasks: Iterable[Task]) -> BatchResult:
        """Finish many claimed tasks in one statement. Each is fenced by its own
        token: those whose lease was lost are reported, not finished."""
        batch = list(tasks)
        if not batch:
            return BatchResult([], [])
        rows = self.db.all(
            "done_batch", {"ids": [t.id for t in batch], "tokens": [t.token for t in batch]}
        )
        finished = {r["id"] for r in rows}
        return BatchResult(
            [t.id for t in batch if t.id in finished], [t.id for t in batch if t.id not in finished]
        )

    def checkpoint(
        self, task: TaskRef, patch: Mapping[str, Any], *, token: int | None = None
    ) -> Task:
        """Merge ``patch`` into the task's checkpoint (top-level keys replaced,
        others kept) and refresh the lease."""
        task_id, token = task_ref(task, token)
        patch = check_object("checkpoint patch", patch, self.settings.max_json_bytes)
        max_bytes = self.settings.max_json_bytes
        row = self._touch(task_id, token, json_param(patch))
        if (
            row
            and row["id"] is None
            and row["merged_bytes"] > max_bytes
            and row["cur_state"] == "running"
            and row["cur_token"] == token
        ):
            raise BadInput(
                f"the merged checkpoint would be {row['merged_bytes']} bytes, "
                f"over the limit of {max_bytes}"
            )
        return self._fenced(row, task_id, token)

    def heartbeat(
        self, task: TaskRef, *, token: int | None = None, sign: tuple[str, float] | None = None
    ) -> Task:
        """Refresh the lease without changing anything else. ``sign``: the
        agent's last sign of life and how many seconds ago (a supervisor's),
        kept on the open run for the status page."""
        task_id, token = task_ref(task, token)
        return self._fenced(self._touch(task_id, token, None, sign), task_id, token)

    def _touch(
        self, task_id: uuid.UUID, token: int, patch: Any, sign: tuple[str, float] | None = None
    ) -> Row | None:
        return self.db.one(
            "touch",
            {
                "id": task_id,
                "token": token,
                "patch": patch,
                "max_bytes": self.settings.max_json_bytes,
                "lease_seconds": self.settings.lease_seconds,
                "sign": redact(sign[0])[:300] if sign else None,
                "sign_ago": max(sign[1], 0.0) if sign else 0.0,
            },
        )

    @overload
    def done(
        self,
        task: TaskRef,
        result: Any = None,
        *,
        token: int | None = None,
        conn: Connection | None = None,
        claim_next: Literal[False] = False,
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task: ...

    @overload
    def done(
        self,
        task: TaskRef,
        result: Any = None,
        *,
        token: int | None = None,
        conn: Connection | None = None,
        claim_next: Literal[True],
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task | None: ...

    def done(
        self,
        task: TaskRef,
        result: Any = None,
        *,
        token: int | None = None,
        conn: Connection | None = None,
        claim_next: bool = False,
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task | None:
        """Finish the task. Pass ``conn`` to commit it with your own writes.

        ``claim_next=True``: in the same statement, claim the same runner's
        next task of the same agent (as :meth:`claim` would) and return it, or
        None when there is none; a refused finish claims nothing; under
        ``account``, a parked account raises :class:`AccountParked` after the
        finish. ``run``: what a supervisor read of the agent's run (see
        :meth:`release`)."""
        task_id, token = task_ref(task, token)
        if result is not None:
            check_json_size("result", result, self.settings.max_json_bytes)
        return self._finish(
            task_id,
            token,
            result=result,
            conn=conn,
            claim_next=claim_next,
            run=run,
            account=account,
        )

    @overload
    def fail(
        self,
        task: TaskRef,
        error: str,
        *,
        token: int | None = None,
        claim_next: Literal[False] = False,
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task: ...

    @overload
    def fail(
        self,
        task: TaskRef,
        error: str,
        *,
        token: int | None = None,
        claim_next: Literal[True],
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task | None: ...

    def fail(
        self,
        task: TaskRef,
        error: str,
        *,
        token: int | None = None,
        claim_next: bool = False,
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task | None:
        """Report a failure. Below max_attempts the task comes back after a
        backoff; at max_attempts it is failed. ``claim_next`` and ``run``: as
        in :meth:`done`."""
        task_id, token = task_ref(task, token)
        if not isinstance(error, str) or not error.strip():
            raise BadInput("error text must not be empty")
        error = redact(error.replace("\x00", ""))[:MAX_ERROR]  # (agent text: no secrets)
        return self._finish(
            task_id, token, error=error, claim_next=claim_next, run=run, account=account
        )

    def release(
        self,
        task: TaskRef,
        reason: str,
        *,
        token: int | None = None,
        state: Literal["todo", "paused"] = "paused",
        retry_in: float | None = None,
        outcome: str = "interrupted",
        run: Mapping[str, Any] | None = None,
        hold: bool = False,
        error: str | None = None,
    ) -> Task:
        """Give a running task back without spending its attempt, for a reason
        that is not the task's: a usage limit, a provider outage, a login that
        needs a person, an interrupt. It goes to ``state``, due again after
        ``retry_in`` seconds (None: at once), and its run ends with
        ``outcome`` and ``run`` (what the supervisor read of the agent:
        exit_status, output_tail, session_id, cost_usd, turns, usage).
        ``hold``: held for a person instead (paused, claimed by no one until a
        person puts it back: an answer, a raised budget). ``error``: its
        last_error from now on (a stall's last lines), else as it was."""
        task_id, token = task_ref(task, token)
        reason = check_text("reason", reason)[:1000]
        if error is not None:  # (agent text, as fail's: no secrets)
            error = redact(error.replace("\x00", ""))[:MAX_ERROR]
        if retry_in is not None and not 0 <= retry_in <= 7 * 86400:
            raise BadInput("retry_in must be from 0 seconds to 7 days")
        row = self.db.one(
            "release",
            {
                "id": task_id,
                "token": token,
                "state": state,
                "retry_in": retry_in,
                "hold": hold,
                "reason": reason,
                "outcome": outcome,
                "run": None if run is None else json_param(dict(run)),
                "error": error,
            },
        )
        replayed = row is not None and row["id"] is None and row["cur_token"] == token
        if replayed and row is not None and row["cur_state"] == state:
            return self.show(task_id)[0]  # a replay whose first reply was lost
        return self._fenced(row, task_id, token)

    def _fenced(self, row: Row | None, task_id: uuid.UUID, token: int) -> Task:
        return fenced(row, task_id, token, timeline=self._timeline)

    def _timeline(self) -> int:
        row = self.db.one("timeline")
        return int(row["timeline"]) if row else 0

    def _step(
        self,
        task_id: uuid.UUID | None = None,
        token: int | None = None,
        *,
        agent_id: str | None = None,
        runner: str | None = None,
        lease_seconds: float | None = None,
        result: Any = None,
        error: str | None = None,
        claim: bool = True,
        conn: Connection | None = None,
        account: str | None = None,
        run: Mapping[str, Any] | None = None,
        labels: Sequence[str] = (),
        profiles: Sequence[str] | None = None,
    ) -> Row:
        """The one statement of a worker's step (see ``step`` in tasks.sql):
        finish ``task_id`` if given, then claim if ``claim`` (a task that
        requires labels only if ``labels`` has them all, one that names
        profiles only if ``profiles`` has one of them)."""
        s = self.settings
        params = {
            "id": task_id,
            "token": token,
            "ok": None if task_id is None else error is None,
            "error": error,
            "result": None if result is None else json_param(result),
            "backoff_base": s.backoff_base_seconds,
            "backoff_cap": s.backoff_cap_seconds,
            "claim": claim,
            "agent_id": agent_id,
            "runner": runner,
            "lease_seconds": s.lease_seconds if lease_seconds is None else lease_seconds,
            "account": account,
            "run": None if run is None else json_param(dict(run)),
            # (what a claimer offers: only in a claim, where tasks ask for it)
            "labels": list(labels) if (labels or profiles) and claim else None,
            "profiles": list(profiles) if profiles and claim else None,
        }
        # the parameters that switch parts of it on and off are written in:
        # a claim, a finish and a finish that claims are each planned once
        fixed: dict[str, bool | None] = {k: None for k in _STEP_SHAPE if params[k] is None}
        for k in fixed:
            del params[k]
        fixed["claim"] = claim
        del params["claim"]
        row = self.db.row(sql.shaped("step", **fixed), params, conn)
        return row

    def _finish(
        self,
        task_id: uuid.UUID,
        token: int,
        *,
        result: Any = None,
        error: str | None = None,
        claim_next: bool = False,
        conn: Connection | None = None,
        run: Mapping[str, Any] | None = None,
        account: str | None = None,
    ) -> Task | None:
        if account is not None:
            account = check_id("account", account)
        row = self._step(
            task_id,
            token,
            result=result,
            error=error,
            claim=claim_next,
            conn=conn,
            run=run,
            account=account,
        )
        if row["cur_state"] is None:
            raise TaskNotFound(f"no task with id {task_id}")
        if row["finished"] is None:
            if error is None and row["cur_state"] == "done" and row["cur_token"] == token:
                # a replay by the token that finished it (its first reply was
                # lost): the finished task, or the first call's claim, if it
                # made one, which is this runner's in-flight task now: read,
                # never claimed again (that would revoke the first reply's token)
                was = self.show(task_id)[0]
                if result is not None and was.result != result:
                    raise LeaseLost(
                        f"task {task_id} is done already, with another result; this one "
                        "was not recorded"
                    )
                if not claim_next:
                    return was
                if was.lease_owner is None:
                    return None
                held = self.db.one("held", {"agent_id": was.agent_id, "runner": was.lease_owner})
                return Task.from_row(held) if held is not None else None
            explain_fence(row, task_id, token, timeline=self._timeline)
        if row.get("fin_trace") is not None:
            failed = None if error is None else "task_failure"
            tracing.attempt_ended(task_id, row["fin_trace"], row["db_now"], failed)
        if row.get("parked_account") is not None:  # finished; the next claim was refused
            raise AccountParked(row["parked_account"], row["parked_until"], row["parked_reason"])
        return Task.from_row(row) if row["id"] is not None else None

    def pause_task(
        self, task: TaskRef, *, token: int | None = None, reason: str = "paused by runner"
    ) -> Task:
        """A clean stop of one task by its worker: no attempt is spent."""
        task_id, token = task_ref(task, token)
        return self._fenced(
            self.db.one("pause_task", {"id": task_id, "token": token, "reason": reason}),
            task_id,
            token,
        )

    def pause(
        self,
        agent_id: str | None = None,
        *,
        runner: str | None = None,
        reason: str = "paused by stop",
    ) -> list[uuid.UUID]:
        """Pause running tasks: all of an agent's, or those one runner holds
        (of that agent, or of every agent). Returns the ids paused."""
        if agent_id is None and runner is None:
            raise BadInput("pause needs an agent id, a runner id, or both")
        if runner is not None:
            runner = check_id("runner id", runner)
        if agent_id is None:
            rows = self.db.all("pause_runner", {"runner": runner, "reason": reason})
        else:
            rows = self.db.all(
                "pause_agent",
                {"agent_id": check_id("agent id", agent_id), "runner": runner, "reason": reason},
            )
        return [r["id"] for r in rows]

    @contextmanager
    def leased(
        self,
        task: Task,
        *,
        interval: float | None = None,
        sign: Callable[[], tuple[str, float] | None] | None = None,
    ) -> Iterator[Keepalive]:
        """Keep ``task``'s lease alive while the block runs: a thread heartbeats
        it every third of its lease, so a long run (an agent thinking for an
        hour) keeps its task, and a crash still lets the lease run out soon.

        >>> with q.leased(task) as lease:
        ...     run_the_agent()
        ...     if lease.lost.is_set(): ...  # someone else holds it now: stop

        Leaving the block stops the thread; nothing is finished or paused.
        ``sign`` gives the agent's last sign of life for each heartbeat."""
        lease = task.lease_seconds or self.settings.lease_seconds
        keepalive = Keepalive(self.heartbeat, task, lease, interval, sign)
        keepalive.start()
        try:
            yield keepalive
        finally:
            keepalive.stop()

    # -- side effects -----------------------------------------------------

    def effect(
        self,
        task: TaskRef,
        name: str,
        fn: Callable[[EffectContext], Any],
        *,
        token: int | None = None,
        transactional: bool = False,
    ) -> Any:
        """Run a named side effect of a claimed task at most once per task
        (:class:`watchdog.effects.EffectLedger` says how): on a later attempt
        the recorded result is returned and ``fn`` is not called. With
        ``transactional=True`` it writes through ``ctx.conn`` and commits with
        its record: exactly once."""
        task_id, token = task_ref(task, token)
        name = check_text("effect name", name)
        return self.ledger.run(task_id, token, name, fn, transactional=transactional)

    def forget_effect(self, task: TaskRef, name: str) -> None:
        """An effect whose call raised before anything could happen (a
        program that could not be executed) is not kept as "started"."""
        self.ledger.forget(task_id_of(task), name)

    def effects(self, task: TaskRef) -> list[dict[str, Any]]:
        """The effects recorded (or started) for a task."""
        return self.ledger.recorded(task_id_of(task))

    def touch_session(
        self,
        task_id: uuid.UUID | None,
        token: int | None,
        runner: str,
        *,
        renew: bool,
        files: list[str],
        max_files: int,
    ) -> Row | None:
        """An agent hook's look at its session's task, in one round trip: the
        task given (a supervisor's claim) or the one ``runner`` holds, its
        lease refreshed when ``renew`` and ``files`` added to
        ``checkpoint.files_touched`` (fenced by the token), and the row as it
        is now (``cur_state``, ``cur_token``, ``lease_left``)."""
        return self.db.one(
            "hook_touch",
            {
                "id": task_id,
                "token": token,
                "runner": runner,
                "renew": renew,
                "files": files,
                "max_files": max_files,
                "max_bytes": self.settings.max_json_bytes,
                "lease_seconds": self.settings.lease_seconds,
            },
        )

    def _lease(self, lease_seconds: float | None) -> float:
        return check_lease(self.settings.lease_seconds if lease_seconds is None else lease_seconds)
