"""What `afk loop --sandbox` adds to a run's start (issue 40 item 7): the same
minimal agent (an interpreter that exits at once) started bare, and started
inside the boundary exactly as the loop starts a run (the engine, the settings
afk writes, the run's own folder), medians of RUNS each, interleaved so that
a busy moment of the machine costs both alike.

    python -m bench.sandbox [--runs 20] [--out FILE]

The engine is `srt` on PATH or AFK_SRT (tests/helpers/sandbox_runtime.py
fetches the pinned one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import emit_report
from watchdog.agents import reach, sandbox


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=True, timeout=120)
    return (time.perf_counter() - began) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", help="write the report (JSON) here too")
    args = parser.parse_args(argv)
    engine = sandbox.locate(os.environ.get("AFK_SRT", ""), os.environ)
    boundary = sandbox.Boundary(engine=engine, version=sandbox.version(engine))
    work = tempfile.mkdtemp(prefix="afk-bench-sandbox-", dir="/tmp")
    agent = [sys.executable, "-I", "-S", "-c", "pass"]
    env = {**os.environ}
    bare: list[float] = []
    inside: list[float] = []
    try:
        for i in range(args.runs + 1):
            run_dir = reach.run_folder()
            try:
                os.mkdir(os.path.join(run_dir, "tmp"))
                wrapped = boundary.wrap(agent, None, env, work, run_dir, None)
                pair = (timed(agent, env, work), timed(wrapped, env, work))
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
            if i:  # (the first pair warms the page cache)
                bare.append(pair[0])
                inside.append(pair[1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "engine": f"{sandbox.ENGINE} {boundary.version}",
        "runs": args.runs,
        "bare_ms": round(statistics.median(bare), 1),
        "sandboxed_ms": round(statistics.median(inside), 1),
        "added_ms": round(statistics.median(inside) - statistics.median(bare), 1),
        "target_added_ms": 500,
    }
    report["within_target"] = report["added_ms"] <= report["target_added_ms"]
    emit_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
