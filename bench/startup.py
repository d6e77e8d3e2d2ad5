"""Section 5: the CLI's start-up and the service's memory over simulated hours."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Config, Results, Server, log
from bench.throughput import CLAIM_VALUES
from watchdog import NewTask, Queue
from watchdog import sql as queries


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
