"""Connections that die under the API: what is retried, what surfaces, and
that work keeps flowing whenever a connection can be had."""

from __future__ import annotations

import threading
import time

import psycopg
import psycopg.conninfo
import pytest
from helpers import poll

from watchdog import NewTask, Queue
from watchdog.db import Database
from watchdog.errors import DatabaseError


def kill_others(dsn: str) -> int:
    """Terminate the queue's backends, and wait until each has exited (a
    bare pg_terminate_backend returns before the server closes the socket)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'afk'"
        ).fetchone()
        return int(row[0]) if row else 0


def test_work_keeps_flowing_after_every_kill_of_every_backend(dsn, sql):
    q = Queue.connect(dsn, pool_size=4)
    q.enqueue("a", [NewTask(f"t{i}") for i in range(20_000)])
    finished: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def work(n: int) -> None:
        try:
            while not stop.is_set():
                task = q.claim("a", runner=f"w{n}")
                assert task is not None
                q.checkpoint(task, {"step": 1})
                q.done(task)
                finished.append(time.monotonic())
                # paced: flowing work is the claim, not a throughput that
                # would take both cores from the rest of the suite
                stop.wait(0.02)
        except BaseException as exc:  # every one is a failure of the test
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for w in workers:
        w.start()
    killed, rounds = 0, 0
    try:
        # kill every backend, then wait for work to finish again; until the
        # kills have landed sixteen times (no wall-clock buckets: a loaded
        # machine may take longer, never fail it)
        while killed < 16:
            rounds += 1
            assert rounds <= 200, f"the kills landed {killed} times in {rounds} rounds"
            killed += kill_others(dsn)
            before = len(finished)
            poll(lambda before=before: len(finished) > before or errors, timeout=60)
            assert not errors, errors
    finally:
        stop.set()
        for w in workers:
            w.join(30)
        q.close()
    assert not errors, errors
    # nothing is left half-claimed, and each finish is a done row
    assert sql.one("SELECT count(*) FROM afk_task WHERE state = 'running'") == 0
    assert sql.one("SELECT count(*) FROM afk_task WHERE state = 'done'") == len(finished)


def kill_when_blocked(dsn: str) -> threading.Thread:
    """Kill our statement once it waits on a lock the test holds: it was
    sent and is running."""

    def kill() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    " AND application_name = 'afk'"
                ).fetchone()
                if row and row[0]:
                    return
                time.sleep(0.02)

    t = threading.Thread(target=kill)
    t.start()
    return t


def test_an_idle_connection_the_server_closed_is_never_used(dsn):
    q = Queue(Database(dsn, pool_size=1))
    q.enqueue("a", [NewTask("warm")])  # the pool now holds an idle connection
    kill_others(dsn)  # ...which the server has closed under it
    q.enqueue("a", [NewTask("not safe to repeat, and not sent to a dead connection")])
    assert q.status("a")["todo"] == 2
    q.close()


def test_a_write_not_safe_to_repeat_surfaces_a_lost_connection_a_safe_one_is_retried(dsn, sql):
    q = Queue(Database(dsn, pool_size=1))
    q.enqueue("a", [NewTask("first")])
    task = q.claim("a", runner="r")
    assert task is not None
    with psycopg.connect(dsn) as holder:  # a transaction holding the agent's row
        holder.execute("SELECT 1 FROM afk_agent WHERE agent_id = 'a' FOR UPDATE")
        killer = kill_when_blocked(dsn)
        with pytest.raises(DatabaseError):
            q.enqueue("a", [NewTask("an enqueue may have run: not repeated")])
        killer.join()
        holder.rollback()
    assert sql.one("SELECT count(*) FROM afk_task") == 1
    with psycopg.connect(dsn) as holder:  # now hold the task's row
        holder.execute("SELECT 1 FROM afk_task WHERE id = %s FOR UPDATE", (task.id,))
        killer = kill_when_blocked(dsn)
        releaser = threading.Timer(1.0, holder.rollback)
        result: list[object] = []
        worker = threading.Thread(target=lambda: result.append(q.checkpoint(task, {"step": 2})))
        worker.start()
        killer.join()
        releaser.start()
        worker.join(30)
        releaser.join()
    assert result and sql.one("SELECT checkpoint FROM afk_task WHERE id = %s", task.id) == {
        "step": 2
    }
    q.close()


def test_a_safe_statement_waits_out_an_outage_up_to_retry_for(dsn, server_dsn):
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]

    def allow(yes: bool) -> None:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(yes).lower()}')
            if not yes:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = %s AND application_name = 'afk'",
                    (name,),
                )

    q = Queue(Database(dsn, pool_size=2, retry_for=10))
    q.status("a")
    allow(False)
    back = threading.Timer(1.0, allow, args=(True,))
    back.start()
    started = time.monotonic()
    assert q.status("a") == q.status("a")  # waited for the database, then answered
    assert time.monotonic() - started >= 0.9
    back.join()

    short = Queue(Database(dsn, pool_size=2, retry_for=1.5))
    short.status("a")
    allow(False)
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseError, match="not currently accepting connections"):
            short.status("a")
        assert 1.4 <= time.monotonic() - started < 6
    finally:
        allow(True)
    q.close()
    short.close()


def test_a_database_never_reached_fails_at_once():
    db = Database(
        "postgresql://postgres@127.0.0.1:1/none", pool_size=1, retry_for=30, connect_timeout=1
    )
    started = time.monotonic()
    with pytest.raises(DatabaseError, match="unreachable"):
        Queue(db).status("a")
    assert time.monotonic() - started < 5


def test_a_connection_that_fails_while_being_set_up_is_closed(dsn):
    """The server can go away between the connect and the first question the
    pool asks it (seen during a restart under load): that connection must be
    closed, not dropped open for the garbage collector to find."""
    import gc
    import warnings

    opened: list[psycopg.Connection] = []

    class Flaky(Database):
        def _configure(self, conn):
            opened.append(conn)
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    db = Flaky(dsn, pool_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with pytest.raises(DatabaseError, match="server closed the connection"):
            db.row("now")
        gc.collect()
    assert opened and all(c.closed for c in opened)
    db.close()
