"""A finish that frees a concurrency key's slot claims the next task of that
key in the same statement (in-process)."""

from __future__ import annotations

from watchdog import NewTask


def test_a_finish_that_frees_the_key_claims_the_next_task_of_it(queue):
    queue.enqueue("A", [NewTask("one", concurrency_key="k"), NewTask("two", concurrency_key="k")])
    first = queue.claim("A", runner="r")
    assert first is not None
    nxt = queue.done(first, claim_next=True)
    assert nxt is not None and nxt.title == "two"


def test_a_finish_that_claims_next_counts_its_own_task_out_of_the_key(queue, sql):
    """The finish frees its key's place in the statement that claims next: a
    runner going through tasks of one key (limit 1) takes them one after the
    other, while another key's full place still holds."""
    queue.enqueue("A", [NewTask(f"app-{i}", concurrency_key="repo:app") for i in range(3)])
    queue.enqueue("B", [NewTask("other", concurrency_key="repo:other")])
    queue.enqueue("A", [NewTask("other too", concurrency_key="repo:other")])
    held = queue.claim("B", runner="b")
    assert held is not None and held.title == "other"
    task = queue.claim("A", runner="a")
    titles = []
    while task is not None:
        titles.append(task.title)
        task = queue.done(task, claim_next=True)
    assert titles == ["app-0", "app-1", "app-2"]  # ("other too": its key is full)
    assert sql.one("SELECT running FROM afk_concurrency WHERE key = 'repo:app'") == 0
    assert sql.one("SELECT running FROM afk_concurrency WHERE key = 'repo:other'") == 1
