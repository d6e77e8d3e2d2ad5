"""A leased task's heartbeat (Queue.leased, keepalive.py) in-process: it
keeps a short lease alive while the work runs, reports a lost lease, and
each thread gets its own runner id."""

from __future__ import annotations

import os
import time

from helpers import poll

from watchdog import NewTask


def test_default_runner_ids_differ_per_thread(queue):
    import threading

    queue.enqueue("A", [NewTask("a"), NewTask("b")])
    owners: list[str | None] = []

    def claim() -> None:
        task = queue.claim("A")
        owners.append(task.lease_owner if task else None)

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(owners)) == 2 and None not in owners
    assert all(o.startswith(f"{os.uname().nodename}:{os.getpid()}:") for o in owners if o)


def test_leased_keeps_a_short_lease_alive_and_lets_it_run_out_after(queue, sql):
    queue.enqueue("A", [NewTask("t")])
    task = queue.claim("A", runner="r", lease_seconds=1)
    with queue.leased(task) as lease:
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:  # three leases' worth of reclaims
            assert queue.reclaim().total == 0
            time.sleep(0.1)
        assert lease.beats >= 5 and not lease.lost.is_set()
    poll(lambda: queue.reclaim().total == 1, timeout=5)
    assert queue.show(task.id)[0].state == "paused"


def test_leased_reports_a_lost_lease(queue, sql):
    queue.enqueue("A", [NewTask("t")])
    task = queue.claim("A", runner="r", lease_seconds=30)
    with queue.leased(task, interval=0.05) as lease:
        queue.pause("A", runner="r")
        assert lease.lost.wait(5) and "lease lost" in str(lease.error)
