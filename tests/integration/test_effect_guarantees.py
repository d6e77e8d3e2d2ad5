"""The effect ledger's guarantees in-process (threads against one real
database): an effect started under a token is not started again, and a
call waiting on a failed start takes it over."""

from __future__ import annotations

import time

import pytest

from watchdog import NewTask


def test_an_effect_started_under_the_same_token_is_not_started_again(queue, sql):
    """The API's effect(): a second call while the first runs waits and
    replays (threads racing on one task and token)."""
    import threading

    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="r")
    calls, results = [], []
    started = threading.Event()

    def slow(ctx):
        calls.append(1)
        started.set()
        time.sleep(1.5)
        return {"n": len(calls)}

    first = threading.Thread(target=lambda: results.append(queue.effect(task, "e", slow)))
    first.start()
    assert started.wait(30)
    results.append(queue.effect(task, "e", slow))
    first.join()
    assert calls == [1] and results == [{"n": 1}, {"n": 1}]
    assert sql.one("SELECT runs FROM afk_task_effect") == 1


def test_a_call_waiting_on_a_failed_effect_starts_it_itself(queue):
    """The first call's effect fails (it did not happen): the call that waited
    on it runs it, once."""
    import threading

    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="r")
    calls, started, results = [], threading.Event(), []

    def fails_first(ctx):
        calls.append(1)
        if len(calls) == 1:
            started.set()
            time.sleep(1)
            raise RuntimeError("remote said 500")
        return "ok"

    def first():
        with pytest.raises(RuntimeError):
            queue.effect(task, "e", fails_first)

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(30)
    results.append(queue.effect(task, "e", fails_first))
    thread.join()
    assert results == ["ok"] and len(calls) == 2
