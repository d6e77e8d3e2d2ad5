"""afk-watchdog benchmarks, all in one run, contenders interleaved.

    python -m bench.run                 # the full run, on a fresh embedded server
    python -m bench.run --dsn DSN       # on any server (it creates databases there)
    python -m bench.run --quick         # seconds: the configuration the test suite runs

Writes results/<time>/results.md (medians and ratios), results.json, chart.png
and the EXPLAIN (ANALYZE, BUFFERS) plans of the scale section.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from bench.common import QUICK, ROOT, Config, Results, Server
from bench.report import report


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
    parser.add_argument("--tasks", type=int, help="tasks per throughput run (default 20000)")
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
    if args.tasks:
        cfg.tasks = args.tasks
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
    # each section imported when it runs (bench.compare runs the throughput
    # section with older packages, which lack what the others import)
    try:
        if sections & {"throughput", "pinned"}:
            from bench.throughput import bench_pinned, bench_throughput

            if "throughput" in sections:
                bench_throughput(server, cfg, results, folder)
            if "pinned" in sections:
                bench_pinned(server, cfg, results, folder)
        if "enqueue" in sections:
            from bench.enqueue import bench_enqueue

            bench_enqueue(server, cfg, results)
        if sections & {"scale", "long"}:
            from bench.scale import bench_long_transaction, bench_scale

            if "scale" in sections:
                bench_scale(server, cfg, results, folder)
            if "long" in sections:
                bench_long_transaction(server, cfg, results)
        if sections & {"cli", "rss"}:
            from bench.startup import bench_cli, bench_rss

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
