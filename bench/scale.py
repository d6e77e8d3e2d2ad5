"""Sections 3 and 4: the cost of a claim, the gauges and the digest as the
table grows (with EXPLAIN plans), and under a long transaction."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench import workers
from bench.common import Config, Results, Server, fill_afk, log, vacuum
from bench.throughput import drain
from watchdog import Queue, jobs
from watchdog import sql as queries
from watchdog.agents.decide import account_outcomes
from watchdog.config import DigestSettings
from watchdog.digest import build
from watchdog.states import EXACT_BELOW


def populate(dsn: str, size: int) -> None:
    """Mostly done rows over 50 agents, a few hundred running with expired
    leases, a thousand todo, some failed; as a year of use leaves them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO afk_task (agent_id, ordinal, title, state, attempts, updated_at,
                                  created_at, checkpoint)
            SELECT 'agent-' || (i %% 50), i, 'task ' || i, 'done', 1,
                   now() - (i %% 365) * interval '1 day', now() - (i %% 365) * interval '1 day',
                   '{"files": ["a.py"]}'
              FROM generate_series(1, %s) i""",
            (size,),
        )
        conn.execute(
            """
            INSERT INTO afk_task (agent_id, ordinal, title, state, attempts, lease_until,
                                  lease_owner, lease_token, lease_seconds, checkpoint_at)
            SELECT 'agent-' || (i %% 50), %s + i, 'stalled ' || i, 'running', 1,
                   now() - interval '1 minute', 'w' || i, i, 600, now() - interval '20 minutes'
              FROM generate_series(1, 300) i""",
            (size,),
        )
        conn.execute(
            """
            INSERT INTO afk_task (agent_id, ordinal, title, state)
            SELECT 'agent-' || (i %% 50), %s + 1000 + i, 'todo ' || i, 'todo'
              FROM generate_series(1, 1000) i""",
            (size,),
        )
        conn.execute(
            """
            INSERT INTO afk_task (agent_id, ordinal, title, state, attempts, last_error, updated_at)
            SELECT 'agent-' || (i %% 50), %s + 3000 + i, 'failed ' || i, 'failed', 5,
                   'HTTP 503 (request ' || i || ')', now() - (i %% 48) * interval '1 hour'
              FROM generate_series(1, 200) i""",
            (size,),
        )
        conn.execute(
            "INSERT INTO afk_agent (agent_id, next_ordinal) "
            "SELECT agent_id, max(ordinal) + 1 FROM afk_task GROUP BY agent_id "
            "ON CONFLICT (agent_id) DO UPDATE SET next_ordinal = EXCLUDED.next_ordinal"
        )
        conn.execute("VACUUM ANALYZE afk_task")


def timed(fn: Callable[[], Any], reps: int, reset: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(reps):
        if reset:
            reset()
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def explain(dsn: str, name: str, params: dict[str, Any], out: Path) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + queries.checked(name, params), params
        ).fetchall()
        conn.rollback()
    out.write_text("\n".join(r[0] for r in rows) + "\n")


def expire_stalled(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE afk_task SET state = 'running', "
            "lease_until = now() - interval '1 minute' WHERE title LIKE 'stalled %'"
        )


def claim_done(queue: Queue) -> None:
    task = queue.claim("agent-7", runner="bench")
    assert task is not None
    queue.done(task)


def p95(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm
    times = []
    for _ in range(max(reps, 20)):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.quantiles(times, n=20)[-1]


def measure_pages(dsn: str, queue: Queue, reps: int) -> dict[str, float]:
    """p95 of rendering the status pages in-process (statements and template)."""
    from watchdog.web import StatusPages

    pages = StatusPages(queue.db, DigestSettings())
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM afk_task WHERE state = 'failed' LIMIT 1").fetchone()
    failed = str(row[0]) if row else str(uuid.UUID(int=0))
    return {
        "page / p95": p95(pages.overview, reps),
        "page /tasks/<id> p95": p95(lambda: pages.task(failed), reps),
        "page /agents/<id> p95": p95(lambda: pages.agent("agent-7", None, None), reps),
    }


def measure_scale(dsn: str, queue: Queue, reps: int) -> dict[str, float]:
    now = datetime.now(UTC)
    settings = DigestSettings()
    return {
        **measure_pages(dsn, queue, reps),
        "reclaim tick (300 expired)": timed(
            lambda: jobs.reclaim(queue), reps, lambda: expire_stalled(dsn)
        ),
        "gauge refresh": timed(lambda: jobs.gauges(queue), reps),
        "digest query (24 h)": timed(
            lambda: build(queue.db, now - timedelta(days=1), now, settings, UTC), reps
        ),
        "claim + done": timed(lambda: claim_done(queue), reps),
    }


def explain_all(dsn: str, slug: str, folder: Path) -> None:
    now = datetime.now(UTC)
    expire_stalled(dsn)
    plans: dict[str, dict[str, Any]] = {
        "reclaim": {"after_id": uuid.UUID(int=0), "batch": 500},
        "gauges": {
            "top_agents": 20,
            "poison_window": 3600,
            "exact_below": EXACT_BELOW,
            "runs_since": None,
        },
        "step": {
            **{
                k: None
                for k in (
                    "id",
                    "token",
                    "ok",
                    "result",
                    "error",
                    "account",
                    "run",
                    "labels",
                    "profiles",
                )
            },
            "backoff_base": 30,
            "backoff_cap": 3600,
            "claim": True,
            "agent_id": "agent-7",
            "runner": "x",
            "lease_seconds": 60,
        },
        "digest_data": {
            "start": now - timedelta(days=1),
            "end": now,
            "limit": 5000,
            "paused_after": 21600,
            "todo_late_after": 21600,
            "count_done": True,
            "exact_below": EXACT_BELOW,
            **dict(zip(("parking", "resets"), account_outcomes(), strict=True)),
        },
    }
    for name, params in plans.items():
        explain(dsn, name, params, folder / f"explain-{slug}-{name}.txt")


def bench_scale(server: Server, cfg: Config, results: Results, folder: Path) -> None:
    for size in cfg.scale_sizes:
        with server.database() as dsn:
            log(f"scale: loading {size:,} rows")
            populate(dsn, size)
            queue = Queue.connect(dsn, pool_size=None)
            for pruned in (False, True):
                if pruned:
                    jobs.prune(queue, retention=30 * 86400, batch=50_000)
                    vacuum(dsn)
                label = f"{size:,} rows" + (" after prune" if pruned else "")
                row = measure_scale(dsn, queue, cfg.scale_reps)
                results.scale[label] = row
                log(f"scale · {label}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in row.items()))
                explain_all(dsn, f"{size}{'-pruned' if pruned else ''}", folder)
            queue.close()


def bench_long_transaction(server: Server, cfg: Config, results: Results) -> None:
    """Workers draining while another session holds a snapshot, on the
    table as it ships and with a lower fillfactor (room for HOT updates of
    the hot lease columns in the same page)."""
    n = max(cfg.worker_counts[:2])
    variants = {"as shipped": None, "fillfactor 50": 50}
    runs: dict[str, dict[str, list[float]]] = {v: {"plain": [], "held": []} for v in variants}
    for _ in range(cfg.rounds):
        for variant, fillfactor in variants.items():
            for mode in ("plain", "held"):
                with server.database() as dsn:
                    if fillfactor:
                        with psycopg.connect(dsn, autocommit=True) as conn:
                            conn.execute(f"ALTER TABLE afk_task SET (fillfactor = {fillfactor})")
                    fill_afk(dsn, cfg)
                    vacuum(dsn)
                    if mode == "plain":
                        runs[variant][mode].append(drain(workers.afk_single, dsn, cfg, n))
                        continue
                    with psycopg.connect(dsn) as holder:
                        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                        holder.execute("SELECT count(*) FROM afk_task")  # the snapshot stays
                        runs[variant][mode].append(drain(workers.afk_single, dsn, cfg, n))
                        holder.rollback()
    results.long_txn = {
        "workers": n,
        **{f"{v} {m}": statistics.median(r) for v, per in runs.items() for m, r in per.items()},
    }
    log(f"long transaction: {results.long_txn}")
