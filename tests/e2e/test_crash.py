"""Crash and stop, with real processes: a SIGKILLed worker's task comes back
with its checkpoint; the demo runs end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from watchdog import NewTask

WORKER = textwrap.dedent("""
    import sys, time
    from watchdog import Queue
    q = Queue.connect(sys.argv[1], pool_size=None)
    task = q.claim("agent", runner="doomed", lease_seconds=3600)
    q.checkpoint(task, {"files": ["a.py"], "step": 1})
    q.checkpoint(task, {"step": 2})
    print(task.id, task.token, flush=True)
    time.sleep(600)  # working, until killed
""")


def test_sigkilled_worker_task_is_reclaimed_and_resumed_from_its_checkpoint(queue, dsn, sql):
    queue.enqueue("agent", [NewTask("one"), NewTask("two")])
    with subprocess.Popen(
        [sys.executable, "-c", WORKER, dsn], stdout=subprocess.PIPE, text=True
    ) as proc:
        task_id, token = proc.stdout.readline().split()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    # the lease is long: nothing is reclaimed until it runs out
    assert queue.reclaim().total == 0
    assert sql.one("SELECT state::text FROM afk_task WHERE id = %s", task_id) == "running"
    sql.expire(task_id)
    assert queue.reclaim().paused == 1
    resumed = queue.claim("agent", runner="fresh")
    assert str(resumed.id) == task_id
    assert resumed.checkpoint == {"files": ["a.py"], "step": 2}
    assert resumed.token > int(token)
    reasons = [e["reason"] for e in queue.show(resumed.id)[1]]
    assert reasons == ["claimed", "lease expired", "claimed"]


def test_a_restarted_runner_resumes_without_waiting_for_the_lease(queue, dsn):
    queue.enqueue("agent", [NewTask("one"), NewTask("two")])
    with subprocess.Popen(
        [sys.executable, "-c", WORKER, dsn], stdout=subprocess.PIPE, text=True
    ) as proc:
        task_id, _ = proc.stdout.readline().split()
        proc.kill()
        proc.wait(timeout=30)
    again = queue.claim("agent", runner="doomed")  # same runner id, lease still valid
    assert str(again.id) == task_id and again.checkpoint["step"] == 2


def test_the_demo_runs_end_to_end(afk, sql):
    proc = afk("demo", env={"PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'skipping ["read the issue", "write the test"]' in proc.stdout
    assert "lease expired" in proc.stdout and '"done": 5' in proc.stdout
    assert sql.one("SELECT count(*) FROM afk_task") == 0  # the demo cleaned up after itself
