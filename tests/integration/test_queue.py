"""The queue's behaviour through the Python API, on a real database."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from watchdog import BadInput, LeaseLost, NewTask, NotRunning, Queue, TaskNotFound


def plan(n: int, prefix: str = "k") -> list[NewTask]:
    return [NewTask(f"task {i}", {"n": i}, key=f"{prefix}{i}") for i in range(n)]


def test_enqueue_twice_is_a_no_op(queue, sql):
    first = queue.enqueue("agent", plan(3))
    again = queue.enqueue("agent", plan(3))
    assert len(first.enqueued) == 3 and first.duplicates == []
    assert again.enqueued == [] and again.duplicates == ["k0", "k1", "k2"]
    assert sql.one("SELECT count(*) FROM afk_task") == 3


def test_ordinals_follow_the_batch_order_per_agent(queue, sql):
    queue.enqueue("a", [NewTask("x1"), NewTask("x2")])
    queue.enqueue("b", [NewTask("y1")])
    queue.enqueue("a", [NewTask("x3")])
    rows = sql("SELECT agent_id, ordinal, title FROM afk_task ORDER BY agent_id, ordinal")
    assert [(r["agent_id"], r["ordinal"], r["title"]) for r in rows] == [
        ("a", 1, "x1"),
        ("a", 2, "x2"),
        ("a", 3, "x3"),
        ("b", 1, "y1"),
    ]


def test_a_key_repeated_inside_one_batch_is_a_duplicate(queue, sql):
    result = queue.enqueue("a", [NewTask("one", key="k"), NewTask("two", key="k")])
    assert len(result.enqueued) == 1 and result.duplicates == ["k"]
    assert sql.one("SELECT title FROM afk_task") == "one"


def test_claim_takes_the_lowest_ordinal_and_issues_increasing_tokens(queue):
    queue.enqueue("a", plan(3))
    claimed = [queue.claim("a", runner=f"r{i}") for i in range(3)]
    assert [t.title for t in claimed] == ["task 0", "task 1", "task 2"]
    tokens = [t.token for t in claimed]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    assert all(t.state == "running" and t.attempts == 1 for t in claimed)
    assert queue.claim("a", runner="r9") is None


def test_checkpoint_merges_and_refreshes_the_lease(queue, sql):
    queue.enqueue("a", plan(1))
    task = queue.claim("a", runner="r", lease_seconds=60)
    sql("UPDATE afk_task SET lease_until = now() + interval '1 second' WHERE id = %s", task.id)
    queue.checkpoint(task, {"files": ["a.py"], "step": 1})
    after = queue.checkpoint(task, {"step": 2})
    assert after.checkpoint == {"files": ["a.py"], "step": 2}
    assert sql.one("SELECT lease_until > now() + interval '50 seconds' FROM afk_task")


def test_a_crashed_worker_s_task_comes_back_with_its_checkpoint(queue, sql):
    queue.enqueue("a", plan(2))
    task = queue.claim("a", runner="dead")
    queue.checkpoint(task, {"done_steps": ["clone", "edit"]})
    sql.expire(task.id)
    assert queue.reclaim().paused == 1
    again = queue.claim("a", runner="fresh")
    assert again.id == task.id
    assert again.checkpoint == {"done_steps": ["clone", "edit"]}
    assert again.attempts == 2  # the expired lease spent one attempt


def test_stale_token_is_rejected_after_reclaim_and_reclaim(queue, sql):
    queue.enqueue("a", plan(1))
    old = queue.claim("a", runner="slow")
    queue.checkpoint(old, {"v": "old"})
    sql.expire(old.id)
    queue.reclaim()
    new = queue.claim("a", runner="other")
    assert new.id == old.id and new.token > old.token
    before = sql.fingerprint()
    for write in (
        lambda: queue.checkpoint(old, {"v": "zombie"}),
        lambda: queue.heartbeat(old),
        lambda: queue.done(old),
        lambda: queue.fail(old, "x"),
        lambda: queue.pause_task(old),
    ):
        with pytest.raises(LeaseLost):
            write()
    assert sql.fingerprint() == before
    assert queue.show(new.id)[0].checkpoint == {"v": "old"}
    assert queue.checkpoint(new, {"v": "new"}).checkpoint == {"v": "new"}


def test_a_reclaimed_but_not_reclaimed_again_task_is_lease_lost(queue, sql):
    queue.enqueue("a", plan(1))
    task = queue.claim("a", runner="r")
    sql.expire(task.id)
    queue.reclaim()
    with pytest.raises(LeaseLost):
        queue.done(task)


def test_pause_does_not_spend_attempts(queue, sql):
    queue.enqueue("a", [NewTask("t", max_attempts=2)])
    for _ in range(5):
        task = queue.claim("a", runner="r")
        assert task.attempts == 1
        assert queue.pause("a", runner="r") == [task.id]
        assert sql.one("SELECT attempts FROM afk_task") == 0
    assert queue.status("a")["paused"] == 1
    reasons = [e["reason"] for e in queue.show(task.id)[1]]
    assert reasons.count("paused by stop") == 5


def test_pause_by_runner_leaves_other_runners_alone(queue):
    queue.enqueue("a", plan(2))
    mine = queue.claim("a", runner="me")
    theirs = queue.claim("a", runner="them")
    assert queue.pause("a", runner="me") == [mine.id]
    assert queue.show(theirs.id)[0].state == "running"
    assert queue.pause(runner="them") == [theirs.id]


def test_a_restarted_runner_gets_its_own_task_back(queue):
    queue.enqueue("a", plan(3))
    first = queue.claim("a", runner="laptop")
    other = queue.claim("a", runner="ci")
    resumed = queue.claim("a", runner="laptop")
    assert resumed.id == first.id and resumed.token > first.token
    assert resumed.attempts == first.attempts  # the same attempt goes on
    with pytest.raises(LeaseLost):
        queue.checkpoint(first, {"x": 1})
    assert queue.show(other.id)[0].lease_owner == "ci"
    history = [e["reason"] for e in queue.show(first.id)[1]]
    assert history == ["claimed", "resumed"]


def test_a_row_held_by_another_runner_is_never_taken_even_expired(queue, sql):
    queue.enqueue("a", plan(1))
    held = queue.claim("a", runner="alive")
    sql.expire(held.id)
    assert queue.claim("a", runner="intruder") is None
    assert queue.show(held.id)[0].lease_owner == "alive"


def test_failure_backs_off_then_fails_at_max_attempts(queue, sql):
    queue.enqueue("a", [NewTask("flaky", max_attempts=3)])
    delays = []
    for attempt in range(1, 4):
        task = queue.claim("a", runner="r")
        assert task is not None and task.attempts == attempt
        after = queue.fail(task, f"boom {attempt}")
        if attempt < 3:
            assert after.state == "todo"
            assert queue.claim("a", runner="r") is None  # in backoff
            delays.append(
                sql.one("SELECT round(extract(epoch FROM run_after - updated_at)) FROM afk_task")
            )
            sql("UPDATE afk_task SET run_after = now() - interval '1 second'")
    assert delays == [30, 60]
    assert after.state == "failed" and after.last_error == "boom 3"
    assert [t.id for t in queue.dead("a")] == [task.id]


def test_backoff_is_capped(dsn, sql):
    from watchdog import QueueSettings

    q = Queue.connect(dsn, settings=QueueSettings(backoff_base_seconds=30, backoff_cap_seconds=50))
    q.enqueue("a", [NewTask("t", max_attempts=9)])
    sql("UPDATE afk_task SET attempts = 6")
    q.fail(q.claim("a", runner="r"), "x")
    assert sql.one("SELECT round(extract(epoch FROM run_after - updated_at)) FROM afk_task") == 50
    q.close()


def test_expired_lease_at_max_attempts_fails_the_task(queue, sql):
    queue.enqueue("a", [NewTask("t", max_attempts=1)])
    task = queue.claim("a", runner="r")
    sql.expire(task.id)
    result = queue.reclaim()
    assert (result.paused, result.failed) == (0, 1)
    shown, history = queue.show(task.id)
    assert shown.state == "failed" and shown.last_error == "lease expired"
    assert history[-1]["reason"] == "lease expired"


def test_retry_resets_attempts_and_keeps_the_checkpoint(queue):
    queue.enqueue("a", [NewTask("t", max_attempts=1)])
    task = queue.claim("a", runner="r")
    queue.checkpoint(task, {"kept": True})
    queue.fail(task, "nope")
    assert queue.retry([task.id]) == [task.id]
    again = queue.claim("a", runner="r")
    assert again.id == task.id and again.attempts == 1 and again.checkpoint == {"kept": True}
    assert [e["reason"] for e in queue.show(task.id)[1]][-2:] == ["retried by a human", "claimed"]


def test_retry_is_all_or_nothing(queue, sql):
    queue.enqueue("a", [NewTask("t1", max_attempts=1), NewTask("t2")])
    failed = queue.claim("a", runner="r")
    queue.fail(failed, "x")
    todo = queue.claim("a", runner="s")
    before = sql.fingerprint()
    with pytest.raises(NotRunning):
        queue.retry([failed.id, todo.id])
    with pytest.raises(TaskNotFound):
        queue.retry([failed.id, uuid.uuid4()])
    assert sql.fingerprint() == before


def test_done_again_is_a_replay_and_any_other_write_after_it_is_a_lost_lease(queue, sql):
    queue.enqueue("a", plan(2))
    task = queue.claim("a", runner="r")
    queue.done(task, {"ok": True})
    todo_id = sql.one("SELECT id FROM afk_task WHERE state = 'todo'")
    before = sql.fingerprint()
    # the worker lost the reply to its done and sends it again: the same outcome
    again = queue.done(task, {"ok": True})
    assert (again.state, again.result) == ("done", {"ok": True})
    # exit 4 means "you no longer hold this task", whatever the reason
    for write in (
        lambda: queue.fail(task, "late"),
        lambda: queue.heartbeat(task),
        lambda: queue.checkpoint(task, {"x": 1}),
        lambda: queue.pause_task(task),
    ):
        with pytest.raises(LeaseLost):
            write()
    with pytest.raises(BadInput):
        queue.fail(todo_id, "x", token=task.token)
    with pytest.raises(TaskNotFound):
        queue.done(uuid.uuid4(), token=1)
    assert sql.fingerprint() == before


def test_reclaim_pages_through_many_expired_rows(queue, sql):
    queue.enqueue("a", [NewTask(f"t{i}") for i in range(25)])
    for i in range(25):
        queue.claim("a", runner=f"r{i}")
    sql("UPDATE afk_task SET lease_until = now() - interval '1 minute'")
    # one still-valid lease among them is kept
    keep = sql.one("SELECT id FROM afk_task ORDER BY id LIMIT 1 OFFSET 3")
    sql("UPDATE afk_task SET lease_until = now() + interval '1 hour' WHERE id = %s", keep)
    result = queue.reclaim(batch=10)
    assert result.paused == 24 and result.statements == 3
    assert queue.status("a") == {
        "todo": 0,
        "running": 1,
        "paused": 24,
        "done": 0,
        "failed": 0,
        "blocked": 0,
    }


def test_reclaim_skips_rows_locked_by_a_live_writer(queue, sql, dsn):
    queue.enqueue("a", plan(2))
    tasks = [queue.claim("a", runner=f"r{i}") for i in range(2)]
    sql("UPDATE afk_task SET lease_until = now() - interval '1 minute'")
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT 1 FROM afk_task WHERE id = %s FOR UPDATE", (tasks[0].id,))
        assert queue.reclaim().paused == 1  # did not wait for the locked row
        holder.execute(
            "UPDATE afk_task SET lease_until = now() + interval '1 hour' WHERE id = %s",
            (tasks[0].id,),
        )
    assert queue.reclaim().paused == 0
    assert queue.show(tasks[0].id)[0].state == "running"


def test_enqueue_inside_the_callers_transaction(queue, dsn, sql):
    with psycopg.connect(dsn) as conn:
        queue.enqueue("a", plan(2), conn=conn)
        conn.rollback()
    assert sql.one("SELECT count(*) FROM afk_task") == 0
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE app_rows (x int)")
        conn.execute("INSERT INTO app_rows VALUES (1)")
        queue.enqueue("a", plan(2), conn=conn)
        conn.commit()
    assert sql.one("SELECT count(*) FROM afk_task") == 2


def test_done_can_commit_with_the_callers_own_writes(queue, dsn, sql):
    queue.enqueue("a", plan(1))
    task = queue.claim("a", runner="r")
    sql("CREATE TABLE app_rows (x int)")
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO app_rows VALUES (1)")
        queue.done(task, conn=conn)
        conn.rollback()
    assert sql.one("SELECT state::text FROM afk_task") == "running"
    assert sql.one("SELECT count(*) FROM app_rows") == 0


def test_status_show_and_dead(queue, sql):
    queue.enqueue("a", plan(3))
    queue.enqueue("b", plan(1, "b"))
    t = queue.claim("a", runner="r")
    queue.done(t, {"pr": 7})
    assert queue.status() == {
        "todo": 3,
        "running": 0,
        "paused": 0,
        "done": 1,
        "failed": 0,
        "blocked": 0,
    }
    assert queue.status("a") == {
        "todo": 2,
        "running": 0,
        "paused": 0,
        "done": 1,
        "failed": 0,
        "blocked": 0,
    }
    shown, history = queue.show(t.id)
    assert shown.result == {"pr": 7}
    assert [h["to_state"] for h in history] == ["running", "done"]
    assert queue.dead() == []
    sql(
        "UPDATE afk_task SET state = 'failed', updated_at = now() - interval '2 hours' "
        "WHERE agent_id = 'b'"
    )
    assert len(queue.dead("b")) == 1
    assert queue.dead("b", since_seconds=3600) == []


def test_history_is_append_only(queue, sql):
    queue.enqueue("a", plan(1))
    queue.claim("a", runner="r")
    assert sql.one("SELECT count(*) FROM afk_task_event") == 1
    with pytest.raises(psycopg.errors.RaiseException):
        sql("UPDATE afk_task_event SET reason = 'rewritten'")


def test_agent_ids_and_keys_are_stored_verbatim(queue, sql):
    agent = "o'brien\"; DROP TABLE afk_task; -- ü🙂"
    key = "key'; DELETE FROM afk_task; --"
    queue.enqueue(agent, [NewTask("t'\"", {"q": "'\""}, key=key)])
    row = sql("SELECT agent_id, idem_key, title, spec FROM afk_task")[0]
    assert row == {"agent_id": agent, "idem_key": key, "title": "t'\"", "spec": {"q": "'\""}}
    assert queue.claim(agent, runner=agent).agent_id == agent


@pytest.mark.parametrize(
    "bad",
    [
        lambda q: q.enqueue("", [NewTask("t")]),
        lambda q: q.enqueue("a", [NewTask("  ")]),
        lambda q: q.enqueue("a", [NewTask("t", spec=[1, 2])]),  # type: ignore[arg-type]
        lambda q: q.enqueue("a", [NewTask("t", spec={"x": "y" * 2_000_000})]),
        lambda q: q.enqueue("a", [NewTask("t", max_attempts=0)]),
        lambda q: q.enqueue("a", [NewTask("ok"), {"title": "t", "oops": 1}]),
        lambda q: q.enqueue("a", []),
        lambda q: q.claim("a", lease_seconds=0),
        lambda q: q.claim("a", lease_seconds=-5),
        lambda q: q.claim(""),
    ],
)
def test_bad_input_changes_nothing(queue, sql, bad):
    queue.enqueue("a", plan(1))
    before = sql.fingerprint()
    with pytest.raises(BadInput):
        bad(queue)
    assert sql.fingerprint() == before


def test_checkpoint_bad_input_changes_nothing(queue, sql, dsn):
    from watchdog import QueueSettings

    small = Queue.connect(dsn, settings=QueueSettings(max_json_bytes=100))
    small.enqueue("a", plan(1))
    task = small.claim("a", runner="r")
    small.checkpoint(task, {"a": "x" * 40})
    before = sql.fingerprint()
    for patch in ([1], "s", {"b": "y" * 200}, {"b": "y" * 60}):
        with pytest.raises(BadInput):
            small.checkpoint(task, patch)  # type: ignore[arg-type]
    assert sql.fingerprint() == before
    small.close()


def test_claim_many_and_done_many(queue, sql):
    queue.enqueue("a", [NewTask(f"t{i}") for i in range(7)])
    batch = queue.claim_many("a", 5, runner="r")
    assert [t.title for t in batch] == [f"t{i}" for i in range(5)]
    assert len({t.token for t in batch}) == 5 and all(t.state == "running" for t in batch)
    assert [t.title for t in queue.claim_many("a", 5, runner="s")] == ["t5", "t6"]
    sql.expire(batch[0].id)
    queue.reclaim()
    result = queue.done_many(batch)
    assert result.lost == [batch[0].id] and len(result.done) == 4
    assert queue.status("a") == {
        "todo": 0,
        "running": 2,
        "paused": 1,
        "done": 4,
        "failed": 0,
        "blocked": 0,
    }
    with pytest.raises(BadInput):
        queue.claim_many("a", 0)


def test_queue_takes_a_database_and_connect_is_the_door_from_a_dsn(dsn):
    with pytest.raises(BadInput, match=r"Queue\.connect\(dsn\)"):
        Queue(dsn)
    from watchdog import QueueSettings

    q = Queue.connect(dsn, settings=QueueSettings(lease_seconds=7), pool_size=None)
    try:
        q.enqueue("a", [NewTask("t")])
        assert q.claim("a").lease_seconds == 7  # the settings given, not the environment's
    finally:
        q.close()


# -- every run ends (a supervisor's run: a claim made under an account) ---------------


def only_run(sql, task_id):
    (run,) = sql("SELECT outcome, ended_at, attempt_spent FROM afk_run WHERE task_id = %s", task_id)
    return run


def test_a_reclaimed_run_ends_as_lease_lost_with_its_attempt_spent(queue, sql):
    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="loop-1", account="acct")
    assert only_run(sql, task.id)["ended_at"] is None
    sql.expire(task.id)
    assert queue.reclaim().paused == 1
    run = only_run(sql, task.id)
    assert (run["outcome"], run["attempt_spent"]) == ("lease_lost", True)
    assert run["ended_at"] is not None


@pytest.mark.parametrize("how", ["task", "agent", "runner"])
def test_a_paused_run_ends_with_no_attempt_spent(queue, sql, how):
    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="loop-1", account="acct")
    if how == "task":
        queue.pause_task(task, reason="paused by hand")
    elif how == "agent":
        queue.pause("a")
    else:
        queue.pause(runner="loop-1")
    run = only_run(sql, task.id)
    assert (run["outcome"], run["attempt_spent"]) == ("interrupted", False)
    assert run["ended_at"] is not None


def test_a_batch_finish_ends_its_runs(queue, sql):
    queue.enqueue("a", [NewTask("t1"), NewTask("t2")])
    tasks = [queue.claim("a", runner=f"w{n}", account="acct") for n in range(2)]
    queue.done_many(tasks)
    for task in tasks:
        assert (only_run(sql, task.id)["outcome"], only_run(sql, task.id)["attempt_spent"]) == (
            "done",
            True,
        )


@pytest.mark.parametrize(("error", "outcome"), [(None, "done"), ("tests fail", "task_failure")])
def test_a_supervised_task_finished_without_its_account_ends_its_run(queue, sql, error, outcome):
    """The agent inside a supervisor's run finishes its task itself (`afk
    done`, `afk fail`: no account): the run ends with the task, and the next
    claim of the task by an API worker (no account) finds its way as well."""
    queue.enqueue("a", [NewTask("t", max_attempts=2)])
    task = queue.claim("a", runner="loop-1", account="acct")
    if error is None:
        queue.done(task)
    else:
        queue.fail(task, error)
    run = only_run(sql, task.id)
    assert (run["outcome"], run["attempt_spent"]) == (outcome, True)
    assert run["ended_at"] is not None
    if error is not None:
        sql("UPDATE afk_task SET run_after = now() WHERE id = %s", task.id)
        again = queue.claim("a", runner="worker")
        assert again is not None and again.id == task.id
        queue.done(again)
        assert sql("SELECT count(*) AS n FROM afk_run WHERE task_id = %s", task.id)[0]["n"] == 1


def test_an_api_workers_task_starts_no_run_and_its_finish_looks_for_none(queue, sql):
    queue.enqueue("a", [NewTask("t1"), NewTask("t2")])
    task = queue.claim("a", runner="worker")
    nxt = queue.done(task, claim_next=True)
    queue.fail(nxt, "broke")
    assert sql("SELECT count(*) AS n FROM afk_run")[0]["n"] == 0
    assert sql("SELECT bool_or(had_run) AS any FROM afk_task")[0]["any"] is False


def test_a_run_whose_lease_was_lost_keeps_what_its_supervisor_read(queue, sql):
    """The supervisor that outlived its lease (a database blip) still knows
    what the run cost: it lands on the run, so budgets count it."""
    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="loop-1", account="acct")
    sql.expire(task.id)
    queue.reclaim()
    queue.record_lost_run(task, {"exit_status": 0, "cost_usd": 0.75, "session_id": "s1"})
    (run,) = sql("SELECT outcome, cost_usd, session_id FROM afk_run WHERE task_id = %s", task.id)
    assert (run["outcome"], float(run["cost_usd"]), run["session_id"]) == ("lease_lost", 0.75, "s1")
    assert queue.cost(task)[0] == 0.75


def test_a_hook_s_touch_commits_without_waiting_for_the_disk_and_only_itself(dsn):
    """A hook's look at its task (a lease refreshed, files noted) commits
    asynchronously, and the setting ends with its transaction: the next
    statement on the same pooled connection (a claim, a finish) commits as
    the server's setting says."""
    q = Queue.connect(dsn, pool_size=1)
    try:
        q.enqueue("a", [NewTask("t")])
        task = q.claim("a", runner="session-1")
        row = q.touch_session(None, None, "session-1", renew=True, files=["a.py"], max_files=10)
        assert row is not None and row["commit_mode"] == "off" and row["id"] == task.id
        with q.db.connection() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"] == "on"
        assert q.show(task.id)[0].checkpoint["files_touched"] == ["a.py"]
    finally:
        q.close()
