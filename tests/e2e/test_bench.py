"""The benchmark in its tiny configuration, so that it cannot rot: every
section runs end to end and the report holds its rows and ratios."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import ROOT


def test_quick_benchmark_runs_and_reports(server_dsn, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--dsn", server_dsn, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (folder,) = tmp_path.iterdir()
    report = (folder / "results.md").read_text()
    for heading in (
        "Claim + done throughput",
        "Enqueue",
        "Cost as the table grows",
        "Under a long transaction",
        "CLI start-up",
    ):
        assert heading in report
    data = json.loads((folder / "results.json").read_text())
    for label in (
        "afk (API, claim+done)",
        "raw SQL limit (pgbench, same statements)",
        "afk (API, done + claim next in one statement)",
        "raw SQL limit (pgbench, combined statement)",
    ):
        rates = [r for runs in data["throughput"][label].values() for r in runs]
        assert rates and all(r > 0 for r in rates)
    assert {"API, batches of 1000", "COPY", "one INSERT per row"} <= set(data["enqueue"])
    assert all(r > 0 for runs in data["enqueue"].values() for r in runs)
    assert {"as shipped plain", "as shipped held"} <= set(data["long_txn"])
    assert (folder / "chart.png").stat().st_size > 1000
    assert list(folder.glob("explain-*-step.txt"))


def test_pgbench_s_claim_and_done_survive_an_agent_that_runs_dry(server_dsn, tmp_path):
    """pgbench draws an agent at random for each transaction, so one can run
    out of tasks before the run ends (it did once in CI: the done after an
    empty claim sent '' as a task id and pgbench aborted). A transaction
    whose claim takes nothing finishes nothing, and the rate counts what
    was done."""
    from bench.common import Config, Server, fill_afk, vacuum
    from bench.throughput import count, pgbench

    server = Server(server_dsn)
    cfg = Config(tasks=8, agents=2)  # 4 tasks an agent, 40 transactions a client
    with server.database() as dsn:
        fill_afk(dsn, cfg)
        vacuum(dsn)
        rate = pgbench(server, dsn, Config(tasks=80, agents=2), 2, tmp_path)
        assert count(dsn, "SELECT count(*) FROM afk_task WHERE state = 'done'") == 8
        assert count(dsn, "SELECT count(*) FROM afk_task WHERE state <> 'done'") == 0
    assert rate > 0


def test_the_fleet_bench_runs_and_reports_each_step(tmp_path):
    """bench.fleet --quick: loops as threads and as two processes, with and
    without an open transaction, each step's p50 and p99 and the sizes."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.fleet", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    steps = report["steps"]
    assert {(s["loops"], s["processes"], s["open_transaction"]) for s in steps} == {
        (n, p, held) for n in (4, 8) for p in (1, 2) for held in (False, True)
    }
    assert all(s["claims"] > 0 and s["hooks"] > 0 and s["claim_p99_ms"] > 0 for s in steps)
    assert report["end"]["table_bytes"] >= report["start"]["table_bytes"] > 0
    assert "holds" in report and "holds_with_open_transaction" in report
