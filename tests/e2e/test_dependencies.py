"""Dependencies (issue 32 item 1): a task waits, blocked, until the tasks it
names are done; the finish that completes the last one makes it claimable
in the same transaction (no watchdog runs in these tests); a failure does
what the dependent's --on-dep-failure says; a cycle is refused."""

from __future__ import annotations

import json

import pytest


def enqueue(afk, *args: str) -> str:
    (task_id,) = afk.json("enqueue", "--agent", "A", *args)["enqueued"]
    return str(task_id)


def finish(afk, runner: str, *, error: str | None = None) -> dict:
    task = afk.json("claim", "--agent", "A", "--runner", runner)
    if error is None:
        afk.json("done", task["id"], "--token", str(task["token"]))
    else:
        afk.json("fail", task["id"], "--token", str(task["token"]), "--error", error)
    return task


def test_b_after_a_is_blocked_then_claimable_by_the_next_claim_after_a_is_done(afk, sql):
    a = enqueue(afk, "--title", "migrate the schema", "--key", "schema")
    b = enqueue(afk, "--title", "update the api", "--after", "schema")
    c = enqueue(afk, "--title", "update the client", "--after", b, "--after", a)
    assert afk.json("show", b)["state"] == "blocked"
    assert afk.json("status", "--agent", "A")["blocked"] == 2
    first = afk.json("claim", "--agent", "A", "--runner", "r1")
    assert first["id"] == a
    nothing = afk("claim", "--agent", "A", "--runner", "r2")
    assert nothing.returncode == 3  # b and c are blocked
    afk.json("done", a, "--token", str(first["token"]))
    assert afk.json("show", b)["state"] == "todo"  # in the finish's own transaction
    assert afk.json("show", c)["state"] == "blocked"  # c waits for b too
    assert afk.json("claim", "--agent", "A", "--runner", "r2")["id"] == b
    reasons = [h["reason"] for h in afk.json("show", b)["history"]]
    assert reasons[:2] == ["unblocked", "claimed"]
    shown = afk.json("show", c)
    assert {d["ref"]: d["state"] for d in shown["after"]} == {b: "running", a: "done"}


def test_two_agents_share_a_chain(afk):
    a = enqueue(afk, "--title", "A1", "--key", "chain-1")
    (b,) = afk.json("enqueue", "--agent", "B", "--title", "B1", "--after", "chain-1")["enqueued"]
    assert afk("claim", "--agent", "B").returncode == 3
    task = afk.json("claim", "--agent", "A")
    afk.json("done", a, "--token", str(task["token"]))
    assert afk.json("claim", "--agent", "B")["id"] == b


def test_a_forward_reference_by_key_waits_for_the_task_to_be_enqueued_and_done(afk):
    b = enqueue(afk, "--title", "after the deploy", "--after", "deploy-2am")
    assert afk.json("show", b)["state"] == "blocked"
    a = enqueue(afk, "--title", "deploy", "--key", "deploy-2am")
    assert afk.json("claim", "--agent", "A", "--runner", "r")["id"] == a
    afk.json("done", a, "--token", str(afk.json("show", a)["token"]))
    assert afk.json("show", b)["state"] == "todo"


@pytest.mark.parametrize(
    "policy, state, claimable",
    [("cancel", "failed", False), ("run", "todo", True), ("hold", "blocked", False)],
)
def test_a_failed_dependency_does_what_the_dependent_says(afk, policy, state, claimable):
    a = enqueue(afk, "--title", "root", "--key", "root", "--max-attempts", "1")
    b = enqueue(afk, "--title", "dependent", "--after", "root", "--on-dep-failure", policy)
    c = enqueue(afk, "--title", "grandchild", "--after", b)
    finish(afk, "r", error="boom")
    shown = afk.json("show", b)
    assert shown["state"] == state
    if policy == "cancel":
        assert shown["last_error"] == f"dependency failed: {a} root"
        # down the chain, each under its own failed dependency
        assert afk.json("show", c)["last_error"] == f"dependency failed: {b} dependent"
    took = afk("claim", "--agent", "A", "--runner", "r2")
    assert (took.returncode == 0) == claimable, took.stderr
    if policy == "hold":  # a person retries the root: the chain goes on
        afk.json("retry", a)
        finish(afk, "r3")
        assert afk.json("show", b)["state"] == "todo"


@pytest.mark.parametrize(
    "lines, said",
    [
        ([{"title": "x", "key": "x", "after": ["x"]}], "cycle: x -> x"),
        (
            [
                {"title": "a", "key": "a", "after": ["b"]},
                {"title": "b", "key": "b", "after": ["a"]},
            ],
            "cycle: a -> b -> a",
        ),
    ],
)
def test_a_cycle_in_a_file_is_refused_and_nothing_is_enqueued(afk, sql, lines, said):
    before = sql.fingerprint()
    body = "".join(json.dumps(line) + "\n" for line in lines)
    proc = afk("enqueue", "--agent", "A", "--file", "-", input=body)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


def test_a_cycle_through_tasks_enqueued_before_is_refused(afk, sql):
    # b waits for a key no task has yet; the task of that key waits for b
    b = enqueue(afk, "--title", "b", "--key", "b", "--after", "later")
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "A", "--title", "later", "--key", "later", "--after", b)
    assert proc.returncode == 2, proc.stderr
    assert "cycle: later -> b -> later" in proc.stderr
    assert sql.fingerprint() == before


@pytest.mark.parametrize(
    "args, said",
    [
        (["--after", "00000000-0000-0000-0000-000000000000"], "no task has"),
        (["--on-dep-failure", "run"], "goes with after"),
        (["--after", "k", "--after", "k"], "twice"),
    ],
)
def test_bad_dependencies_are_one_line_and_change_nothing(afk, sql, args, said):
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "A", "--title", "t", *args)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


def _finish_at_once(dsn: str, task_ids: list[str], go, out) -> None:
    from watchdog import Queue

    q = Queue.connect(dsn, pool_size=None)
    held = []
    for task_id in task_ids:
        task, _ = q.show(task_id)
        held.append(task)
    go.wait()
    for task in held:
        q.done(task)
    q.close()
    out.put(len(held))


def test_two_dependencies_finishing_at_once_unblock_their_dependent(queue, dsn, sql):
    """Each pair's finishes race in two processes: whichever commits last
    must see the other's, or the dependent would wait for ever."""
    import multiprocessing as mp

    from watchdog import NewTask

    ctx = mp.get_context("spawn")
    pairs = 20
    # each finish commits 50 ms after its triggers ran (a trigger named to
    # fire after afk_task_state_changed): both halves of a pair check their
    # dependent before either commits, the window the dependent's lock closes
    sql(
        "CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_sleep(0.05); RETURN NULL; END $$"
    )
    sql(
        "CREATE TRIGGER zz_test_slow_commit AFTER UPDATE OF state ON afk_task FOR EACH ROW"
        " WHEN (NEW.state = 'done') EXECUTE FUNCTION test_slow_commit()"
    )
    for i in range(pairs):
        queue.enqueue("A", [NewTask(f"a{i}", key=f"a{i}"), NewTask(f"b{i}", key=f"b{i}")])
        queue.enqueue("A", [NewTask(f"d{i}", after=[f"a{i}", f"b{i}"])])
    left, right = [], []
    for i in range(pairs):
        for n, side in enumerate((left, right)):
            task = queue.claim("A", runner=f"r{i}-{n}", lease_seconds=300)
            assert task is not None and task.title[0] in "ab"
            side.append(str(task.id))
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_finish_at_once, args=(dsn, side, go, out)) for side in (left, right)
    ]
    for p in procs:
        p.start()
    go.set()
    assert [out.get(timeout=120) for _ in procs] == [pairs, pairs]
    for p in procs:
        p.join(timeout=30)
    states = sql("SELECT title, state::text AS s FROM afk_task ORDER BY ordinal")
    assert {r["title"]: r["s"] for r in states if r["title"][0] == "d"} == {
        f"d{i}": "todo" for i in range(pairs)
    }, states


def test_the_digest_lists_a_cancelled_chain_under_its_root_failure(afk):
    root = enqueue(afk, "--title", "root", "--key", "root", "--max-attempts", "1")
    child = enqueue(afk, "--title", "child", "--after", "root")
    enqueue(afk, "--title", "grandchild", "--after", child)
    enqueue(afk, "--title", "waiting", "--after", "a-key-no-task-has")
    finish(afk, "r", error="ENOSPC: no space left on device")
    text = afk("digest", "--dry-run", "--format", "text")
    assert text.returncode == 0, text.stderr
    heads = [line for line in text.stdout.splitlines() if line.startswith("== ")]
    assert heads == ["== A: 1 x ENOSPC: no space left on device"], text.stdout
    assert "cancelled with it (2, waiting for it): child, grandchild" in text.stdout
    assert ", blocked 1." in text.stdout
    hook = json.loads(afk("digest", "--dry-run", "--format", "webhook").stdout)
    ((task,),) = [g["tasks"] for g in hook["groups"]]
    assert task["id"] == root and [c["title"] for c in task["cancelled"]] == [
        "child",
        "grandchild",
    ]
    assert hook["totals"]["blocked"] == 1


def test_a_retried_dependent_waits_blocked_for_its_failed_dependency(afk):
    """P13: `afk retry` of a dependent cancelled by its failed dependency
    sent it to todo while the dependency was still failed, and retrying both
    made both claimable at once. The dependent goes back to blocked, and is
    claimable once its dependency is done."""
    parent = enqueue(afk, "--title", "parent", "--key", "p", "--max-attempts", "1")
    child = enqueue(afk, "--title", "child", "--after", "p")
    finish(afk, "r1", error="boom")
    assert afk.json("show", child)["state"] == "failed"
    afk.json("retry", child)
    assert afk.json("show", child)["state"] == "blocked"  # its dependency is still failed
    afk.json("retry", parent)
    assert afk.json("status", "--agent", "A")["todo"] == 1
    assert afk("claim", "--agent", "A", "--runner", "two").returncode == 0  # the parent only
    assert afk("claim", "--agent", "A", "--runner", "three").returncode == 3
    assert afk.json("show", child)["state"] == "blocked"
