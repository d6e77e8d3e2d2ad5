"""Section 2: enqueue, one task at a time and in batches, through the API and
the CLI."""

from __future__ import annotations

import json
import statistics
import time

import psycopg

from bench.common import Config, Results, Server, log
from bench.throughput import count
from watchdog import NewTask, Queue


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
