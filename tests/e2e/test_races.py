"""Concurrency claims, proven by racing real processes."""

from __future__ import annotations

import multiprocessing as mp

from watchdog import NewTask, Queue

CTX = mp.get_context("spawn")


def _drain(dsn: str, runner: str, start: mp.synchronize.Event, out: mp.Queue) -> None:
    q = Queue.connect(dsn, pool_size=None)
    start.wait()
    got = []
    while (task := q.claim("agent", runner=runner, lease_seconds=300)) is not None:
        got.append((str(task.id), task.token))
        q.done(task)
    q.close()
    out.put(got)


def test_eight_processes_claim_500_tasks_each_exactly_once(queue, dsn, sql):
    queue.enqueue("agent", [NewTask(f"t{i}", key=f"k{i}") for i in range(500)])
    start, out = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_drain, args=(dsn, f"r{i}", start, out)) for i in range(8)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    claimed = [task_id for got in results for task_id, _ in got]
    assert len(claimed) == 500 and len(set(claimed)) == 500
    assert sum(1 for got in results if got) >= 2, "the race had only one participant"
    assert queue.status("agent")["done"] == 500
    assert sql.one("SELECT count(*) FROM afk_task_event WHERE reason = 'claimed'") == 500


def _enqueue(dsn: str, offset: int, start: mp.synchronize.Event, out: mp.Queue) -> None:
    q = Queue.connect(dsn, pool_size=None)
    start.wait()
    new = 0
    # overlapping windows of keys, in small batches, so the batches interleave
    for lo in range(offset, offset + 200, 10):
        new += len(
            q.enqueue("agent", [NewTask(f"t{k}", key=f"k{k}") for k in range(lo, lo + 10)]).enqueued
        )
    q.close()
    out.put(new)


def test_four_processes_enqueue_overlapping_keys(queue, dsn, sql):
    start, out = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_enqueue, args=(dsn, i * 50, start, out)) for i in range(4)]
    for p in procs:
        p.start()
    start.set()
    inserted = sum(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    # keys k0..k349, each exactly once, with unique ordinals
    assert inserted == 350
    assert sql.one("SELECT count(*) FROM afk_task") == 350
    assert sql.one("SELECT count(DISTINCT idem_key) FROM afk_task") == 350
    assert sql.one("SELECT count(DISTINCT ordinal) FROM afk_task") == 350
