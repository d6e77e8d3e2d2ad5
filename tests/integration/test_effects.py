"""The side-effect ledger: at most once per task, fenced by the lease token;
exactly once when the effect writes to the same database in its transaction."""

from __future__ import annotations

import psycopg
import pytest

from watchdog import BadInput, LeaseLost, NewTask


@pytest.fixture
def claimed(queue):
    queue.enqueue("a", [NewTask("post the comment", key="issue-12")])
    return queue.claim("a", runner="r1")


def test_an_effect_runs_once_and_replays_its_result(queue, claimed, sql):
    calls = []

    def post(ctx):
        calls.append(ctx.key)
        return {"comment_id": 77}

    assert queue.effect(claimed, "post-pr-comment", post) == {"comment_id": 77}
    assert queue.effect(claimed, "post-pr-comment", post) == {"comment_id": 77}
    assert calls == ["issue-12:post-pr-comment"]
    # a later attempt of the same task, by another worker, after a crash
    sql.expire(claimed.id)
    queue.reclaim()
    again = queue.claim("a", runner="r2")
    assert queue.effect(again, "post-pr-comment", post) == {"comment_id": 77}
    assert calls == ["issue-12:post-pr-comment"]
    row = sql("SELECT runs, done, recorded_token FROM afk_task_effect")[0]
    assert row == {"runs": 1, "done": True, "recorded_token": claimed.token}


def test_the_key_falls_back_to_the_task_id(queue):
    queue.enqueue("a", [NewTask("no key")])
    task = queue.claim("a", runner="r")
    assert queue.effect(task, "x", lambda ctx: ctx.key) == f"{task.id}:x"


def test_a_failing_effect_is_not_recorded_and_may_run_again(queue, claimed):
    calls = []

    def flaky(ctx):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("remote said 500")
        return "ok"

    with pytest.raises(RuntimeError):
        queue.effect(claimed, "call", flaky)
    assert queue.effect(claimed, "call", flaky) == "ok"
    assert len(calls) == 2
    assert queue.effects(claimed)[0]["runs"] == 2


def test_a_zombie_cannot_start_or_record_an_effect(queue, claimed, sql):
    sql.expire(claimed.id)
    with pytest.raises(LeaseLost, match="run out"):  # expired, not yet reclaimed
        queue.effect(claimed, "e", lambda ctx: pytest.fail("must not run"))
    queue.reclaim()
    fresh = queue.claim("a", runner="r2")
    with pytest.raises(LeaseLost):
        queue.effect(claimed, "e", lambda ctx: pytest.fail("must not run"))

    # the lease is lost while the effect runs: it ran, but is not recorded
    def lose_lease(ctx):
        sql.expire(fresh.id)
        queue.reclaim()
        return 1

    with pytest.raises(LeaseLost, match="could not be recorded"):
        queue.effect(fresh, "e", lose_lease)
    assert sql.one("SELECT done FROM afk_task_effect") is False


def test_transactional_effect_commits_with_its_record(queue, claimed, sql):
    sql("CREATE TABLE charges (task text, amount int)")

    def charge(ctx):
        ctx.conn.execute("INSERT INTO charges VALUES (%s, 10)", (ctx.key,))
        return {"charged": 10}

    assert queue.effect(claimed, "charge", charge, transactional=True) == {"charged": 10}
    assert queue.effect(claimed, "charge", charge, transactional=True) == {"charged": 10}
    assert sql.one("SELECT count(*) FROM charges") == 1


def test_transactional_effect_rolls_back_with_the_lease_lost(queue, claimed, sql):
    sql("CREATE TABLE charges (task text, amount int)")
    sql.expire(claimed.id)
    queue.reclaim()
    queue.claim("a", runner="r2")
    with pytest.raises(LeaseLost):
        queue.effect(claimed, "charge", lambda ctx: pytest.fail("must not run"), transactional=True)

    def boom(ctx):
        ctx.conn.execute("INSERT INTO charges VALUES ('x', 1)")
        raise RuntimeError("after the write")

    task = queue.claim("a", runner="r2")
    with pytest.raises(RuntimeError):
        queue.effect(task, "charge", boom, transactional=True)
    assert sql.one("SELECT count(*) FROM charges") == 0
    assert sql.one("SELECT count(*) FROM afk_task_effect") == 0


def test_two_workers_cannot_both_run_a_transactional_effect(queue, claimed, dsn, sql):
    # the effect holds the task row: a reclaim skips it, a second run waits
    sql("CREATE TABLE charges (n int)")
    seen = []

    def charge(ctx):
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT 1 FROM afk_task WHERE id = %s FOR UPDATE", (claimed.id,))
        seen.append(queue.reclaim().total)
        ctx.conn.execute("INSERT INTO charges VALUES (1)")

    sql.expire(claimed.id)  # expired, but the worker is alive and inside its effect
    sql("UPDATE afk_task SET lease_until = now() + interval '1 minute' WHERE id = %s", claimed.id)
    queue.effect(claimed, "charge", charge, transactional=True)
    assert seen == [0]


def test_bad_effect_input(queue, claimed, sql):
    before = sql.fingerprint()
    with pytest.raises(BadInput):
        queue.effect(claimed, "", lambda ctx: pytest.fail("must not run"))
    assert sql.fingerprint() == before
    assert sql.one("SELECT count(*) FROM afk_task_effect") == 0
    # a result that is not JSON: the call happened, the record does not
    with pytest.raises(BadInput, match="not JSON-serialisable"):
        queue.effect(claimed, "not-json", lambda ctx: object())
    assert sql("SELECT done FROM afk_task_effect") == [{"done": False}]
