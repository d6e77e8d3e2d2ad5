"""Finish the held task and claim the runner's next one, in one statement:
`q.done(task, claim_next=True)` and `q.fail(task, error, claim_next=True)`,
in-process (`afk done --next` as a process is in tests/e2e/test_finish_claim.py)."""

from __future__ import annotations

import pytest
from helpers import run_threads

from watchdog import LeaseLost, NewTask, Queue


def history(sql, task_id):
    return [
        (r["from_state"], r["to_state"], r["reason"], r["token"])
        for r in sql(
            "SELECT from_state::text, to_state::text, reason, token FROM afk_task_event"
            " WHERE task_id = %s ORDER BY id",
            task_id,
        )
    ]


def test_done_claims_the_next_task_in_one_statement(queue, sql):
    queue.enqueue("a", [NewTask("one"), NewTask("two"), NewTask("three")])
    queue.enqueue("other", [NewTask("not mine")])
    first = queue.claim("a", runner="r")
    second = queue.done(first, {"ok": 1}, claim_next=True)
    assert second is not None and second.title == "two"
    assert (second.state, second.lease_owner, second.attempts) == ("running", "r", 1)
    assert second.token > first.token
    done = queue.show(first.id)[0]
    assert (done.state, done.result, done.lease_until) == ("done", {"ok": 1}, None)
    assert history(sql, first.id)[-1] == ("running", "done", "done", first.token)
    assert history(sql, second.id) == [("todo", "running", "claimed", second.token)]
    third = queue.done(second, claim_next=True)
    assert third is not None and third.title == "three"
    assert queue.done(third, claim_next=True) is None  # the agent's backlog is empty
    assert queue.status("a") == {
        "todo": 0,
        "running": 0,
        "paused": 0,
        "done": 3,
        "failed": 0,
        "blocked": 0,
    }
    assert queue.status("other")["todo"] == 1


def test_fail_claims_the_next_task_with_the_same_attempt_rules(queue, sql):
    queue.enqueue("a", [NewTask("flaky", max_attempts=2), NewTask("next")])
    flaky = queue.claim("a", runner="r")
    nxt = queue.fail(flaky, "boom", claim_next=True)
    assert nxt is not None and nxt.title == "next"  # flaky is in backoff, not claimable
    row = sql(
        "SELECT state::text, last_error, run_after > now() AS later FROM afk_task WHERE id = %s",
        flaky.id,
    )[0]
    assert row == {"state": "todo", "last_error": "boom", "later": True}
    sql("UPDATE afk_task SET run_after = NULL WHERE id = %s", flaky.id)
    again = queue.done(nxt, claim_next=True)
    assert again is not None and again.id == flaky.id and again.attempts == 2
    assert queue.fail(again, "boom twice", claim_next=True) is None
    assert queue.show(flaky.id)[0].state == "failed"
    assert history(sql, flaky.id)[-1][:3] == ("running", "failed", "failed with error")


def test_a_refused_finish_claims_nothing(queue, sql):
    queue.enqueue("a", [NewTask("one"), NewTask("two")])
    first = queue.claim("a", runner="r")
    sql.expire(first.id)
    queue.reclaim()
    before = sql.fingerprint()
    with pytest.raises(LeaseLost):
        queue.done(first, claim_next=True)
    with pytest.raises(LeaseLost):
        queue.fail(first, "late", claim_next=True)
    assert sql.fingerprint() == before  # nothing finished, nothing claimed


def test_a_replayed_finish_gets_the_task_it_had_claimed_back(queue, sql):
    """The reply of a finish+claim is lost and the call is repeated (as the
    API does after a lost connection): the finish is recognised as done, and
    the runner gets back the task the first call claimed, not a third one."""
    queue.enqueue("a", [NewTask("one"), NewTask("two"), NewTask("three")])
    first = queue.claim("a", runner="r")
    claimed = queue.done(first, claim_next=True)
    assert claimed is not None
    again = queue.done(first, claim_next=True)
    assert again is not None and again.id == claimed.id and again.token >= claimed.token
    assert queue.status("a")["running"] == 1 and queue.status("a")["todo"] == 1


def test_it_resumes_the_runners_other_in_flight_task_first(queue):
    queue.enqueue("a", [NewTask("one"), NewTask("two"), NewTask("three")])
    one = queue.claim("a", runner="r")
    two = queue.claim("a", runner="elsewhere")
    queue.pause("a", runner="elsewhere")
    assert two is not None
    # a restart of "r" left it holding a second task as well
    held = queue.claim_many("a", 1, runner="r")[0]
    assert held.title == "two"  # the paused one, lowest ordinal
    nxt = queue.done(one, claim_next=True)
    assert nxt is not None and nxt.id == held.id and nxt.title != "three"


def test_concurrent_loops_take_each_task_once(dsn, sql):
    q = Queue.connect(dsn, pool_size=4)
    q.enqueue("a", [NewTask(f"t{i}") for i in range(400)])
    seen: list[str] = []

    def loop(n: int) -> None:
        task = q.claim("a", runner=f"w{n}")
        while task is not None:
            seen.append(task.title)
            task = q.done(task, claim_next=True)

    run_threads(loop, 4, timeout=60)
    q.close()
    assert sorted(seen) == sorted(f"t{i}" for i in range(400))
    assert sql.one("SELECT count(*) FROM afk_task_event WHERE reason = 'claimed'") == 400
