"""The crash torture test: workers drain 300 tasks while a chaos loop SIGKILLs
them at random moments; the watchdog service reclaims every second."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import datetime

from helpers import HELPERS
from helpers.service import Service

from watchdog import NewTask

TASKS, WORKERS = 300, 4
WORKER = str(HELPERS / "torture_worker.py")


def test_crash_torture(queue, sql, dsn, tmp_path):
    sql("CREATE TABLE torture_effect (task_id uuid NOT NULL, pid int NOT NULL)")
    queue.enqueue("torture", [NewTask(f"t{i}", key=f"torture-{i}") for i in range(TASKS)])
    service = Service(dsn, AFK_RECLAIM_INTERVAL="1", AFK_LEASE_SECONDS="2")
    rng = random.Random(20261130)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers: dict[int, tuple[subprocess.Popen[bytes], str]] = {}
    killed: set[int] = set()

    def start(runner: str) -> None:
        proc = subprocess.Popen(
            [sys.executable, WORKER, dsn, "torture", runner, str(tmp_path)], env=env
        )
        workers[proc.pid] = (proc, runner)

    try:
        for i in range(WORKERS):
            start(f"runner-{i}")
        chaos_until = time.monotonic() + 25
        deadline = time.monotonic() + 90
        while sql.one("SELECT count(*) FROM afk_task WHERE state = 'done'") < TASKS:
            assert time.monotonic() < deadline, "the workers did not finish in time"
            for pid, (proc, _) in list(workers.items()):
                if proc.poll() is not None:
                    del workers[pid]
            if time.monotonic() < chaos_until and workers:
                time.sleep(rng.uniform(0.1, 0.5))
                pid = rng.choice(list(workers))
                proc, runner = workers.pop(pid)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed.add(pid)
                # half the time the replacement restarts under the same runner id
                start(runner if rng.random() < 0.5 else f"runner-{pid}")
            else:
                time.sleep(0.1)
                if not workers:
                    start("runner-final")
        for proc, _ in workers.values():
            proc.wait(timeout=30)
    finally:
        for proc, _ in workers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        service.cleanup()

    # every task is done
    assert queue.status("torture") == {
        "todo": 0,
        "running": 0,
        "paused": 0,
        "done": TASKS,
        "failed": 0,
        "blocked": 0,
    }
    # the same-database effect: exactly once per task
    per_task = {
        r["t"]: r["n"]
        for r in sql(
            "SELECT task_id::text AS t, count(*) AS n FROM torture_effect GROUP BY task_id"
        )
    }
    assert len(per_task) == TASKS and set(per_task.values()) == {1}

    # the external effect: at least once; a duplicate only where a killed
    # worker made the call and died before its record
    lines = [line.split() for line in (tmp_path / "external-effects").read_text().splitlines()]
    calls = collections.defaultdict(list)
    for task_id, pid in lines:
        calls[task_id].append(int(pid))
    assert len(calls) == TASKS
    recorded = {
        r["t"]: int(r["pid"])
        for r in sql(
            "SELECT task_id::text AS t, result->>'pid' AS pid FROM afk_task_effect "
            "WHERE name = 'comment' AND done"
        )
    }
    assert len(recorded) == TASKS
    duplicates = 0
    for task_id, pids in calls.items():
        assert recorded[task_id] in pids
        extra = list(pids)
        extra.remove(recorded[task_id])
        duplicates += len(extra)
        assert set(extra) <= killed, (task_id, pids)

    # no two live workers ever held one task at once: every logged write of a
    # token falls inside that token's tenure, from its claim to the next event
    tenure = {}
    for task_id, events in group_events(sql).items():
        for i, event in enumerate(events):
            if event["reason"] in ("claimed", "resumed"):
                end = events[i + 1]["at"] if i + 1 < len(events) else datetime.max
                tenure[(task_id, event["token"])] = (event["at"], end)
    writes = [
        json.loads(line)
        for log in tmp_path.glob("writes-*.jsonl")
        for line in log.read_text().splitlines()
    ]
    assert len(writes) >= TASKS * 4 - len(killed)  # a kill loses at most one log line
    for w in writes:
        start_at, end_at = tenure[(w["task"], w["token"])]
        at = datetime.fromisoformat(w["at"])
        assert start_at <= at <= end_at, w
    assert (
        sql.one(
            "SELECT count(*) FROM afk_task_event "
            "WHERE reason = 'claimed' AND from_state = 'running'"
        )
        == 0
    )

    # checkpoints never went backwards
    by_task = collections.defaultdict(list)
    for w in writes:
        by_task[w["task"]].append((datetime.fromisoformat(w["at"]), w["step"]))
    for steps in by_task.values():
        ordered = [step for _, step in sorted(steps)]
        assert ordered == sorted(ordered)

    reclaims = sql.one("SELECT count(*) FROM afk_task_event WHERE reason = 'lease expired'")
    resumes = sql.one("SELECT count(*) FROM afk_task_event WHERE reason = 'resumed'")
    reruns = sql.one(
        "SELECT count(*) FROM (SELECT task_id FROM afk_task_event "
        "WHERE reason IN ('claimed', 'resumed') GROUP BY task_id "
        "HAVING count(*) > 1) r"
    )
    print(
        f"\ntorture: {TASKS} tasks, {len(killed)} kills, {reclaims} reclaims, "
        f"{resumes} resumes by a restarted runner, {reruns} tasks re-run, "
        f"{duplicates} duplicate external effects, 0 duplicate same-database effects"
    )
    assert killed and reclaims > 0 and reruns > 0


def group_events(sql) -> dict[str, list[dict]]:
    out = collections.defaultdict(list)
    for row in sql(
        "SELECT task_id::text AS task, reason, token, at FROM afk_task_event ORDER BY task_id, id"
    ):
        out[row["task"]].append(row)
    return out
