"""Enqueue keeps every guarantee for small and large batches: keys,
ordinals under concurrency, the size cap, the caller's transaction."""

from __future__ import annotations

import psycopg
import pytest
from helpers import run_threads

from watchdog import BadInput, NewTask, Queue

SIZES = [pytest.param(10, id="small"), pytest.param(5_000, id="large")]
LARGE = 5_000


@pytest.mark.parametrize("n", SIZES)
def test_keys_are_idempotent_and_duplicates_reported(queue, sql, n):
    plan = [NewTask(f"t{i}", {"i": i}, key=f"k{i}") for i in range(n)]
    first = queue.enqueue("a", plan)
    assert len(first.enqueued) == n and first.duplicates == []
    # again, with one new task and a key repeated inside the batch
    again = queue.enqueue("a", [*plan, NewTask("new", key="fresh"), NewTask("x", key="k0")])
    assert len(again.enqueued) == 1
    assert sorted(again.duplicates) == sorted([f"k{i}" for i in range(n)] + ["k0"])
    rows = sql("SELECT ordinal, title, spec FROM afk_task ORDER BY ordinal")
    assert [r["ordinal"] for r in rows] == list(range(1, n + 2))
    assert rows[0]["spec"] == {"i": 0} and rows[-1]["title"] == "new"


@pytest.mark.parametrize("n", SIZES)
def test_one_spec_over_the_cap_refuses_the_whole_batch(dsn, sql, n):
    from watchdog import QueueSettings

    q = Queue.connect(dsn, settings=QueueSettings(max_json_bytes=100))
    plan = [NewTask(f"t{i}") for i in range(n)]
    plan[n // 2] = NewTask("big", {"x": "y" * 200})
    before = sql.fingerprint()
    with pytest.raises(BadInput, match=f"task {n // 2 + 1}: spec is over the limit"):
        q.enqueue("a", plan)
    assert sql.fingerprint() == before
    q.close()


@pytest.mark.parametrize("n", SIZES)
def test_a_bad_spec_is_refused_before_anything_is_sent(queue, sql, n):
    plan = [NewTask(f"t{i}") for i in range(n)]
    plan[-1] = NewTask("nul", {"x": "a\x00b"})
    with pytest.raises(BadInput, match="NUL"):
        queue.enqueue("a", plan)
    assert sql.one("SELECT count(*) FROM afk_task") == 0


@pytest.mark.parametrize("n", SIZES)
def test_conn_joins_the_callers_transaction(queue, dsn, sql, n):
    with psycopg.connect(dsn) as conn:
        queue.enqueue("a", [NewTask(f"t{i}") for i in range(n)], conn=conn)
        conn.execute("CREATE TABLE mine (x int)")
        conn.rollback()
    assert sql.one("SELECT count(*) FROM afk_task") == 0
    with psycopg.connect(dsn) as conn:
        queue.enqueue("a", [NewTask(f"t{i}") for i in range(n)], conn=conn)
        queue.enqueue("a", [NewTask(f"u{i}") for i in range(n)], conn=conn)
        conn.commit()
    assert sql.one("SELECT count(*) FROM afk_task") == 2 * n


def enqueue_at_once(dsn: str, plans: list[list[NewTask]]) -> list:
    """Enqueue each plan for agent "a" from a thread and a Queue of its own,
    all at once; their results, in the order they finished."""
    results: list = []
    errors: list[BaseException] = []

    def enqueue(i: int) -> None:
        q = Queue.connect(dsn, pool_size=1)
        try:
            results.append(q.enqueue("a", plans[i]))
        except BaseException as exc:
            errors.append(exc)
        finally:
            q.close()

    run_threads(enqueue, len(plans))
    assert not errors
    return results


def test_concurrent_large_batches_get_disjoint_ordinals_in_input_order(dsn, sql):
    n = LARGE
    enqueue_at_once(dsn, [[NewTask(f"{p}{i:05d}") for i in range(n)] for p in "abc"])
    rows = sql("SELECT ordinal, title FROM afk_task ORDER BY ordinal")
    assert [r["ordinal"] for r in rows] == list(range(1, 3 * n + 1))
    for prefix in "abc":
        mine = [r["title"] for r in rows if r["title"].startswith(prefix)]
        assert mine == sorted(mine) and len(mine) == n  # each batch in its input order


def test_concurrent_large_batches_of_the_same_keys_insert_each_key_once(dsn, sql):
    """The copy path meets a key another batch is inserting: it waits for
    that batch, then falls back to the statement, which skips the key."""
    n = LARGE
    plans = [[NewTask(f"{p}{i:05d}", key=f"k{i}") for i in range(n)] for p in "abc"]
    results = enqueue_at_once(dsn, plans)
    assert sql.one("SELECT count(*) FROM afk_task") == n
    assert sorted(len(r.enqueued) for r in results) == [0, 0, n]
    assert sorted(len(r.duplicates) for r in results) == [0, n, n]
    rows = sql("SELECT ordinal, title FROM afk_task ORDER BY ordinal")
    assert [int(r["title"][1:]) for r in rows] == list(range(n))  # one batch, in order


@pytest.mark.parametrize("n", SIZES)
def test_the_ids_returned_are_the_tasks_in_the_order_given(queue, sql, n):
    ids = queue.enqueue("a", [NewTask(f"t{i}") for i in range(n)]).enqueued
    titles = {r["id"]: r["title"] for r in sql("SELECT id, title FROM afk_task")}
    assert [titles[i] for i in ids] == [f"t{i}" for i in range(n)]


@pytest.mark.parametrize("autocommit", [False, True], ids=["transaction", "autocommit"])
@pytest.mark.parametrize("n", SIZES)
def test_a_key_that_exists_inside_the_callers_transaction_leaves_it_whole(
    queue, dsn, sql, n, autocommit
):
    queue.enqueue("a", [NewTask("old", key="k0")])
    with psycopg.connect(dsn, autocommit=autocommit) as conn, conn.transaction():
        conn.execute("CREATE TABLE mine (x int)")
        result = queue.enqueue("a", [NewTask(f"t{i}", key=f"k{i}") for i in range(n)], conn=conn)
        conn.execute("INSERT INTO mine VALUES (1)")
    assert result.duplicates == ["k0"] and len(result.enqueued) == n - 1
    assert sql.one("SELECT count(*) FROM mine") == 1
    rows = sql("SELECT ordinal FROM afk_task ORDER BY ordinal")
    assert [r["ordinal"] for r in rows] == list(range(1, n + 1))  # no ordinal lost


@pytest.mark.parametrize("n", SIZES)
def test_ordinals_past_any_small_integer(queue, sql, n):
    """Parameters are typed by their value: a first ordinal of 32,000 plus a
    batch of 5,000 must not be added up as smallints (it once was)."""
    queue.enqueue("a", [NewTask("first")])
    for start in (32_000, 2_147_000_000):  # (ordinal is an int, as designed)
        sql("UPDATE afk_agent SET next_ordinal = %s", start)
        ids = queue.enqueue("a", [NewTask(f"t{i}") for i in range(n)]).enqueued
        assert len(ids) == n
        assert sql.one("SELECT max(ordinal) FROM afk_task") == start + n - 1
