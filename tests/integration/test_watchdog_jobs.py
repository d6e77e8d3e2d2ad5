"""The watchdog's jobs, run once each against a real database, and its settings."""

from __future__ import annotations

import logging

from watchdog import NewTask, jobs


def test_gauges_match_sql_counts(queue, sql):
    queue.enqueue("a", [NewTask(f"a{i}") for i in range(6)])
    queue.enqueue("b", [NewTask(f"b{i}") for i in range(2)])
    t1 = queue.claim("a", runner="r1")
    t2 = queue.claim("a", runner="r2")
    queue.done(queue.claim("b", runner="r3"))
    queue.fail(queue.claim("a", runner="r4"), "x")
    sql.expire(t2.id)
    sql("UPDATE afk_task SET checkpoint_at = now() - interval '100 seconds' WHERE id = %s", t1.id)
    sql("UPDATE afk_task SET created_at = now() - interval '1 hour' WHERE title = 'a5'")
    snap = jobs.gauges(queue, top_agents=1)
    for state in ("todo", "running", "paused", "done", "failed", "blocked"):
        assert snap.states[state] == sql.one(
            "SELECT count(*) FROM afk_task WHERE state = %s", state
        ), state
    assert snap.expired_leases == 1
    assert 99 <= snap.since_checkpoint < 200
    assert 3599 <= snap.oldest_todo_age < 3700
    assert {a for a, _, _ in snap.agents} == {"a"}  # capped to the largest agent
    assert sorted((s, n) for _, s, n in snap.agents) == [("running", 2), ("todo", 4)]
    assert snap.poison_pills == 0


def test_an_empty_queue_reads_as_zeros(queue):
    snap = jobs.gauges(queue)
    assert snap.states == {s: 0 for s in ("todo", "running", "paused", "done", "failed", "blocked")}
    assert (snap.expired_leases, snap.oldest_todo_age, snap.since_checkpoint) == (0, 0.0, 0.0)


def test_poison_logs_one_line_per_failed_task_of_the_window(queue, sql, caplog):
    queue.enqueue("a", [NewTask(f"t{i}", max_attempts=1) for i in range(3)])
    failed = [queue.fail(queue.claim("a", runner="r"), f"boom {i}") for i in range(3)]
    sql("UPDATE afk_task SET updated_at = now() - interval '2 hours' WHERE id = %s", failed[0].id)
    with caplog.at_level(logging.WARNING, logger="watchdog.jobs"):
        pills = jobs.poison(queue, window=3600)
    assert sorted(p.title for p in pills) == ["t1", "t2"]
    lines = [r for r in caplog.records if getattr(r, "action", None) == "poison_pill"]
    assert sorted(r.task_id for r in lines) == sorted(str(p.id) for p in pills)


def test_prune_deletes_old_done_tasks_and_their_history_in_batches(queue, sql):
    queue.enqueue("a", [NewTask(f"t{i}") for i in range(12)])
    for _ in range(10):
        queue.done(queue.claim("a", runner="r"))
    sql(
        "UPDATE afk_task SET updated_at = now() - interval '40 days' "
        "WHERE state = 'done' AND title <> 't9'"
    )
    running = queue.claim("a", runner="r")
    sql("UPDATE afk_task SET updated_at = now() - interval '40 days' WHERE id = %s", running.id)
    result = jobs.prune(queue, retention=30 * 86400, batch=4)
    assert (result.deleted, result.statements) == (9, 3)
    assert sql.one("SELECT count(*) FROM afk_task") == 3
    assert (
        sql.one(
            "SELECT count(*) FROM afk_task_event WHERE task_id NOT IN (SELECT id FROM afk_task)"
        )
        == 0
    )
    assert jobs.prune(queue, retention=30 * 86400).deleted == 0


def test_done_count_is_exact_when_small_and_estimated_when_large(queue, sql):
    sql("""INSERT INTO afk_task (agent_id, ordinal, title, state)
           SELECT 'a', i, 't', 'done' FROM generate_series(1, 5000) i""")
    queue.enqueue("b", [NewTask("open")])
    exact = jobs.gauges(queue)
    assert exact.states["done"] == 5000 and exact.states["todo"] == 1
    sql("ANALYZE afk_task")
    estimated = jobs.gauges(queue, exact_below=1000)
    assert estimated.states["todo"] == 1  # open states stay exact
    assert 4500 <= estimated.states["done"] <= 5500


def test_a_long_transaction_shows_in_the_gauges(queue, dsn):
    import psycopg

    with psycopg.connect(dsn) as holder:
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")
        assert jobs.gauges(queue).oldest_snapshot_age > 0
        holder.rollback()
