"""The cost of `afk hook` to the agent: process start to exit, as Claude Code
runs it before and after every tool call, beside `python -c pass` and beside
`psql -c` running the same statement.

    python -m bench.hooks [--dsn DSN] [--runs 40] [--out bench/reports/DATE/hooks.md]

With no DSN it starts a private embedded server in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

from watchdog import sql
from watchdog.db import Database
from watchdog.queue import NewTask, Queue

AFK = str(Path(sys.executable).parent / "afk")


def timed(
    command: list[str],
    runs: int,
    stdin: bytes | Callable[[object], bytes] | None = None,
    env: dict[str, str] | None = None,
    each: object = None,
) -> list[float]:
    out = []
    for _ in range(runs):
        data = stdin(each) if callable(stdin) else stdin
        started = time.perf_counter()
        proc = subprocess.run(command, input=data, capture_output=True, env=env)
        out.append((time.perf_counter() - started) * 1000)
        assert proc.returncode == 0, proc.stderr
    return out


def row(name: str, ms: list[float], base: float) -> str:
    p50 = statistics.median(ms)
    p95 = sorted(ms)[int(0.95 * (len(ms) - 1))]
    return f"| {name} | {p50:.1f} | {p95:.1f} | {p50 / base:.1f}x |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--out")
    args = parser.parse_args()
    home = None
    dsn = args.dsn
    if dsn is None:
        from watchdog import embedded

        home = Path(tempfile.mkdtemp(prefix="afk-bench-hooks-"))
        dsn = embedded.ensure_running(home).dsn()
    try:
        report = run(dsn, args.runs)
    finally:
        if home is not None:
            from watchdog import embedded

            embedded.stop(home)
            shutil.rmtree(home, ignore_errors=True)
    print(report)
    if args.out:
        Path(args.out).write_text(report)


def run(dsn: str, runs: int) -> str:
    db = Database(dsn)
    db.migrate()
    q = Queue(db)
    q.enqueue("bench-hooks", [NewTask("t")])
    task = q.claim("bench-hooks", runner="bench-supervisor", lease_seconds=3600)
    assert task is not None
    env = {
        **os.environ,
        "AFK_DSN": dsn,
        "AFK_TASK_ID": str(task.id),
        "AFK_TASK_TOKEN": str(task.token),
    }

    def payload(event: str, session: str = "bench-session", **extra: object) -> bytes:
        return json.dumps(
            {
                "session_id": session,
                "cwd": "/w",
                "hook_event_name": event,
                "tool_name": "Write",
                "tool_input": {"file_path": "/w/a.py"},
                **extra,
            }
        ).encode()

    def fresh(event: str) -> Callable[[object], bytes]:
        return lambda _: payload(event, session=str(uuid.uuid4()))

    with psycopg.ClientCursor(psycopg.connect(dsn)) as cur:
        statement = cur.mogrify(
            sql.query("hook_touch"),
            {
                "id": task.id,
                "token": task.token,
                "runner": "bench-session",
                "renew": False,
                "files": ["/w/a.py"],
                "max_files": 200,
                "lease_seconds": 3600,
            },
        )
    psql = shutil.which("psql") or str(Path(sys.executable).parent / "psql")
    from watchdog.embedded import bin_dir

    if not Path(psql).exists():
        psql = str(bin_dir() / "psql")
    results = {
        "python -c pass": timed([sys.executable, "-c", "pass"], runs),
        "psql -c (the hook's statement)": timed([psql, dsn, "-qAtc", statement], runs),
        "afk hook PreToolUse, verdict cached (< 2 s old)": timed(
            [AFK, "hook"], runs, payload("PreToolUse"), env
        ),
        "afk hook PreToolUse, asking the database": timed(
            [AFK, "hook"], runs, fresh("PreToolUse"), env
        ),
        "afk hook PostToolUse (Write: files_touched)": timed(
            [AFK, "hook"], runs, payload("PostToolUse"), env
        ),
    }
    base = statistics.median(results["psql -c (the hook's statement)"])
    lines = ["| process start to exit | p50 ms | p95 ms | p50 / psql -c |", "|---|---|---|---|"]
    lines += [row(name, ms, base) for name, ms in results.items()]
    q.close()
    return "\n".join(lines) + f"\n\n{runs} runs each, one after another, on one machine.\n"


if __name__ == "__main__":
    main()
