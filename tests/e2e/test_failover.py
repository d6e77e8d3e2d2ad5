"""Across a PostgreSQL failover: a primary and an asynchronous streaming
standby (Debian PostgreSQL 15), clients on a multi-host DSN, the primary
SIGKILLed and the standby promoted with ``pg_ctl promote``."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from helpers import poll
from helpers.service import Service
from helpers.topology import Cluster

from watchdog import LeaseLost, NewTask, Queue
from watchdog.db import Database


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.close()


def test_a_token_handed_out_by_a_lost_transaction_does_not_fence_in_a_zombie(cluster):
    """Asynchronous replication loses the last commits before a crash, and
    with them the WAL record by which the token sequence reserved the values
    it then handed out: the promoted standby hands them out again. A zombie
    holding one must still be refused on the new timeline."""
    Database(cluster.dsn("a")).migrate()
    q = Queue.connect(cluster.multi_dsn(), pool_size=1)
    q.enqueue("a", [NewTask("T")])
    poll(cluster.caught_up)
    cluster.stop("b")  # from here on, nothing reaches the standby
    with psycopg.connect(cluster.dsn("a"), autocommit=True) as conn:
        # other agents' claims: past the range the standby knows was reserved
        conn.execute("SELECT nextval('afk_lease_token_seq') FROM generate_series(1, 40)")
    zombie = q.claim("a", runner="zombie")
    assert zombie is not None
    cluster.kill("a")
    cluster.start("b")
    cluster.promote("b")

    fresh = Queue.connect(cluster.dsn("b"), pool_size=1)
    # before anyone claims it again the task is todo: the zombie's token is
    # newer than any the new primary knows, and still a lost lease (exit 4),
    # not a token "never issued" (exit 2)
    with pytest.raises(LeaseLost, match="failover"):
        q.checkpoint(zombie, {"zombie": True})
    seq = zombie.token & ((1 << 40) - 1)  # the sequence's part of the token
    with psycopg.connect(cluster.dsn("b"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END"
            " FROM afk_lease_token_seq"
        ).fetchone()
        assert row is not None
        # the hole is real: the new primary will hand out the zombie's value again
        assert row[0] <= seq
        # ...once other agents' claims on it have used the values before it
        conn.execute(
            "SELECT nextval('afk_lease_token_seq') FROM generate_series(1, %s)", (seq - row[0],)
        )
    holder = fresh.claim("a", runner="new-holder")
    assert holder is not None and holder.id == zombie.id
    assert holder.token != zombie.token  # a token is never handed out twice
    with pytest.raises(LeaseLost):
        q.checkpoint(zombie, {"zombie": True})
    with pytest.raises(LeaseLost):
        q.done(zombie)
    shown = fresh.show(holder.id)[0]
    assert shown.state == "running" and shown.token == holder.token
    assert "zombie" not in shown.checkpoint
    q.close()
    fresh.close()


def test_workers_and_the_service_carry_on_across_a_failover_and_nothing_is_lost(cluster):
    Database(cluster.dsn("a")).migrate()
    multi = cluster.multi_dsn()
    total = 4000
    q = Queue.connect(multi, pool_size=1)
    q.enqueue("a", [NewTask(f"t{i}") for i in range(total)])
    poll(cluster.caught_up)
    service = Service(multi, AFK_RECLAIM_INTERVAL="1")
    finished: list[float] = []
    lease_lost: list[LeaseLost] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def work(n: int) -> None:
        w = Queue.connect(multi, pool_size=1)
        try:
            while not stop.is_set():
                task = w.claim("a", runner=f"w{n}", lease_seconds=5)
                if task is None:
                    return
                try:
                    w.checkpoint(task, {"step": 1})
                    w.done(task)
                except LeaseLost as exc:  # allowed: the fence said no
                    lease_lost.append(exc)
                    continue
                finished.append(time.monotonic())
        except BaseException as exc:
            errors.append(exc)
        finally:
            w.close()

    workers = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    try:
        for w in workers:
            w.start()
        assert poll(lambda: len(finished) >= 300)
        assert poll(lambda: service.value("afk_up") == 1)
        killed_at = time.monotonic()
        cluster.kill("a")
        cluster.promote("b")
        promoted_at = time.monotonic()
        # work resumes on the new primary, by itself
        assert poll(lambda: any(t > promoted_at for t in finished), timeout=60)
        # the first finish the new primary can have made ends the window
        resumed_at = min(t for t in finished if t > promoted_at)
        for w in workers:
            w.join(180)
        assert not errors, errors
        # the service reconnected too: its gauges see the new primary's counts
        with psycopg.connect(cluster.dsn("b")) as conn:
            done = conn.execute("SELECT count(*) FROM afk_task WHERE state = 'done'").fetchone()
            assert done is not None
        assert poll(lambda: service.value("afk_tasks", state="done") == done[0], timeout=30)
        assert service.value("afk_up") == 1
    finally:
        stop.set()
        for w in workers:
            w.join(30)
        service.cleanup()
    # nothing is lost: every task is done on the new primary (work finished on
    # the old one in its last moments may have been done again: at least once)
    with psycopg.connect(cluster.dsn("b")) as conn:
        states = dict(
            conn.execute("SELECT state::text, count(*) FROM afk_task GROUP BY 1").fetchall()
        )
    assert states == {"done": total}, states
    window = resumed_at - killed_at
    print(
        f"\nfailover: unavailable for {window:.2f}s (kill to first finish on the new "
        f"primary; promote took {promoted_at - killed_at:.2f}s), "
        f"{len(lease_lost)} LeaseLost, {len(finished)} finishes for {total} tasks"
    )
    assert window < 30
    q.close()
