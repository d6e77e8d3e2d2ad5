"""The throughput section at several commits, side by side in one run:
``python -m bench.compare 8693e0c HEAD [--rounds 2] [--workers 4]``.

Each commit's ``watchdog/`` package is taken out of git (``git archive``)
and put first on the path of a run of *this* benchmark's throughput section
(the harness and the fixed yardstick stay the same; the statements, the
schema and the API are the commit's). The commits alternate round after
round on one server, and the report gives each contender's figures per
commit, the median, and the ratio to the fixed yardstick measured in the
same run, which does not change between commits."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime
from io import BytesIO
from pathlib import Path

from bench.common import Server, log

ROOT = Path(__file__).resolve().parents[1]
YARDSTICK = "fixed yardstick (pgbench, minimal SKIP LOCKED claim + finish)"


def checkout(rev: str, into: Path) -> str:
    """The commit's watchdog package under ``into``; its full hash."""
    full = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", full, "watchdog", "templates"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return full


def run_once(path: Path, dsn: str, workers: int, tasks: int, out: Path) -> dict[str, list[float]]:
    """One throughput run with the commit at ``path``: label -> rates."""
    # the commit's folder is the working directory, so its watchdog is first
    # on the path (before this checkout's, which PYTHONPATH names for bench);
    # `python -m` puts the working directory first, so it must not be ROOT
    env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{ROOT}"}
    imported = subprocess.run(
        [sys.executable, "-c", "import watchdog; print(watchdog.__file__)"],
        env=env,
        cwd=path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(imported).is_relative_to(path):
        raise RuntimeError(f"the run at {path.name} would import {imported}, not its own watchdog")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run",
            "--dsn",
            dsn,
            "--only",
            "throughput",
            "--no-peers",
            "--workers",
            str(workers),
            "--rounds",
            "1",
            "--tasks",
            str(tasks),
            "--out",
            str(out),
        ],
        env=env,
        cwd=path,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench.run failed at {path.name}: {proc.stderr[-2000:]}")
    (folder,) = sorted(out.iterdir())[-1:]
    results = json.loads((folder / "results.json").read_text())
    for f in out.iterdir():
        subprocess.run(["rm", "-rf", str(f)], check=False)
    return {label: per[str(workers)] for label, per in results["throughput"].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("revs", nargs="+", help="commits to compare (e.g. 8693e0c HEAD)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--report", help="write the report (Markdown) here")
    args = parser.parse_args(argv)
    server = Server(None)
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="afk-compare-") as tmp:
        paths, names = {}, {}
        for rev in args.revs:
            paths[rev] = Path(tmp) / rev.replace("/", "_")
            names[rev] = checkout(rev, paths[rev])[:10]
        try:
            for round_ in range(args.rounds):
                for rev in args.revs:
                    log(f"round {round_ + 1}: {rev}")
                    got = run_once(
                        paths[rev], server.dsn, args.workers, args.tasks, Path(tmp) / "out"
                    )
                    for label, rates in got.items():
                        figures.setdefault(label, {}).setdefault(rev, []).extend(rates)
        finally:
            server.close()
    lines = [
        f"# Throughput at {', '.join(args.revs)}, side by side",
        "",
        f"{datetime.now():%Y-%m-%d %H:%M}; {args.workers} workers, {args.tasks} tasks a run, "
        f"{args.rounds} rounds, the commits alternated; commits: "
        + ", ".join(f"{r} = {names[r]}" for r in args.revs),
        "",
        "| contender | "
        + " | ".join(f"{r} (tasks/s, each round)" for r in args.revs)
        + " | "
        + " | ".join(f"{r} / yardstick" for r in args.revs)
        + " |",
        "|---|" + "---|" * (2 * len(args.revs)),
    ]
    stick = {r: statistics.median(figures[YARDSTICK][r]) for r in args.revs}
    for label, per in figures.items():
        cells = []
        for r in args.revs:
            rates = per.get(r, [])
            cells.append(
                f"{statistics.median(rates):,.0f} ({', '.join(f'{x:,.0f}' for x in rates)})"
                if rates
                else "-"
            )
        ratios = [
            f"{statistics.median(per[r]) / stick[r]:.2f}" if per.get(r) else "-" for r in args.revs
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
