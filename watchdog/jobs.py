"""The watchdog's jobs.

Each job is a plain function that runs once and returns what it did
(``reclaim``, ``gauges``, ``poison``, ``prune``; tests call them directly),
and one entry of :data:`JOBS`: its name, its interval, whether only the
leader runs it, and the run-once function the service calls (which also
records the job's metrics). The service schedules from :data:`JOBS`, the
metrics label their series from it, and ``afk watchdog tick`` offers its
names. Adding a job is one function and one entry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from .states import EXACT_BELOW, STATES

#: seconds between two measures of the worktrees' bytes (a walk of their folders)
WORKSPACE_BYTES_EVERY = 300.0

if TYPE_CHECKING:
    from .config import Settings
    from .db import Database
    from .metrics import Metrics
    from .models import ReclaimResult, Task
    from .queue import Queue


class Leader(Protocol):
    """The leader lease a job renews (service.LeaderLease is one)."""

    held: bool

    def check(self) -> bool: ...


class JobHost(Protocol):
    """What a job is given: the parts of the service it uses
    (service.Watchdog is one; the jobs do not know the service)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def queue(self) -> Queue: ...
    @property
    def db(self) -> Database: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def leader(self) -> Leader: ...
    @property
    def scheduled(self) -> bool:
        """Under `afk watchdog run` (False for a one-shot tick)."""
        ...


logger = logging.getLogger(__name__)


def reclaim(queue: Queue) -> ReclaimResult:
    """Expired leases -> paused, or failed once their attempts are spent."""
    result = queue.reclaim()
    if result.total:
        logger.info(
            "reclaimed %d expired leases",
            result.total,
            extra={"action": "reclaim", "paused": result.paused, "failed": result.failed},
        )
    return result


@dataclass(frozen=True)
class GaugeSnapshot:
    states: dict[str, int]
    #: (agent_id, state, count) for the open states of the largest agents
    agents: list[tuple[str, str, int]]
    expired_leases: int
    oldest_todo_age: float
    since_checkpoint: float
    poison_pills: int
    oldest_snapshot_age: float = 0.0
    #: (account, kind, epoch of its end or None) of the accounts parked now
    parked: list[tuple[str, str, float | None]] = field(default_factory=list)
    #: agent runs that ended since ``runs_since``, by outcome
    runs: dict[str, int] = field(default_factory=dict)
    #: (agent_id, count) of the tasks waiting to retry after a spent
    #: attempt, for the largest agents
    retrying: list[tuple[str, int]] = field(default_factory=list)
    #: the database's clock at this snapshot (the next one's ``runs_since``)
    now: datetime | None = None


def gauges(
    queue: Queue,
    *,
    top_agents: int = 20,
    poison_window: float = 3600,
    exact_below: int = EXACT_BELOW,
    runs_since: datetime | None = None,
) -> GaugeSnapshot:
    """Everything the metrics show, read in one statement."""
    row = queue.db.row(
        "gauges",
        {
            "top_agents": top_agents,
            "poison_window": poison_window,
            "exact_below": exact_below,
            "runs_since": runs_since,
        },
    )
    states = {s: int(row["states"].get(s, 0)) for s in STATES}
    return GaugeSnapshot(
        states=states,
        agents=[(str(a), str(s), int(n)) for a, s, n in row["agents"]] if top_agents else [],
        expired_leases=int(row["expired_leases"]),
        oldest_todo_age=float(row["oldest_todo_age"]),
        since_checkpoint=float(row["since_checkpoint"]),
        poison_pills=int(row["poison_pills"]),
        oldest_snapshot_age=float(row["oldest_snapshot_age"]),
        parked=[(str(a), str(k), None if u is None else float(u)) for a, k, u in row["parked"]],
        runs={str(k): int(n) for k, n in row["runs"].items()},
        retrying=[(str(a), int(n)) for a, n in row["retrying"]],
        now=row["now"],
    )


def poison(queue: Queue, *, window: float = 3600, limit: int = 1000) -> list[Task]:
    """Tasks that failed within ``window`` seconds: one structured log line each."""
    from .models import Task

    rows = queue.db.all("poison", {"window": window, "limit": limit})
    pills = [Task.from_row(r) for r in rows]
    for task in pills:
        logger.warning(
            "poison pill: %s",
            task.title,
            extra={
                "action": "poison_pill",
                "task_id": str(task.id),
                "agent_id": task.agent_id,
                "attempts": task.attempts,
                "last_error": (task.last_error or "")[:500],
            },
        )
    return pills


@dataclass(frozen=True)
class PruneResult:
    deleted: int
    statements: int


def prune(queue: Queue, *, retention: float, batch: int = 1000) -> PruneResult:
    """Delete done tasks (and their history) older than ``retention`` seconds,
    ``batch`` rows per statement, until none are left."""
    deleted = statements = 0
    while True:
        n = queue.prune_done(retention, batch)
        statements += 1
        deleted += n
        if n < batch:
            break
    if deleted:
        logger.info("pruned %d done tasks", deleted, extra={"action": "prune", "deleted": deleted})
    return PruneResult(deleted, statements)


# -- the registry ----------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One watchdog job, as the service schedules it."""

    name: str
    #: its interval, from the settings
    every: Callable[[Settings], float]
    #: once per period across replicas: only the leader runs it
    leader_only: bool
    #: runs it once on a service, records its metrics, returns what it did
    run: Callable[[JobHost], dict[str, Any]]
    #: scheduled only when this says so (the digest needs a destination)
    enabled: Callable[[Settings], bool] = lambda _: True
    #: offered by `afk watchdog tick`
    tick: bool = True


def run_leader(w: JobHost) -> dict[str, Any]:
    was = w.leader.held
    try:
        now = w.leader.check()
    finally:
        w.metrics.leader.set(1 if w.leader.held else 0)
    if now != was:
        # a one-shot `afk watchdog tick` takes the lease on every run: not news
        log = logger.info if w.scheduled else logger.debug
        log(
            "this replica %s the leader",
            "is now" if now else "is no longer",
            extra={"action": "leader", "leader": now},
        )
    return {"leader": now}


def run_reclaim(w: JobHost) -> dict[str, Any]:
    r = reclaim(w.queue)
    w.metrics.reclaimed.labels("paused").inc(r.paused)
    w.metrics.reclaimed.labels("failed").inc(r.failed)
    return {"paused": r.paused, "failed": r.failed}


def run_gauges(w: JobHost) -> dict[str, Any]:
    s = w.settings.service
    m = w.metrics
    snap = gauges(
        w.queue,
        top_agents=s.metrics_agents,
        poison_window=s.poison_window,
        runs_since=m.runs_seen_until,
    )
    for state, n in snap.states.items():
        m.tasks.labels(state).set(n)
    m.set_agents(snap.agents)
    m.set_retrying(snap.retrying)
    m.expired_leases.set(snap.expired_leases)
    m.oldest_todo_age.set(snap.oldest_todo_age)
    m.since_checkpoint.set(snap.since_checkpoint)
    m.poison_pills.set(snap.poison_pills)
    m.oldest_snapshot.set(snap.oldest_snapshot_age)
    m.set_parked(snap.parked)
    from .agents.fleet import Fleet

    m.set_loops(r["state"] for r in Fleet(w.db, w.settings.loop.fleet_lost_seconds).loops())
    for outcome, n in snap.runs.items():
        m.agent_runs.labels(outcome).inc(n)
    m.runs_seen_until = snap.now
    from . import workspaces

    now = time.monotonic()
    measure = m.workspace_bytes_at is None or now - m.workspace_bytes_at >= WORKSPACE_BYTES_EVERY
    per_state, size = workspaces.counts(w.db, measure=measure)
    for state in STATES:
        m.workspaces.labels(state).set(per_state.get(state, 0))
    if size is not None:
        m.workspace_bytes.set(size)
        m.workspace_bytes_at = now
    return asdict(snap)


def run_poison(w: JobHost) -> dict[str, Any]:
    s = w.settings.service
    pills = poison(w.queue, window=s.poison_window)
    w.metrics.poison_pills.set(len(pills))
    out: dict[str, Any] = {"poison_pills": len(pills), "ids": [str(t.id) for t in pills]}
    if pills and s.poison_alert:
        from . import delivery

        sent = delivery.alert_poison(w.db, w.settings.digest, pills, s.poison_interval)
        out["alerts"] = [o.to_json() for o in sent]
    return out


def run_prune(w: JobHost) -> dict[str, Any]:
    s = w.settings.service
    r = prune(w.queue, retention=s.retention, batch=s.prune_batch)
    w.metrics.pruned.inc(r.deleted)
    return {"deleted": r.deleted}


def run_digest(w: JobHost) -> dict[str, Any]:
    from . import delivery

    if not w.settings.digest.destinations():
        return {"deliveries": [], "skipped": "no destination configured"}
    lost_after = w.settings.loop.fleet_lost_seconds
    outcomes = delivery.send_due(w.db, w.settings.digest, lost_after=lost_after)
    for o in outcomes:
        w.metrics.digest_deliveries.labels(o.destination, o.state).inc()
    failed = [o for o in outcomes if o.state != "delivered"]
    if failed:
        # counted as a failed run, so that alerts on afk_job_failures_total fire
        raise RuntimeError("; ".join(f"{o.destination}: {o.error}" for o in failed))
    return {"deliveries": [o.to_json() for o in outcomes]}


def run_questions(w: JobHost) -> dict[str, Any]:
    """New questions of the agents, to the alert destinations."""
    from . import delivery

    d = w.settings.digest
    if not d.question_alert or not d.destinations():
        return {"alerts": [], "skipped": "question alerts are off or go nowhere"}
    sent = delivery.alert_questions(w.db, d, w.settings.service.public_url)
    sent += delivery.alert_waiting(w.db, d)
    return {"alerts": [o.to_json() for o in sent]}


def run_approvals(w: JobHost) -> dict[str, Any]:
    """Approval requests no one decided within their time to live: denied
    (their tasks due again, the call then refused), unless held (issue 43)."""
    from . import delivery

    expired = w.queue.expire_approvals()
    if expired:
        logger.info(
            "%d approval request(s) expired undecided: denied",
            len(expired),
            extra={"action": "approvals", "expired": [r["id"] for r in expired]},
        )
    d = w.settings.digest
    if not d.destinations():
        return {"expired": len(expired), "alerts": []}
    sent = delivery.alert_approvals(w.db, d, w.settings.service.public_url)
    return {"expired": len(expired), "alerts": [o.to_json() for o in sent]}


JOBS: tuple[Job, ...] = (
    Job("leader", lambda s: s.service.leader_interval, False, run_leader, tick=False),
    Job("reclaim", lambda s: s.service.reclaim_interval, False, run_reclaim),
    Job("approvals", lambda s: s.service.alert_interval, False, run_approvals),
    Job("gauges", lambda s: s.service.gauges_interval, False, run_gauges),
    Job("poison", lambda s: s.service.poison_interval, True, run_poison),
    Job("prune", lambda s: s.service.prune_interval, True, run_prune),
    Job(
        "questions",
        lambda s: s.service.alert_interval,
        True,
        run_questions,
        enabled=lambda s: s.digest.question_alert and bool(s.digest.destinations()),
    ),
    Job(
        "digest",
        lambda s: s.digest.check_interval,
        True,
        run_digest,
        enabled=lambda s: bool(s.digest.destinations()),
    ),
)
BY_NAME = {job.name: job for job in JOBS}
