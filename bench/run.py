"""afk-watchdog benchmarks, all in one run, contenders interleaved.

    python -m bench.run                 # the full run, on a fresh embedded server
    python -m bench.run --dsn DSN       # on any server (it creates databases there)
    python -m bench.run --quick         # seconds: the configuration the test suite runs

Writes results/<time>/results.md (medians and ratios), results.json, chart.png
and the EXPLAIN (ANALYZE, BUFFERS) plans of the scale section.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench import workers
from watchdog import NewTask, Queue, embedded, jobs
from watchdog import sql as queries
from watchdog.config import DigestSettings
from watchdog.db import Database
from watchdog.digest import build
from watchdog.states import EXACT_BELOW

CTX = mp.get_context("spawn")
ROOT = Path(__file__).parent.parent


@dataclass
class Config:
    tasks: int = 20_000
    agents: int = 16
    worker_counts: tuple[int, ...] = (1, 4, 8)
    rounds: int = 3
    enqueue_rows: int = 100_000
    per_row_rows: int = 5_000
    scale_sizes: tuple[int, ...] = (10_000, 1_000_000, 5_000_000)
    scale_reps: int = 5
    cli_reps: int = 20
    rss_hour_ticks: bool = True
    peers: bool = True
    batch_size: int = 50


QUICK = Config(
    tasks=120,
    agents=4,
    worker_counts=(2,),
    rounds=1,
    enqueue_rows=1_000,
    per_row_rows=100,
    scale_sizes=(1_000,),
    scale_reps=2,
    cli_reps=2,
    rss_hour_ticks=False,
    peers=False,
    batch_size=20,
)


@dataclass
class Results:
    config: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)
    throughput: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    enqueue: dict[str, list[float]] = field(default_factory=dict)
    scale: dict[str, dict[str, float]] = field(default_factory=dict)
    long_txn: dict[str, float] = field(default_factory=dict)
    pinned: dict[str, float] = field(default_factory=dict)
    cli: dict[str, float] = field(default_factory=dict)
    rss_mb: float | None = None
    notes: list[str] = field(default_factory=list)


# -- the server ------------------------------------------------------------


class Server:
    def __init__(self, dsn: str | None) -> None:
        self.home: Path | None = None
        if dsn is None:
            self.home = Path(tempfile.mkdtemp(prefix="afk-bench-"))
            dsn = embedded.ensure_running(self.home).dsn("postgres")
        self.dsn = dsn
        self.bin = embedded.bin_dir()
        self.counter = 0

    def version(self) -> str:
        with psycopg.connect(self.dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "?"

    @contextmanager
    def database(self, migrate: bool = True) -> Iterator[str]:
        self.counter += 1
        name = f"afk_bench_{os.getpid()}_{self.counter}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dsn = make_conninfo(self.dsn, dbname=name)
        if migrate:
            db = Database(dsn)
            db.migrate()
            db.close()
        try:
            yield dsn
        finally:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        if self.home is not None:
            embedded.stop(self.home)
            shutil.rmtree(self.home, ignore_errors=True)


def as_uri(dsn: str) -> str:
    """A postgresql:// URI of any DSN (asyncpg takes no other form)."""
    from urllib.parse import quote, urlencode

    p = conninfo_to_dict(dsn)
    auth = quote(str(p.get("user", "")), safe="")
    if p.get("password"):
        auth += ":" + quote(str(p["password"]), safe="")
    query = {k: str(v) for k, v in p.items() if k in ("host", "port", "sslmode")}
    return f"postgresql://{auth}@/{quote(str(p['dbname']), safe='')}?{urlencode(query)}"


def agents_of(cfg: Config) -> list[str]:
    return [f"bench-{i}" for i in range(cfg.agents)]


def fill_afk(dsn: str, cfg: Config, extra: float = 1.0) -> None:
    queue = Queue.connect(dsn, pool_size=None)
    per_agent = int(cfg.tasks // cfg.agents * extra)
    for agent in agents_of(cfg):
        for lo in range(0, per_agent, 1000):
            queue.enqueue(agent, [NewTask(f"t{i}") for i in range(lo, min(per_agent, lo + 1000))])
    queue.close()


def vacuum(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


# -- 1. claim + done throughput --------------------------------------------------


def drain(target: Callable[..., None], dsn: str, cfg: Config, n: int, **kwargs: Any) -> float:
    """Start n worker processes, release them together, return tasks/s."""
    ready, start = CTX.Semaphore(0), CTX.Event()
    procs = [
        CTX.Process(target=target, args=(dsn, agents_of(cfg), i, ready, start), kwargs=kwargs)
        for i in range(n)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=120):
            raise RuntimeError(f"{target.__name__}: a worker did not get ready")
    began = time.perf_counter()
    start.set()
    for p in procs:
        p.join(timeout=600)
        if p.exitcode != 0:
            raise RuntimeError(f"{target.__name__}: a worker exited {p.exitcode}")
    return (cfg.tasks // cfg.agents * cfg.agents) / (time.perf_counter() - began)


def _pgbench_sql(statement: str, values: dict[str, str]) -> str:
    out = re.sub(r"%\((\w+)\)s", lambda m: values[m.group(1)], statement)
    out = "\n".join(line for line in out.splitlines() if not line.strip().startswith("--"))
    return " ".join(out.split())


#: the `step` statement's parameters as pgbench variables: a claim...
CLAIM_VALUES = {
    "id": "NULL",
    "token": "NULL",
    "result": "NULL",
    "error": "NULL",
    "backoff_base": "30",
    "backoff_cap": "3600",
    "claim": "true",
    "agent_id": "('bench-' || :a)",
    "runner": "('pgbench-' || :client_id)",
    "lease_seconds": "300",
    "account": "NULL",
    "run": "NULL",
}
#: ...a finish of the held task, and a finish that claims the next
DONE_VALUES = {**CLAIM_VALUES, "id": "(:id)::uuid", "token": ":lease_token", "claim": "false"}
DONE_NEXT_VALUES = {**DONE_VALUES, "claim": "true", "agent_id": "NULL", "runner": "NULL"}


def step_sql(values: dict[str, str]) -> str:
    """The project's own `step` statement, read from its SQL file, with pgbench
    variables in place of the named parameters, ending in one row saying
    whether a task is held now (`have`, with its `id` and `lease_token`)."""
    step = queries.query("step").strip()
    held = (
        "SELECT count(*) AS have, min(id::text) AS id, min(lease_token) AS lease_token FROM claimed"
    )
    return _pgbench_sql(step[: step.rindex("SELECT t.state AS cur_state")] + held, values)


def pgbench_script(path: Path) -> None:
    """The two-statement loop: claim, then done."""
    path.write_text(
        f"\\set a random(0, :agents - 1)\n{step_sql(CLAIM_VALUES)}\n\\gset\n"
        f"{step_sql(DONE_VALUES)}\n"
    )


def pgbench_next_script(path: Path) -> None:
    """The combined statement's limit: each pgbench transaction finishes the
    held task and claims the next in one statement; a client holding nothing
    (at its start: `-D have=0`, or when its agent ran dry) claims first."""
    path.write_text(
        "\\if :have = 0\n\\set a random(0, :agents - 1)\n"
        f"{step_sql(CLAIM_VALUES)}\n\\gset\n\\endif\n"
        f"\\if :have = 1\n{step_sql(DONE_NEXT_VALUES)}\n\\gset\n\\endif\n"
    )


def pgbench(
    server: Server, dsn: str, cfg: Config, clients: int, folder: Path, combined: bool = False
) -> float:
    """Tasks finished per second by pgbench running the statements."""
    script = folder / ("finish_claim.sql" if combined else "claim_done.sql")
    (pgbench_next_script if combined else pgbench_script)(script)
    params = conninfo_to_dict(dsn)
    env = {
        **os.environ,
        "PGHOST": str(params.get("host", "")),
        "PGPORT": str(params.get("port", "5432")),
        "PGUSER": str(params.get("user", "")),
        "PGDATABASE": str(params["dbname"]),
        "PGPASSWORD": str(params.get("password", "")),
    }
    # pgbench draws an agent at random for each transaction: the table holds
    # 1.5x the tasks (see run_contender) so that no agent runs dry mid-run
    per_client = cfg.tasks // clients
    out = subprocess.run(
        [
            str(server.bin / "pgbench"),
            "-n",
            "-M",
            "prepared",
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-t",
            str(per_client),
            "-D",
            f"agents={cfg.agents}",
            "-D",
            "have=0",
            "-f",
            str(script),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    if out.returncode != 0 or not failed or failed.group(1) != "0":
        raise RuntimeError(f"pgbench failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    match = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    if not match:
        raise RuntimeError(f"pgbench printed no tps: {out.stdout[-500:]}")
    tps = float(match.group(1))
    if not combined:
        return tps
    # a transaction that only claimed finished nothing: count what was done
    seconds = per_client * clients / tps
    return count(dsn, "SELECT count(*) FROM afk_task WHERE state = 'done'") / seconds


def setup_pgqueuer(dsn: str, cfg: Config) -> None:
    import asyncio

    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    async def main() -> None:
        conn = await asyncpg.connect(dsn=as_uri(dsn))
        q = Queries(AsyncpgDriver(conn))
        await q.install()
        n = cfg.tasks // cfg.agents * cfg.agents
        for lo in range(0, n, 5000):
            k = min(n, lo + 5000) - lo
            await q.enqueue(["noop"] * k, [None] * k, [0] * k)
        await conn.close()

    asyncio.run(main())


def setup_procrastinate(dsn: str, cfg: Config) -> None:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    def noop() -> None:
        return None

    with app.open():
        app.schema_manager.apply_schema()
        n = cfg.tasks // cfg.agents * cfg.agents
        for lo in range(0, n, 5000):
            noop.batch_defer(*[{} for _ in range(min(n, lo + 5000) - lo)])


def contenders(cfg: Config) -> list[tuple[str, str]]:
    names = [
        ("afk (API, claim+done)", "afk"),
        ("raw SQL limit (pgbench, same statements)", "pgbench"),
        ("afk (API, done + claim next in one statement)", "afk-next"),
        ("raw SQL limit (pgbench, combined statement)", "pgbench-next"),
        (f"afk (batch of {cfg.batch_size})", "afk-batch"),
    ]
    if cfg.peers:
        names += [
            ("pgqueuer 1.6 (batch 10)", "pgqueuer-10"),
            ("pgqueuer 1.6 (batch 1)", "pgqueuer-1"),
            ("procrastinate 3.10", "procrastinate"),
        ]
    return names


def count(dsn: str, statement: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(statement).fetchone()
        return int(row[0]) if row else 0


def checked(rate: float, done: int, expected: int, who: str) -> float:
    """A rate only counts if every task was really processed."""
    if done != expected:
        raise RuntimeError(f"{who}: {done} tasks processed, expected {expected}")
    return rate


def run_contender(key: str, server: Server, cfg: Config, n: int, folder: Path) -> float:
    total = cfg.tasks // cfg.agents * cfg.agents
    if key.startswith(("afk", "pgbench")):
        with server.database() as dsn:
            fill_afk(dsn, cfg, extra=1.5 if key.startswith("pgbench") else 1.0)
            vacuum(dsn)
            if key == "pgbench":
                rate = pgbench(server, dsn, cfg, n, folder)
                total = cfg.tasks // n * n
            elif key == "pgbench-next":
                return pgbench(server, dsn, cfg, n, folder, combined=True)
            elif key == "afk":
                rate = drain(workers.afk_single, dsn, cfg, n)
            elif key == "afk-next":
                rate = drain(workers.afk_next, dsn, cfg, n)
            else:
                rate = drain(workers.afk_batch, dsn, cfg, n, size=cfg.batch_size)
            done = count(dsn, "SELECT count(*) FROM afk_task WHERE state = 'done'")
            return checked(rate, done, total, key)
    if key.startswith("pgqueuer"):
        with server.database(migrate=False) as dsn:
            setup_pgqueuer(dsn, cfg)
            vacuum(dsn)
            rate = drain(
                workers.pgqueuer_worker, as_uri(dsn), cfg, n, batch_size=int(key.split("-")[1])
            )
            left = count(dsn, "SELECT count(*) FROM pgqueuer")
            return checked(rate, total - left, total, key)
    with server.database(migrate=False) as dsn:
        setup_procrastinate(dsn, cfg)
        vacuum(dsn)
        rate = drain(workers.procrastinate_worker, dsn, cfg, n)
        done = count(dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")
        return checked(rate, done, total, key)


def bench_throughput(server: Server, cfg: Config, results: Results, folder: Path) -> None:
    names = contenders(cfg)
    for label, _ in names:
        results.throughput[label] = {n: [] for n in cfg.worker_counts}
    for round_ in range(cfg.rounds):
        for n in cfg.worker_counts:
            for label, key in names:  # interleaved: A B C ... then again
                rate = run_contender(key, server, cfg, n, folder)
                results.throughput[label][n].append(rate)
                log(f"round {round_ + 1} · {n} workers · {label}: {rate:,.0f} tasks/s")


@contextmanager
def pinned(server: Server) -> Iterator[bool]:
    """The server on CPU 0 and this process (so every worker and pgbench it
    starts) on CPU 1: clients no longer take CPU from the server. Yields
    False, pinning nothing, where that cannot be done (a --dsn server, one CPU)."""
    info = embedded.running(server.home / "pgdata") if server.home else None
    cpus = sorted(os.sched_getaffinity(0))
    if info is None or len(cpus) < 2:
        yield False
        return
    server_cpu, client_cpu = {cpus[0]}, {cpus[1]}
    pids = [
        info.pid,
        *(int(p) for p in Path(f"/proc/{info.pid}/task/{info.pid}/children").read_text().split()),
    ]
    for pid in pids:  # backends forked from now on inherit the postmaster's
        with suppress(OSError):
            os.sched_setaffinity(pid, server_cpu)
    os.sched_setaffinity(0, client_cpu)
    try:
        yield True
    finally:
        os.sched_setaffinity(0, set(cpus))
        for pid in pids:
            with suppress(OSError):
                os.sched_setaffinity(pid, set(cpus))


def bench_pinned(server: Server, cfg: Config, results: Results, folder: Path) -> None:
    """Claim+done at 4 workers with the clients pinned away from the server:
    if the API's ratio to pgbench rises, the limit was the Python clients'
    CPU competing with the server, not the statements."""
    n = max(cfg.worker_counts[:2])
    keys = [
        ("afk (API, claim+done)", "afk"),
        ("raw SQL limit (pgbench, same statements)", "pgbench"),
        ("afk (API, done + claim next in one statement)", "afk-next"),
    ]
    runs: dict[str, list[float]] = {label: [] for label, _ in keys}
    with pinned(server) as ok:
        if not ok:
            results.notes.append("pinned run skipped: needs the embedded server and 2 CPUs")
            return
        for _ in range(cfg.rounds):
            for label, key in keys:
                runs[label].append(run_contender(key, server, cfg, n, folder))
    results.pinned = {"workers": n, **{label: statistics.median(r) for label, r in runs.items()}}
    log(f"pinned: {results.pinned}")


# -- 2. enqueue -------------------------------------------------------------------


def bench_enqueue(server: Server, cfg: Config, results: Results) -> None:
    rows = cfg.enqueue_rows
    labels = [
        f"API, one batch of {rows:,}",
        "API, batches of 1000",
        "COPY",
        "raw SQL: COPY to a temp table, INSERT … SELECT … ON CONFLICT",
        "one INSERT per row",
    ]
    for label in labels:
        results.enqueue[label] = []

    def api(batch: int) -> float:
        with server.database() as dsn:
            q = Queue.connect(dsn, pool_size=1)
            began = time.perf_counter()
            for lo in range(0, rows, batch):
                q.enqueue(
                    "e",
                    [
                        NewTask(f"t{i}", {"i": i}, key=f"k{i}")
                        for i in range(lo, min(rows, lo + batch))
                    ],
                )
            rate = rows / (time.perf_counter() - began)
            q.close()
            if count(dsn, "SELECT count(*) FROM afk_task") != rows:
                raise RuntimeError("enqueue: rows missing")
            return rate

    for _ in range(cfg.rounds):
        results.enqueue[f"API, one batch of {rows:,}"].append(api(rows))
        results.enqueue["API, batches of 1000"].append(api(1000))
        with server.database() as dsn, psycopg.connect(dsn) as conn:
            # the staging design, as raw SQL with none of the API's checks:
            # the most it could reach
            began = time.perf_counter()
            conn.execute(
                "CREATE TEMP TABLE staged (n int, title text, spec jsonb, "
                "idem_key text) ON COMMIT DROP"
            )
            with conn.cursor().copy("COPY staged FROM STDIN") as copy:
                for i in range(rows):
                    copy.write_row((i, f"t{i}", json.dumps({"i": i}), f"k{i}"))
            conn.execute(
                "INSERT INTO afk_task (agent_id, ordinal, title, spec, idem_key) "
                "SELECT 'e', n + 1, title, spec, idem_key FROM staged "
                "ON CONFLICT (idem_key) DO NOTHING RETURNING id"
            ).fetchall()
            conn.commit()
            results.enqueue["raw SQL: COPY to a temp table, INSERT … SELECT … ON CONFLICT"].append(
                rows / (time.perf_counter() - began)
            )
        with server.database() as dsn, psycopg.connect(dsn, autocommit=True) as conn:
            began = time.perf_counter()
            with conn.cursor().copy(
                "COPY afk_task (agent_id, ordinal, title, spec, idem_key) FROM STDIN"
            ) as copy:
                for i in range(rows):
                    copy.write_row(("e", i + 1, f"t{i}", json.dumps({"i": i}), f"k{i}"))
            results.enqueue["COPY"].append(rows / (time.perf_counter() - began))
        with server.database() as dsn, psycopg.connect(dsn, autocommit=True) as conn:
            n = cfg.per_row_rows
            began = time.perf_counter()
            for i in range(n):
                conn.execute(
                    "INSERT INTO afk_task (agent_id, ordinal, title, spec, idem_key) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    ("e", i + 1, f"t{i}", json.dumps({"i": i}), f"k{i}"),
                )
            results.enqueue["one INSERT per row"].append(n / (time.perf_counter() - began))
    for label, rates in results.enqueue.items():
        log(f"enqueue · {label}: {statistics.median(rates):,.0f} rows/s")


# -- 3. scale ---------------------------------------------------------------------------


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
            **{k: None for k in ("id", "token", "result", "error", "account", "run")},
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


# -- 4. under a long transaction ------------------------------------------------------


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


# -- 5. CLI start-up and service memory ------------------------------------------------------


def bench_cli(server: Server, cfg: Config, results: Results) -> None:
    with server.database() as dsn:
        Queue.connect(dsn, pool_size=None).enqueue(
            "cli", [NewTask(f"t{i}") for i in range(cfg.cli_reps * 4)]
        )
        env = {**os.environ, "AFK_DSN": dsn}
        afk = [sys.executable, "-m", "watchdog.cli"]
        psql = [str(server.bin / "psql"), "-X", "-q", "-d", dsn, "-c"]
        claim_sql = re.sub(
            r"%\((\w+)\)s",
            lambda m: {**CLAIM_VALUES, "agent_id": "'cli'", "runner": "'psql'"}[m.group(1)],
            queries.query("step"),
        )
        status_sql = re.sub(r"%\((\w+)\)s", "NULL", queries.query("status"))

        def run(cmd: list[str]) -> float:
            began = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=False, timeout=60)
            return (time.perf_counter() - began) * 1000

        for label, cmd in (
            ("afk claim", [*afk, "claim", "--agent", "cli"]),
            ("psql -c (claim)", [*psql, claim_sql]),
            ("afk status", [*afk, "status"]),
            ("psql -c (status)", [*psql, status_sql]),
        ):
            run(cmd)  # warm the page cache
            results.cli[label] = statistics.median(run(cmd) for _ in range(cfg.cli_reps))
        log(f"cli: {results.cli}")


def bench_rss(server: Server, cfg: Config, results: Results) -> None:
    """The service's resident memory after an hour's worth of ticks, compressed:
    60 reclaims, 240 gauge refreshes, the leader checks and one of everything else."""
    with server.database() as dsn:
        port = _free_port()
        env = {
            **os.environ,
            "AFK_DSN": dsn,
            "AFK_METRICS_ADDR": f"127.0.0.1:{port}",
            "AFK_RECLAIM_INTERVAL": "0.05",
            "AFK_GAUGES_INTERVAL": "0.0125",
            "AFK_LEADER_INTERVAL": "0.0125",
            "AFK_LOG_LEVEL": "WARNING",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "watchdog.cli", "watchdog", "run"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            import httpx

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                except httpx.TransportError:
                    time.sleep(0.2)
                    continue
                m = re.search(r'afk_job_runs_total\{job="gauges"\} ([\d.e+]+)', text)
                if m and float(m.group(1)) >= 240:
                    break
                time.sleep(0.2)
            status = Path(f"/proc/{proc.pid}/status").read_text()
            rss = re.search(r"VmRSS:\s+(\d+)", status)
            results.rss_mb = int(rss.group(1)) / 1024 if rss else None
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    log(f"service RSS after an hour of ticks: {results.rss_mb:.1f} MB")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- report ------------------------------------------------------------------------------


def log(text: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {text}", flush=True)


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: Results, cfg: Config, folder: Path) -> str:
    lines = [
        "# afk-watchdog benchmarks",
        "",
        f"{results.environment}",
        "",
        f"Configuration: {asdict(cfg)}",
        "",
        "## 1. Claim + done throughput (tasks/s, median of rounds)",
        "",
    ]
    counts = cfg.worker_counts
    limit = "raw SQL limit (pgbench, same statements)"
    lines.append(
        "| contender | "
        + " | ".join(f"{n} workers" for n in counts)
        + " | "
        + " | ".join(f"x limit @{n}" for n in counts)
        + " |"
    )
    lines.append("|---" * (1 + 2 * len(counts)) + "|")
    for label, per in results.throughput.items():
        rates = [med(per[n]) for n in counts]
        ratios = [med(per[n]) / med(results.throughput[limit][n]) for n in counts]
        lines.append(
            f"| {label} | "
            + " | ".join(f"{r:,.0f}" for r in rates)
            + " | "
            + " | ".join(f"{x:.2f}" for x in ratios)
            + " |"
        )
    if results.pinned:
        pn = results.pinned
        limit_rate = pn["raw SQL limit (pgbench, same statements)"]
        lines += [
            "",
            f"### Clients pinned away from the server ({pn['workers']:.0f} workers, "
            "server on CPU 0, clients on CPU 1)",
            "",
            "| contender | tasks/s | x limit |",
            "|---|---|---|",
        ]
        lines += [
            f"| {k} | {v:,.0f} | {v / limit_rate:.2f} |" for k, v in pn.items() if k != "workers"
        ]
    lines += ["", "## 2. Enqueue (rows/s)", "", "| method | rows/s | x COPY |", "|---|---|---|"]
    copy = med(results.enqueue.get("COPY", []))
    for label, rates in results.enqueue.items():
        lines.append(f"| {label} | {med(rates):,.0f} | {med(rates) / copy:.2f} |")
    lines += ["", "## 3. Cost as the table grows (ms, median)", ""]
    if results.scale:
        ops = list(next(iter(results.scale.values())))
        lines.append("| rows | " + " | ".join(ops) + " |")
        lines.append("|---" * (1 + len(ops)) + "|")
        for label, row in results.scale.items():
            lines.append(f"| {label} | " + " | ".join(f"{row[o]:.1f}" for o in ops) + " |")
        lines.append("")
        lines.append("EXPLAIN (ANALYZE, BUFFERS) of each statement: `explain-*.txt`.")
    if results.long_txn:
        lt = results.long_txn
        lines += [
            "",
            "## 4. Under a long transaction (claim+done, tasks/s)",
            "",
            f"{lt['workers']} workers; *held*: another session holds a snapshot for the whole run.",
            "",
            "| table | normally | snapshot held | x |",
            "|---|---|---|---|",
        ]
        for variant in ("as shipped", "fillfactor 50"):
            plain, held = lt[f"{variant} plain"], lt[f"{variant} held"]
            lines.append(f"| {variant} | {plain:,.0f} | {held:,.0f} | {held / plain:.2f} |")
    if results.cli:
        c = results.cli
        lines += [
            "",
            "## 5. CLI start-up (ms, median) and service memory",
            "",
            "| command | ms |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v:.0f} |" for k, v in c.items()]
        lines += [
            "",
            f"afk claim x psql: {c['afk claim'] / c['psql -c (claim)']:.2f}; "
            f"afk status x psql: {c['afk status'] / c['psql -c (status)']:.2f}",
        ]
    if results.rss_mb is not None:
        lines.append(f"\nService RSS after an hour-equivalent of ticks: {results.rss_mb:.1f} MB")
    if results.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in results.notes]
    text = "\n".join(lines) + "\n"
    (folder / "results.md").write_text(text)
    (folder / "results.json").write_text(json.dumps(asdict(results), indent=2, default=str))
    chart(results, cfg, folder / "chart.png")
    return text


def chart(results: Results, cfg: Config, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    labels = list(results.throughput)
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        xs = [j + i * width for j in range(len(cfg.worker_counts))]
        ax.bar(
            xs, [med(results.throughput[label][n]) for n in cfg.worker_counts], width, label=label
        )
    ax.set_xticks([j + width * (len(labels) - 1) / 2 for j in range(len(cfg.worker_counts))])
    ax.set_xticklabels([f"{n} workers" for n in cfg.worker_counts])
    ax.set_ylabel("tasks/s (claim + done)")
    ax.set_title("afk-watchdog: claim + done throughput")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", help="a server to run on (default: a fresh embedded one)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds")
    parser.add_argument("--no-peers", action="store_true", help="skip pgqueuer, procrastinate")
    parser.add_argument("--peers", action="store_true", help="include the peers with --quick")
    parser.add_argument("--workers", help="comma-separated worker counts, e.g. 1,4,8")
    parser.add_argument("--rounds", type=int, help="rounds of interleaved runs (default 3)")
    parser.add_argument(
        "--only", help="comma-separated sections: throughput,pinned,enqueue,scale,long,cli,rss"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else Config()
    if args.no_peers:
        cfg.peers = False
    if args.peers:
        cfg.peers = True
    if args.workers:
        cfg.worker_counts = tuple(int(n) for n in args.workers.split(","))
    if args.rounds:
        cfg.rounds = args.rounds
    sections = set((args.only or "throughput,pinned,enqueue,scale,long,cli,rss").split(","))
    folder = Path(args.out) / datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    server = Server(args.dsn)
    results = Results(config=asdict(cfg))
    results.environment = {
        "postgres": server.version(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        if "throughput" in sections:
            bench_throughput(server, cfg, results, folder)
        if "pinned" in sections:
            bench_pinned(server, cfg, results, folder)
        if "enqueue" in sections:
            bench_enqueue(server, cfg, results)
        if "scale" in sections:
            bench_scale(server, cfg, results, folder)
        if "long" in sections:
            bench_long_transaction(server, cfg, results)
        if "cli" in sections:
            bench_cli(server, cfg, results)
        if "rss" in sections and cfg.rss_hour_ticks:
            bench_rss(server, cfg, results)
    finally:
        server.close()
    print(report(results, cfg, folder))
    print(f"results in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
