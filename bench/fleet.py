"""A fleet's load on one PostgreSQL (issue 44 item 6).

    python -m bench.fleet [--sizes 10,25,50,100] [--seconds 60] [--out DIR]
    python -m bench.fleet --quick        # a few seconds a step

Many `afk loop`s, each a thread with its own connection as a loop has, do
what a fleet does through the queue's own API: claim a task under their
account (``Queue.take``, the statement `afk loop` runs), work on it for a
while, heart-beating every third of the lease (``Queue.heartbeat``), their
agent's hooks writing once per tool call (``Queue.touch_session``, the
`hook_touch` statement the watchdog service runs for each hook; one agent
makes a tool call every 3 s), then finish it (``Queue.done``) and claim the
next. Each step of the fleet's size runs for ``--seconds``, twice: as it is,
and with a transaction held open from start to end in another session (a
reporting query, a forgotten `BEGIN` in a `psql`), which keeps every dead
row version the fleet makes. Each step is also run with its loops split
over two client processes (a second machine's worth of loops).

It reports p50 and p99 of a claim, a hook and a heartbeat at each step, the
table's and its indexes' size at the start and the end, and the largest
fleet that holds a hook's p99 at 20 ms or less and a claim's at 50 ms or
less, with and without the open transaction.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.common import CTX
from watchdog import NewTask, Queue, embedded
from watchdog.db import Database

#: what one agent does: a tool call every this many seconds
TOOL_CALL_EVERY = 3.0
#: how long one task keeps its loop busy (a third to five thirds of it)
WORK_SECONDS = 12.0
#: the lease of a claim (a heartbeat every third of it: 5 s, to make many)
LEASE = 15.0
#: the targets: a hook's p99 and a claim's, milliseconds
HOOK_P99, CLAIM_P99 = 20.0, 50.0


def ms(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000, 2)


def one_loop(
    dsn: str, n: int, until: float, out: dict[str, list[float]], work: float = WORK_SECONDS
) -> None:
    """One loop: claim, work (hooks, heartbeats), finish, again, until
    ``until``; a loop the server refuses (out of connections) is counted."""
    try:
        _loop(dsn, n, until, out, work)
    except Exception:  # (the server's max_connections, say: it never ran)
        out["refused"].append(1.0)


def _loop(dsn: str, n: int, until: float, out: dict[str, list[float]], work: float) -> None:
    db = Database(dsn, pool_size=1, application_name=f"bench-fleet-{n}")
    q = Queue(db)
    rng = random.Random(n)
    agent, runner, account = f"fleet-{n % 8}", f"loop-{n}-{time.monotonic_ns()}", f"acct-{n % 4}"

    warm = False  # (a loop's first claim opens its connection: not counted)

    def timed(kind: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        result = call(*args, **kwargs)
        if warm:
            out[kind].append(time.perf_counter() - began)
        return result

    try:
        while time.monotonic() < until:
            claimed = timed(
                "claim", q.take, agent, runner=runner, lease_seconds=LEASE, account=account
            )
            warm = True
            task = claimed.task
            if task is None:
                time.sleep(0.5)
                continue
            ends = min(time.monotonic() + work * rng.uniform(1 / 3, 5 / 3), until)
            next_beat = time.monotonic() + LEASE / 3
            next_tool = time.monotonic() + rng.uniform(0, TOOL_CALL_EVERY)
            while time.monotonic() < ends:
                now = time.monotonic()
                if now >= next_tool:
                    timed("hook", q.touch_session, task.id, task.token, runner, renew=False,
                          files=["/w/a.py"], max_files=200)  # fmt: skip
                    next_tool = now + TOOL_CALL_EVERY
                if now >= next_beat:
                    timed("heartbeat", q.heartbeat, task)
                    next_beat = now + LEASE / 3
                time.sleep(max(0.0, min(next_tool, next_beat, ends) - time.monotonic()))
            timed("done", q.done, task)
    finally:
        db.close()


def drive(
    dsn: str, loops: list[int], seconds: float, work: float = WORK_SECONDS
) -> dict[str, list[float]]:
    """Run ``loops`` (their numbers) as threads for ``seconds``; their samples."""
    out: dict[str, list[float]] = {
        "claim": [],
        "hook": [],
        "heartbeat": [],
        "done": [],
        "refused": [],
    }
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=one_loop, args=(dsn, n, until, out, work)) for n in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _drive_child(dsn: str, loops: list[int], seconds: float, work: float, results: Any) -> None:
    results.put(drive(dsn, loops, seconds, work))


def step(
    dsn: str, size: int, seconds: float, processes: int, work: float
) -> dict[str, list[float]]:
    """One step: ``size`` loops over ``processes`` client processes."""
    if processes == 1:
        return drive(dsn, list(range(size)), seconds, work)
    results = CTX.Queue()
    parts = [list(range(size))[i::processes] for i in range(processes)]
    procs = [CTX.Process(target=_drive_child, args=(dsn, p, seconds, work, results)) for p in parts]
    for p in procs:
        p.start()
    merged: dict[str, list[float]] = {
        "claim": [],
        "hook": [],
        "heartbeat": [],
        "done": [],
        "refused": [],
    }
    for _ in procs:
        for kind, samples in results.get().items():
            merged[kind] += samples
    for p in procs:
        p.join()
    return merged


def sizes(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_table_size('afk_task'), pg_indexes_size('afk_task'), "
            "(SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'afk_task')"
        ).fetchone()
    assert row is not None
    return {"table_bytes": row[0], "index_bytes": row[1], "dead_rows": row[2] or 0}


def run(sizes_: list[int], seconds: float, tasks: int, work: float) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="afk-bench-fleet-"))
    try:
        dsn = embedded.ensure_running(home).dsn()
        db = Database(dsn)
        db.migrate()
        q = Queue(db)
        for agent in range(8):
            q.enqueue(f"fleet-{agent}", [NewTask(f"t{i}") for i in range(tasks // 8)])
        db.close()
        report: dict[str, Any] = {"steps": [], "start": sizes(dsn)}
        with psycopg.connect(dsn, autocommit=True) as conn:
            shown = conn.execute("SHOW max_connections").fetchone()
        report["max_connections"] = int(shown[0]) if shown else None
        for held in (False, True):
            holder = None
            if held:  # a transaction open from start to end: no row version is freed
                holder = psycopg.connect(dsn)
                holder.execute("SELECT txid_current()")
            try:
                for size in sizes_:
                    for processes in (1, 2):
                        before = sizes(dsn)
                        got = step(dsn, size, seconds, processes, work)
                        row: dict[str, Any] = {
                            "loops": size,
                            "processes": processes,
                            "open_transaction": held,
                        }
                        for kind in ("claim", "hook", "heartbeat"):
                            row[f"{kind}_p50_ms"] = ms(got[kind], 0.5)
                            row[f"{kind}_p99_ms"] = ms(got[kind], 0.99)
                            row[f"{kind}s"] = len(got[kind])
                        row["loops_refused"] = len(got["refused"])
                        row["dead_rows_added"] = sizes(dsn)["dead_rows"] - before["dead_rows"]
                        report["steps"].append(row)
                        print(json.dumps(row), flush=True)
            finally:
                if holder is not None:
                    holder.close()
        report["end"] = sizes(dsn)
        for held in (False, True):
            fit = [
                s["loops"]
                for s in report["steps"]
                if s["open_transaction"] == held
                and s["processes"] == 1
                and s["loops_refused"] == 0
                and (s["hook_p99_ms"] or 0) <= HOOK_P99
                and (s["claim_p99_ms"] or 0) <= CLAIM_P99
            ]
            key = "holds_with_open_transaction" if held else "holds"
            report[key] = max(fit) if fit else 0
        report["targets"] = {"hook_p99_ms": HOOK_P99, "claim_p99_ms": CLAIM_P99}
        return report
    finally:
        embedded.stop(home)
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,25,50,100")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--work", type=float, default=WORK_SECONDS, help="a task's mean seconds")
    parser.add_argument("--quick", action="store_true", help="two small steps of a few seconds")
    parser.add_argument("--out", help="a folder for report.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.seconds, args.tasks, args.work = "4,8", 5.0, 2_000, 1.0
    report = run([int(s) for s in args.sizes.split(",")], args.seconds, args.tasks, args.work)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
