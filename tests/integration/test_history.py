"""The history of a task is written by one trigger (migration 0012) from the
reason each statement passes in: every change of state or token gets its
row, with the reason, runner, token and error the statement meant."""

import pytest
from helpers import poll

from watchdog import NewTask, Queue


def plan(n: int, **kw) -> list[NewTask]:
    return [NewTask(f"t{i}", **kw) for i in range(n)]


def history(queue: Queue, task) -> list[tuple]:
    return [
        (h["from_state"], h["to_state"], h["reason"], h["runner"], h["token"], h["error"])
        for h in queue.show(task.id)[1]
    ]


def test_every_statement_that_changes_a_task_names_why(queue, sql):
    queue.enqueue("a", plan(6, max_attempts=1))
    queue.enqueue("b", plan(2))
    one = queue.claim("a", runner="r1")
    two = queue.done(one, {"ok": 1}, claim_next=True)  # step: done, then claim
    three = queue.fail(two, "boom", claim_next=True)  # step: fail, then claim
    queue.pause_task(three, reason="paused by runner")
    resumed = queue.claim("a", runner="r1")  # the paused task again
    queue.pause("a", runner="r1", reason="paused by stop")
    batch = queue.claim_many("a", 2, runner="r2")
    queue.done_many(batch[:1])
    sql("UPDATE afk_task SET lease_until = now() - interval '1 second' WHERE state = 'running'")
    queue.reclaim()
    queue.retry([two.id], who="alice")
    b = queue.claim("b", runner="r3")
    again = queue.claim("b", runner="r3")  # the runner restarted: resumes its task
    queue.fail(again, "flaky")  # below max_attempts: back to todo

    assert history(queue, one) == [
        ("todo", "running", "claimed", "r1", one.token, None),
        ("running", "done", "done", "r1", one.token, None),
    ]
    assert history(queue, two) == [
        ("todo", "running", "claimed", "r1", two.token, None),
        ("running", "failed", "failed with error", "r1", two.token, "boom"),
        ("failed", "todo", "retried by a human", "alice", None, None),
    ]
    assert history(queue, three) == [
        ("todo", "running", "claimed", "r1", three.token, None),
        ("running", "paused", "paused by runner", "r1", three.token, None),
        ("paused", "running", "claimed", "r1", resumed.token, None),
        ("running", "paused", "paused by stop", "r1", resumed.token, None),
        ("paused", "running", "claimed", "r2", batch[0].token, None),
        ("running", "done", "done", "r2", batch[0].token, None),
    ]
    assert history(queue, batch[1]) == [
        ("todo", "running", "claimed", "r2", batch[1].token, None),
        ("running", "failed", "lease expired", "r2", batch[1].token, "lease expired"),
    ]
    assert history(queue, b) == [
        ("todo", "running", "claimed", "r3", b.token, None),
        ("running", "running", "resumed", "r3", again.token, None),
        ("running", "todo", "failed with error", "r3", again.token, "flaky"),
    ]
    # the reason travels on the row and is never stored there
    assert sql.one("SELECT count(*) FROM afk_task WHERE change_reason IS NOT NULL") == 0
    assert (
        sql.one(
            "SELECT count(*) FROM afk_task WHERE change_error IS NOT NULL OR change_by IS NOT NULL"
        )
        == 0
    )


def test_writes_that_change_no_state_write_no_history(queue, sql):
    queue.enqueue("a", plan(1))
    task = queue.claim("a", runner="r")
    queue.checkpoint(task, {"step": 1})
    queue.heartbeat(task)
    with queue.leased(task, interval=0.01) as lease:
        poll(lambda: lease.beats >= 3)
    assert sql.one("SELECT count(*) FROM afk_task_event") == 1


def test_an_operators_own_update_is_recorded_too(queue, sql):
    """A change made by hand, with no reason given, still gets its history
    row: no writer, ours or not, can leave a state change unrecorded."""
    queue.enqueue("a", plan(1))
    task = queue.claim("a", runner="r")
    sql("UPDATE afk_task SET state = 'done', lease_until = NULL")
    last = queue.show(task.id)[1][-1]
    assert (last["from_state"], last["to_state"], last["reason"]) == (
        "running",
        "done",
        "changed by hand",
    )
    assert last["runner"] == "r"  # the lease holder, as the change ended a lease
    sql("UPDATE afk_task SET state = 'todo'")
    last = queue.show(task.id)[1][-1]
    assert (last["reason"], last["token"]) == ("changed by hand", None)
    assert last["runner"] == sql.one("SELECT current_user")


@pytest.mark.parametrize("column", ["change_reason", "change_error", "change_by"])
def test_a_reason_alone_changes_nothing(queue, sql, column):
    queue.enqueue("a", plan(1))
    sql(f"UPDATE afk_task SET {column} = 'x'")
    assert sql.one(f"SELECT count(*) FROM afk_task WHERE {column} IS NOT NULL") == 0
    assert sql.one("SELECT count(*) FROM afk_task_event") == 0


def test_a_task_deleted_by_hand_takes_its_history_with_it(queue, sql):
    """The history rows keep no foreign key (0023: the task's own trigger
    writes them while it holds the row); any DELETE of tasks, an operator's
    own included, still removes their history and only theirs."""
    queue.enqueue("a", plan(3))
    gone, kept = queue.claim("a", runner="r1"), queue.claim("a", runner="r2")
    queue.done(gone)
    queue.done(kept)
    assert sql.one("SELECT count(*) FROM afk_task_event WHERE task_id = %s", gone.id) == 2
    sql("DELETE FROM afk_task WHERE id = %s", gone.id)
    assert sql.one("SELECT count(*) FROM afk_task_event WHERE task_id = %s", gone.id) == 0
    assert sql.one("SELECT count(*) FROM afk_task_event WHERE task_id = %s", kept.id) == 2
    queue.forget_agent("a")  # (`afk demo`'s clean-up)
    assert sql.one("SELECT count(*) FROM afk_task_event") == 0
