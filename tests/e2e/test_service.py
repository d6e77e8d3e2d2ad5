"""The watchdog service as a real process: metrics against SQL, reclaim on
schedule, leader failover between two replicas, database faults, signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from helpers import poll, require_tool
from helpers.service import Service, free_port, run
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from watchdog import NewTask, embedded


@pytest.fixture
def services():
    started: list[Service] = []

    def start(dsn: str, **env: str) -> Service:
        service = Service(dsn, **env)
        started.append(service)
        return service

    yield start
    for service in started:
        service.cleanup()


def test_metrics_match_sql_and_expired_leases_are_reclaimed(queue, sql, dsn, services):
    queue.enqueue("a", [NewTask(f"t{i}") for i in range(5)])
    queue.enqueue("b", [NewTask("u", max_attempts=1)])
    queue.done(queue.claim("a", runner="r1"))
    stalled = queue.claim("a", runner="r2", lease_seconds=3600)
    queue.claim("a", runner="r3", lease_seconds=3600)
    service = services(dsn)
    assert poll(lambda: service.health() == 200)

    def matches() -> bool:
        for state in ("todo", "running", "paused", "done", "failed", "blocked"):
            n = sql.one("SELECT count(*) FROM afk_task WHERE state = %s", state)
            if service.value("afk_tasks", state=state) != n:
                return False
        return service.value("afk_up") == 1 and service.value("afk_watchdog_leader") == 1

    assert poll(matches)
    assert service.value("afk_agent_tasks", agent_id="a", state="todo") == 2
    assert service.value("afk_expired_leases") == 0
    assert service.value("afk_tasks_retrying", agent="a") is None  # none has spent an attempt

    sql.expire(stalled.id)  # a worker stalls past its lease
    assert poll(lambda: service.value("afk_reclaimed_total", outcome="paused") == 1)
    assert sql.one("SELECT state::text FROM afk_task WHERE id = %s", stalled.id) == "paused"
    assert poll(lambda: service.value("afk_tasks", state="paused") == 1)
    # its attempt spent, it waits to retry: the gauge and `afk status` say so
    assert poll(lambda: service.value("afk_tasks_retrying", agent="a") == 1)
    assert queue.overview("a")["retrying"] == 1
    for job in ("reclaim", "gauges", "leader", "poison", "prune"):
        assert service.value("afk_job_runs_total", job=job) >= 1, job
        assert service.value("afk_job_failures_total", job=job) == 0, job
    assert service.stop() == 0
    lines = [json.loads(line) for line in service.log().splitlines()]
    assert any(line.get("action") == "reclaim" for line in lines)


def test_sigterm_exits_0_within_a_few_seconds(dsn, services):
    service = services(dsn)
    assert poll(lambda: service.health() == 200)
    started = time.monotonic()
    service.signal(signal.SIGTERM)
    assert service.proc.wait(timeout=15) == 0
    assert time.monotonic() - started < 10


def test_a_database_gone_silent_does_not_hold_the_stop(dsn, services):
    """A partition (the database's host stops answering, its connections stay
    open) between two runs of the jobs: SIGTERM finds no job running, and
    the release of the leader lease waits on a reply that never comes. The
    service still exits 0 within its shutdown timeout and a margin, and its
    log names where it was stuck (every thread's stack)."""
    socat = require_tool("socat")
    params = conninfo_to_dict(dsn)
    host, port = str(params.get("host") or "localhost"), str(params.get("port") or 5432)
    target = (
        f"UNIX-CONNECT:{host}/.s.PGSQL.{port}" if host.startswith("/") else f"TCP:{host}:{port}"
    )
    listen = free_port()
    proxy = subprocess.Popen(
        [socat, f"TCP-LISTEN:{listen},bind=127.0.0.1,reuseaddr,fork", target],
        start_new_session=True,
    )
    try:
        assert poll(lambda: _listening(listen))
        through = make_conninfo(dsn, host="127.0.0.1", port=str(listen))
        slow = {
            f"AFK_{name}_INTERVAL": "600"
            for name in ("RECLAIM", "GAUGES", "LEADER", "PRUNE", "POISON")
        }
        service = services(through, AFK_SHUTDOWN_TIMEOUT="3", AFK_LEASE_SECONDS="600", **slow)
        jobs = ("leader", "reclaim", "approvals", "gauges", "poison", "prune")
        assert poll(
            lambda: all(
                service.value("afk_job_last_success_timestamp_seconds", job=job) for job in jobs
            )
        )  # each job ran once and is done: nothing runs until the next, in 10 minutes
        os.killpg(proxy.pid, signal.SIGSTOP)  # the host goes silent
        service.signal(signal.SIGTERM)
        assert service.proc.wait(timeout=25) == 0
        log = service.log()
        assert "did not stop within" in log
        assert "release" in log  # the stack it was stuck in
    finally:
        os.killpg(proxy.pid, signal.SIGKILL)
        proxy.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_two_replicas_one_leader_and_failover(dsn, services, queue, sql):
    first = services(dsn)
    assert poll(lambda: first.value("afk_watchdog_leader") == 1)
    second = services(dsn)
    assert poll(lambda: (second.value("afk_job_runs_total", job="leader") or 0) >= 2)
    assert second.value("afk_watchdog_leader") == 0
    # the once-only jobs run on the leader alone
    assert poll(lambda: (first.value("afk_job_runs_total", job="prune") or 0) >= 2)
    assert "holds the leader lease" in run("watchdog", "tick", "prune", AFK_DSN=dsn).stdout
    pruned_by_second = second.value("afk_job_last_success_timestamp_seconds", job="prune")
    assert pruned_by_second is None

    # an old done task: whoever leads prunes it, exactly once
    queue.enqueue("a", [NewTask("old")])
    queue.done(queue.claim("a", runner="r"))
    first.proc.kill()  # SIGKILL: no clean release of anything
    first.proc.wait(timeout=10)
    assert poll(lambda: second.value("afk_watchdog_leader") == 1, timeout=20)
    sql("UPDATE afk_task SET updated_at = now() - interval '60 days'")
    assert poll(lambda: second.value("afk_pruned_tasks_total") == 1)
    assert sql.one("SELECT count(*) FROM afk_task") == 0


def test_tick_runs_one_job_and_exits(dsn, queue, sql):
    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="r")
    sql.expire(task.id)
    out = run("watchdog", "tick", "reclaim", AFK_DSN=dsn)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"] == {"paused": 1, "failed": 0}
    gauges = json.loads(run("watchdog", "tick", "gauges", AFK_DSN=dsn).stdout)
    assert gauges["result"]["states"]["paused"] == 1
    down = run(
        "watchdog",
        "tick",
        "reclaim",
        AFK_DSN="postgresql://afk:hunter2-secret@127.0.0.1:1/afk?connect_timeout=1",
    )
    assert down.returncode == 1
    assert "hunter2-secret" not in down.stdout + down.stderr
    refused = run("watchdog", "tick", "reclaim", AFK_DSN=dsn, AFK_RECLAIM_INTERVAL="2h")
    assert refused.returncode == 2 and "longer than the default lease" in refused.stderr


def test_systemd_notifications(dsn, services):
    folder = Path(tempfile.mkdtemp(prefix="afk-notify-"))
    path = folder / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(20)
        service = services(dsn, NOTIFY_SOCKET=str(path), WATCHDOG_USEC="400000")
        got = [sock.recv(256).decode() for _ in range(3)]
        assert "READY=1" in got and "WATCHDOG=1" in got
        service.signal(signal.SIGTERM)
        while (message := sock.recv(256).decode()) == "WATCHDOG=1":
            pass
        assert message == "STOPPING=1"
        assert service.proc.wait(timeout=15) == 0
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def private_server():
    """A PostgreSQL server of this test's own, to stop and start."""
    home = Path(tempfile.mkdtemp(prefix="afk-private-"))
    info = embedded.ensure_running(home)
    yield home, info.dsn()
    embedded.stop(home)
    shutil.rmtree(home, ignore_errors=True)


def test_database_down_at_start_then_up(private_server, services):
    home, dsn = private_server
    embedded.stop(home)
    service = services(dsn)
    assert poll(
        lambda: (service.value("afk_job_failures_total", job="reclaim") or 0) >= 1, timeout=60
    )
    assert service.health() == 503 and service.value("afk_up") == 0
    embedded.ensure_running(home)  # the server comes up (the schema is created on start)
    assert poll(lambda: service.health() == 200, timeout=60)
    assert service.proc.poll() is None


def failures(service: Service) -> float:
    return sum(
        service.value("afk_job_failures_total", job=job) or 0
        for job in ("reclaim", "gauges", "leader", "poison", "prune")
    )


def test_database_restart_while_running(private_server, services):
    home, dsn = private_server
    service = services(dsn)
    assert poll(lambda: service.health() == 200)
    assert failures(service) == 0
    embedded.stop(home)
    assert poll(lambda: service.health() == 503, timeout=60)
    assert failures(service) >= 1  # the jobs fail, and are counted
    assert service.proc.poll() is None  # the process does not exit
    embedded.ensure_running(home)
    assert poll(lambda: service.health() == 200, timeout=60)
    after = failures(service)
    runs = service.value("afk_job_runs_total", job="gauges") or 0
    assert poll(lambda: (service.value("afk_job_runs_total", job="gauges") or 0) >= runs + 3)
    assert failures(service) == after  # and succeed again after reconnecting
    assert service.stop() == 0


def test_logs_never_show_the_dsn_password(services):
    service = services("postgresql://afk:hunter2-secret@127.0.0.1:1/afk?connect_timeout=1")
    assert poll(
        lambda: (service.value("afk_job_failures_total", job="reclaim") or 0) >= 1, timeout=60
    )
    assert service.stop() == 0
    log = service.log()
    assert "unreachable" in log or "failed" in log
    assert "hunter2-secret" not in log


def test_metrics_pass_promtool(dsn, services, queue):
    promtool = require_tool("promtool")
    import subprocess

    queue.enqueue("a", [NewTask("t")])
    service = services(dsn)
    assert poll(lambda: service.value("afk_tasks", state="todo") == 1)
    text = service.get("/metrics").text
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, text=True, capture_output=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # no *_created series beside each counter and histogram (A33: 43 of them)
    assert "_created" not in text


def test_parked_accounts_and_agent_runs_are_exported(queue, dsn, services):
    from watchdog.agents.accounts import Accounts

    accounts = Accounts(queue.db)
    queue.enqueue("a", [NewTask(f"t{i}") for i in range(3)])
    service = services(dsn)
    # the counter counts the runs that end while the service runs: from its first look on
    assert poll(lambda: service.value("afk_job_runs_total", job="gauges"))
    assert service.value("afk_accounts_parked") == 0
    assert service.value("afk_agent_runs_total", outcome="usage_limit") == 0
    first = queue.claim("a", runner="loop-1", account="max-1")
    until = accounts.clock() + timedelta(hours=2)
    accounts.park("max-1", "usage_limit", "You've hit your session limit", until)
    queue.release(first, "usage limit", outcome="usage_limit")
    accounts.park("laptop", "needs_human", "Not logged in", None)
    second = queue.claim("a", runner="loop-2", account="team")
    queue.done(second)
    assert poll(lambda: service.value("afk_accounts_parked") == 2)
    parked = service.value(
        "afk_account_parked_until_timestamp_seconds", account="max-1", kind="usage_limit"
    )
    assert parked == pytest.approx(until.timestamp())
    assert service.value(
        "afk_account_parked_until_timestamp_seconds", account="laptop", kind="needs_human"
    ) == float("inf")
    assert poll(lambda: service.value("afk_agent_runs_total", outcome="usage_limit") == 1)
    assert poll(lambda: service.value("afk_agent_runs_total", outcome="done") == 1)
    accounts.clear("laptop")
    assert poll(lambda: service.value("afk_accounts_parked") == 1)
    # each run is counted once, however many ticks go by
    ticks = service.value("afk_job_runs_total", job="gauges") or 0
    assert poll(lambda: (service.value("afk_job_runs_total", job="gauges") or 0) >= ticks + 3)
    assert service.value("afk_agent_runs_total", outcome="done") == 1


def test_an_ipv6_address_is_logged_as_a_url_writes_it(dsn, services):
    """The log said http://::1:PORT/, which no browser opens."""
    from helpers.service import free_port

    port = free_port()
    service = services(dsn, AFK_METRICS_ADDR=f"[::1]:{port}")
    poll(lambda: "status pages on" in service.log(), timeout=60)
    assert f"http://[::1]:{port}/" in service.log(), service.log()
    response = httpx.get(f"http://[::1]:{port}/healthz", timeout=5)
    assert response.status_code in (200, 503)
