"""Behind a real PgBouncer 1.18 in transaction pooling: the CLI, the Python
API, the hooks, the digest and two replicas of the watchdog service, all
through the pooler, with three server connections shared by everyone."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from helpers import Afk, poll, require_tool, run_threads
from helpers.service import Service
from helpers.topology import PgBouncer

from watchdog import NewTask, Queue
from watchdog.db import Database

SESSION = "0b7c4f2e-1d3a-4e5f-8a9b-c0d1e2f3a4b5"


@pytest.fixture
def bouncer(server_dsn):
    b = PgBouncer(require_tool("pgbouncer"), server_dsn, pool_size=3)
    yield b
    b.close()


@pytest.fixture
def replicas():
    started: list[Service] = []

    def start(dsn: str, **env: str) -> Service:
        started.append(Service(dsn, **env))
        return started[-1]

    yield start
    for s in started:
        s.cleanup()


def test_the_python_api_through_transaction_pooling_many_workers(dsn, bouncer, sql):
    """Each worker runs every statement far past psycopg's prepare threshold,
    on client connections that share three server connections."""
    pooled = bouncer.for_database(dsn)
    q = Queue.connect(pooled, pool_size=4)
    q.enqueue("a", [NewTask(f"t{i}") for i in range(300)])
    errors: list[BaseException] = []

    def work(n: int) -> None:
        w = Queue.connect(pooled, pool_size=2)
        try:
            while (task := w.claim("a", runner=f"w{n}")) is not None:
                w.checkpoint(task, {"step": 1, "by": n})
                w.heartbeat(task)
                w.done(task, {"ok": True})
        except BaseException as exc:  # reported below, with the pooler's log
            errors.append(exc)
        finally:
            w.close()

    run_threads(work, 6, timeout=120)
    q.close()
    assert not errors, (errors, bouncer.log()[-2000:])
    assert sql("SELECT state, count(*) AS n FROM afk_task GROUP BY state") == [
        {"state": "done", "n": 300}
    ]
    # each task was claimed once: no lost or doubled claim through the pooler
    assert sql.one("SELECT count(*) FROM afk_task_event WHERE to_state = 'running'") == 300


def test_a_database_with_a_statement_timeout_connects_through_pgbouncer(dsn, bouncer):
    """PgBouncer 1.18 refuses the `options` startup parameter that carries
    the service's and the hooks' statement_timeout."""
    db = Database(bouncer.for_database(dsn), statement_timeout=3, pool_size=2)
    try:
        for _ in range(10):
            assert db.all("status", {"agent_id": None}) is not None
    finally:
        db.close()


def test_threads_that_connect_at_once_through_pgbouncer_all_get_a_connection(dsn, bouncer):
    """Each thread's first connect is refused for its `options`; the one
    that learns it first drops them for all. The others, refused with the
    options they sent, must retry too, not fail because the options are
    already gone (the service's reclaim job failed so, once in a while)."""
    errors: list[BaseException] = []
    for _ in range(5):
        db = Database(bouncer.for_database(dsn), statement_timeout=3, pool_size=6)
        lined_up = threading.Barrier(6)

        def connect(_: int, db: Database = db, lined_up: threading.Barrier = lined_up) -> None:
            lined_up.wait(30)
            try:
                db.row("now")
            except BaseException as exc:  # reported below
                errors.append(exc)

        try:
            run_threads(connect, 6)
        finally:
            db.close()
    assert not errors, errors


def test_cli_and_hooks_through_pgbouncer(dsn, bouncer, queue):
    afk = Afk(bouncer.for_database(dsn))
    assert afk("migrate").returncode == 0
    afk.json("enqueue", "--agent", "A", "--title", "one")
    afk.json("enqueue", "--agent", "A", "--title", "two")
    task = afk.json("claim", "--agent", "A", "--runner", SESSION)
    env = {"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])}
    afk.json("checkpoint", "--patch", '{"step": 1}', env=env)
    payload = {
        "session_id": SESSION,
        "cwd": "/w",
        "hook_event_name": "PostToolUse",
        "transcript_path": "/tmp/t.jsonl",
        "tool_name": "Write",
        "tool_input": {"file_path": "/w/a.py"},
    }

    def hook(event: dict[str, object]) -> str:
        proc = subprocess.run(
            afk.command("hook"),
            input=json.dumps(event),
            text=True,
            capture_output=True,
            env=afk.env,
            timeout=30,
        )
        assert proc.returncode == 0 and "afk:" not in proc.stderr, proc.stderr
        return proc.stdout

    hook(payload)
    start = {**payload, "hook_event_name": "SessionStart", "source": "startup"}
    del start["tool_name"], start["tool_input"]
    brief = json.loads(hook(start))["hookSpecificOutput"]["additionalContext"]
    assert "one" in brief
    shown = queue.show(task["id"])[0]
    assert shown.checkpoint == {"step": 1, "files_touched": ["/w/a.py"]}
    afk.json("done", env=env)
    assert afk.json("status", "--agent", "A")["done"] == 1
    digest = afk("digest", "--dry-run")
    assert digest.returncode == 0, digest.stderr


def test_two_service_replicas_through_pgbouncer_one_leader_once_only_jobs_once(
    dsn, bouncer, replicas, queue, sql, receiver, request
):
    from helpers.digests import digest_env

    pooled = bouncer.for_database(dsn)
    queue.enqueue("a", [NewTask(f"t{i}") for i in range(4)])
    queue.enqueue("b", [NewTask("stuck", max_attempts=1)])
    sql.expire(queue.claim("b", runner="gone").id)
    queue.enqueue("c", [NewTask("broken", max_attempts=1)])
    queue.fail(queue.claim("c", runner="r"), "boom")
    env = digest_env(sql, receiver)
    first, second = replicas(pooled, **env), replicas(pooled, **env)
    # and a worker through the same pooler meanwhile
    worker = Queue.connect(pooled, pool_size=2)
    queue.enqueue("w", [NewTask(f"w{i}") for i in range(200)])
    drained = threading.Thread(
        target=lambda: [worker.done(t) for t in iter(lambda: worker.claim("w", runner="w"), None)]
    )
    drained.start()
    # a failure below still closes the worker's connections (else the next test
    # on this process sees them collected as a ResourceWarning)
    request.addfinalizer(lambda: (drained.join(60), worker.close()))

    leaders: list[tuple[float | None, float | None]] = []

    def runs_of(*services: Service) -> list[float]:
        return [s.value("afk_job_runs_total", job="leader") or 0 for s in services]

    def one_leader() -> bool:
        pair = (first.value("afk_watchdog_leader"), second.value("afk_watchdog_leader"))
        leaders.append(pair)
        return min(runs_of(first, second)) >= 6 and sorted(v or 0 for v in pair) == [0, 1]

    try:
        poll(one_leader, timeout=60)
    except AssertionError:  # what the replicas said last, and their logs' ends
        tails = [s.log()[-3000:] for s in (first, second)]
        raise AssertionError((leaders[-10:], runs_of(first, second), tails)) from None
    for _ in range(20):  # and it stays that way
        assert one_leader(), leaders[-1]
    assert all((a or 0) + (b or 0) <= 1 for a, b in leaders), leaders
    for s in (first, second):
        for job in ("reclaim", "gauges", "leader", "poison", "prune"):
            assert (s.value("afk_job_failures_total", job=job) or 0) == 0, (job, s.log())
    # the reclaim ran, and the gauges agree with the SQL counts
    assert poll(lambda: sql.one("SELECT state FROM afk_task WHERE agent_id = 'b'") == "failed")
    counts = {
        r["state"]: r["n"]
        for r in sql("SELECT state::text, count(*) AS n FROM afk_task GROUP BY state")
    }
    for s in (first, second):
        assert poll(lambda s=s: all(s.value("afk_tasks", state=k) == v for k, v in counts.items()))
    # the once-only prune ran on exactly one replica
    leader, other = (first, second) if first.value("afk_watchdog_leader") else (second, first)
    assert poll(
        lambda: (leader.value("afk_job_last_success_timestamp_seconds", job="prune") or 0) > 0
    )
    assert other.value("afk_job_last_success_timestamp_seconds", job="prune") is None
    # the digest went out once, from the leader
    runs = leader.value("afk_job_runs_total", job="digest") or 0
    assert poll(lambda: (leader.value("afk_job_runs_total", job="digest") or 0) >= runs + 3)
    assert len(receiver.received) == 1
    assert json.loads(receiver.received[0].body)["failed_total"] == 2
    assert other.value("afk_job_runs_total", job="digest") is not None  # it checked...
    assert (
        other.value("afk_digest_deliveries_total", destination="webhook", outcome="delivered")
        is None
    )  # ...and sent nothing
    drained.join(60)
    assert queue.status("w")["done"] == 200
    # a clean stop hands over at once; a SIGKILL, after the leader lease runs out
    leader.stop()
    assert poll(lambda: other.value("afk_watchdog_leader") == 1, timeout=20)


def test_the_worker_examples_through_pgbouncer(afk, queue, tmp_path, dsn, bouncer):
    """examples/ralph.sh and examples/worker.py, their own tests, with the
    pooled DSN handed to the examples."""
    from helpers.examples import check_ralph_example, check_worker_example

    pooled = bouncer.for_database(dsn)
    (tmp_path / "ralph").mkdir()
    (tmp_path / "worker").mkdir()
    check_ralph_example(queue, tmp_path / "ralph", pooled)
    check_worker_example(queue, tmp_path / "worker", pooled)


def test_the_cli_learns_once_that_the_pooler_refuses_startup_options(dsn, bouncer, tmp_path):
    """The CLI's statement timeout travels in the `options` startup parameter,
    which PgBouncer refuses: the first command learns it, the next ones do not
    ask again (each CLI call is a new process)."""
    afk = Afk(bouncer.for_database(dsn), tmp_path)
    afk.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    refusals = lambda: bouncer.log().count("unsupported startup parameter")  # noqa: E731
    assert afk("status").returncode == 0
    after_first = refusals()
    assert after_first >= 1
    for _ in range(3):
        assert afk("status").returncode == 0
    assert refusals() == after_first
