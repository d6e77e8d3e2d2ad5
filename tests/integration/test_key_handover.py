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
