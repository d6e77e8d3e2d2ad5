"""What every section of the benchmark shares: its configuration, its results,
the server it runs on, and filling a queue."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from watchdog import NewTask, Queue, embedded
from watchdog.db import Database

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


class Server:
    def __init__(self, dsn: str | None) -> None:
        self.home: Path | None = None
        if dsn is None:
            self.home = Path(tempfile.mkdtemp(prefix="afk-bench-"))
            dsn = embedded.ensure_running(self.home).dsn("postgres")
        self.dsn = dsn
        # (named _bin_dir before 2026-12: bench.compare runs older packages)
        bin_dir: Callable[[], Path] = getattr(embedded, "bin_dir", None) or embedded._bin_dir  # type: ignore[attr-defined]
        self.bin = bin_dir()
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


def open_queue(dsn: str, pool_size: int | None) -> Queue:
    """A queue on ``dsn`` (``Queue.connect``; before 2026-12, ``Queue(dsn)``,
    which bench.compare meets when it runs an older commit's package)."""
    connect: Callable[..., Queue] = getattr(Queue, "connect", Queue)
    return connect(dsn, pool_size=pool_size)


def fill_afk(dsn: str, cfg: Config, extra: float = 1.0) -> None:
    queue = open_queue(dsn, pool_size=None)
    per_agent = int(cfg.tasks // cfg.agents * extra)
    for agent in agents_of(cfg):
        for lo in range(0, per_agent, 1000):
            queue.enqueue(agent, [NewTask(f"t{i}") for i in range(lo, min(per_agent, lo + 1000))])
    queue.close()


def vacuum(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def log(text: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {text}", flush=True)


def emit_report(report: dict[str, Any], out: str | None) -> None:
    """A bench's report as JSON: printed, and written to ``out`` when given."""
    import json

    text = json.dumps(report, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
