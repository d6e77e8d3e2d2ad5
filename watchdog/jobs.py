"""The watchdog's jobs, each a plain function that runs once and returns what
it did. The service schedules them; ``afk watchdog tick JOB`` runs one; tests
call them directly."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .queue import Queue, ReclaimResult, Task

logger = logging.getLogger(__name__)


def reclaim(queue: Queue) -> ReclaimResult:
    """Expired leases -> paused, or failed once their attempts are spent."""
    result = queue.reclaim()
    if result.total:
        logger.info("reclaimed %d expired leases", result.total,
                    extra={"action": "reclaim", "paused": result.paused,
                           "failed": result.failed})
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


#: below this many rows (the planner's estimate) done tasks are counted exactly
EXACT_BELOW = 200_000


def gauges(queue: Queue, *, top_agents: int = 20, poison_window: float = 3600,
           exact_below: int = EXACT_BELOW) -> GaugeSnapshot:
    """Everything the metrics show, read in one statement."""
    row = queue.db.fetch("gauges", {"top_agents": top_agents, "poison_window": poison_window,
                                    "exact_below": exact_below})[0]
    states = {s: int(row["states"].get(s, 0)) for s in ("todo", "running", "paused", "done",
                                                        "failed")}
    return GaugeSnapshot(
        states=states,
        agents=[(str(a), str(s), int(n)) for a, s, n in row["agents"]] if top_agents else [],
        expired_leases=int(row["expired_leases"]),
        oldest_todo_age=float(row["oldest_todo_age"]),
        since_checkpoint=float(row["since_checkpoint"]),
        poison_pills=int(row["poison_pills"]),
        oldest_snapshot_age=float(row["oldest_snapshot_age"]),
    )


def poison(queue: Queue, *, window: float = 3600, limit: int = 1000) -> list[Task]:
    """Tasks that failed within ``window`` seconds: one structured log line each."""
    rows = queue.db.fetch("poison", {"window": window, "limit": limit})
    pills = [Task.from_row(r) for r in rows]
    for task in pills:
        logger.warning("poison pill: %s", task.title, extra={
            "action": "poison_pill", "task_id": str(task.id), "agent_id": task.agent_id,
            "attempts": task.attempts, "last_error": (task.last_error or "")[:500],
        })
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
        n = int(queue.db.fetch("prune", {"retention": retention, "batch": batch})[0]["n"])
        statements += 1
        deleted += n
        if n < batch:
            break
    if deleted:
        logger.info("pruned %d done tasks", deleted, extra={"action": "prune",
                                                            "deleted": deleted})
    return PruneResult(deleted, statements)
