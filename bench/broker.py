"""What an agent's `afk` command costs through its run's broker (issue 49
item 2): a real `afk loop` whose stand-in agent runs CALLS `afk checkpoint`
and `afk heartbeat` commands from inside its run, each timed from the
agent's side (process start to exit), beside `python -c pass` started the
same way. The broker parses a command once and runs it in its own process;
before issue 49 it ran `python -m watchdog ARGV` in a new interpreter per
command. Commands run as the `afk` console script runs them (`python -m
watchdog`). Only the CLI is used, so the same bench runs on any version:

    python -m bench.broker [--dsn DSN] [--calls 40] [--out FILE]

With no DSN it starts a private embedded server in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

#: the stand-in agent: times each command (start to exit), then writes them
AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    calls = int(os.environ["BENCH_CALLS"])
    out = {"pass": [], "checkpoint": [], "heartbeat": []}
    for i in range(calls + 1):
        for name, argv in (("pass", [sys.executable, "-c", "pass"]),
                           ("checkpoint", [sys.executable, "-m", "watchdog", "checkpoint",
                                           "--patch", json.dumps({"step": i})]),
                           ("heartbeat", [sys.executable, "-m", "watchdog", "heartbeat"])):
            began = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            if i:  # (the first round warms the page cache)
                out[name].append((time.perf_counter() - began) * 1000)
    with open(os.environ["BENCH_OUT"], "w") as f:
        json.dump(out, f)
    """
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL server (default: a private embedded one)")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--out", help="write the report (JSON) here too")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="afk-bench-broker-"))
    env = {**os.environ, "AFK_HOME": str(folder / "afk-home")}
    if args.dsn:
        env["AFK_DSN"] = args.dsn
    afk = [sys.executable, "-m", "watchdog.cli"]
    try:
        subprocess.run([*afk, "migrate"], env=env, check=True, capture_output=True)
        subprocess.run(
            [*afk, "enqueue", "--agent", "bench", "--title", "measured"],
            env=env,
            check=True,
            capture_output=True,
        )
        agent, out = folder / "agent.py", folder / "out.json"
        agent.write_text(AGENT)
        loop = [*afk, "loop", "--agent", "bench", "--max-tasks", "1", "--lease", "600", "--"]
        given = {**env, "BENCH_CALLS": str(args.calls), "BENCH_OUT": str(out)}
        proc = subprocess.run(
            [*loop, sys.executable, str(agent)], env=given, capture_output=True, text=True
        )
        if proc.returncode != 0 or not out.exists():
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        timed = json.loads(out.read_text())
    finally:
        if not args.dsn:
            subprocess.run([*afk, "db", "stop"], env=env, capture_output=True)
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    report = {
        "calls": args.calls,
        "median_ms": {k: round(statistics.median(v), 1) for k, v in timed.items()},
        "p95_ms": {k: round(sorted(v)[int(len(v) * 0.95) - 1], 1) for k, v in timed.items()},
    }
    text = json.dumps(report, indent=1)  # (no bench.common: it runs on any version)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
