"""Section 1: claim + done throughput, afk against the raw-SQL limit (pgbench)
and the peers (pgqueuer, procrastinate), workers interleaved; and pinned to
one core."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench import workers
from bench.common import CTX, Config, Results, Server, agents_of, as_uri, fill_afk, log, vacuum
from watchdog import embedded
from watchdog import sql as queries


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
    "ok": "NULL",
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
    "labels": "NULL",
    "profiles": "NULL",
}


#: ...a finish of the held task, and a finish that claims the next
DONE_VALUES = {
    **CLAIM_VALUES,
    "id": "(:id)::uuid",
    "token": ":lease_token",
    "ok": "true",
    "claim": "false",
}


DONE_NEXT_VALUES = {**DONE_VALUES, "claim": "true", "agent_id": "NULL", "runner": "NULL"}


def step_sql(values: dict[str, str]) -> str:
    """The project's own `step` statement in the shape the Python API sends
    (the parameters that are NULL, and the claim, written in; see
    `Queue._step`), with pgbench variables in place of the other named
    parameters, ending in one row saying whether a task is held now
    (`have`, with its `id` and `lease_token`)."""
    if hasattr(queries, "shaped"):
        # (what the statement of the commit under test has: an older one, under
        # bench.compare, may not have every parameter of today's)
        known = queries.statement("step").params
        fixed: dict[str, bool | None] = {
            k: None for k, v in values.items() if v == "NULL" and k in known
        }
        step = queries.statement(queries.shaped("step", **fixed, claim=values["claim"] == "true"))
        text = _pgbench_sql(step.text, values)
    else:  # (a commit before shapes, under bench.compare: the statement as written)
        text = _pgbench_sql(queries.query("step"), values)
    held = (
        "SELECT count(*) AS have, min(id::text) AS id, min(lease_token) AS lease_token FROM claimed"
    )
    return text[: text.rindex(") SELECT ") + 2] + held


def pgbench_script(path: Path) -> None:
    """The two-statement loop: claim, then done (when the claim took one: an
    agent drawn at random may have run dry)."""
    path.write_text(
        f"\\set a random(0, :agents - 1)\n{step_sql(CLAIM_VALUES)}\n\\gset\n"
        f"\\if :have = 1\n{step_sql(DONE_VALUES)}\n\\endif\n"
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


#: the fixed yardstick: a minimal SKIP LOCKED claim and finish on a table of
#: its own, which does not change as the project's statements do (so a
#: ratio to it compares runs of different commits)
FIXED_SETUP = """
CREATE TABLE fixed_job (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'todo',
                        owner text);
INSERT INTO fixed_job (state) SELECT 'todo' FROM generate_series(1, {rows});
CREATE INDEX fixed_job_claim ON fixed_job (id) WHERE state = 'todo';
"""
FIXED_SCRIPT = """UPDATE fixed_job SET state = 'running', owner = 'c' || :client_id
 WHERE id = (SELECT id FROM fixed_job WHERE state = 'todo'
              ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id \\gset
UPDATE fixed_job SET state = 'done' WHERE id = :id;
"""


def pgbench_fixed(server: Server, cfg: Config, clients: int, folder: Path) -> float:
    """Tasks finished per second by the fixed yardstick."""
    with server.database(migrate=False) as dsn:
        rows = int(cfg.tasks * 1.2)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(FIXED_SETUP.format(rows=rows).encode())
        vacuum(dsn)
        script = folder / "fixed_claim_done.sql"
        script.write_text(FIXED_SCRIPT)
        return _run_pgbench(server, dsn, cfg, clients, script)


def _run_pgbench(
    server: Server, dsn: str, cfg: Config, clients: int, script: Path, *defines: str
) -> float:
    """pgbench running ``script``: its transactions per second."""
    params = conninfo_to_dict(dsn)
    env = {
        **os.environ,
        "PGHOST": str(params.get("host", "")),
        "PGPORT": str(params.get("port", "5432")),
        "PGUSER": str(params.get("user", "")),
        "PGDATABASE": str(params["dbname"]),
        "PGPASSWORD": str(params.get("password", "")),
    }
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
            *[arg for d in defines for arg in ("-D", d)],
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
    return float(match.group(1))


def pgbench(
    server: Server, dsn: str, cfg: Config, clients: int, folder: Path, combined: bool = False
) -> float:
    """Tasks finished per second by pgbench running the statements."""
    script = folder / ("finish_claim.sql" if combined else "claim_done.sql")
    (pgbench_next_script if combined else pgbench_script)(script)
    # pgbench draws an agent at random for each transaction: the table holds
    # 1.5x the tasks (see run_contender) so that an agent seldom runs dry
    # mid-run; a transaction that claimed nothing (or, combined, only
    # claimed) finished nothing: the rate counts what was done
    per_client = cfg.tasks // clients
    tps = _run_pgbench(server, dsn, cfg, clients, script, "have=0")
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
        ("fixed yardstick (pgbench, minimal SKIP LOCKED claim + finish)", "pgbench-fixed"),
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
    if key == "pgbench-fixed":
        return pgbench_fixed(server, cfg, n, folder)
    if key.startswith(("afk", "pgbench")):
        with server.database() as dsn:
            fill_afk(dsn, cfg, extra=1.5 if key.startswith("pgbench") else 1.0)
            vacuum(dsn)
            if key in ("pgbench", "pgbench-next"):
                return pgbench(server, dsn, cfg, n, folder, combined=key == "pgbench-next")
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
