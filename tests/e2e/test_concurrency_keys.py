"""Concurrency keys (issue 32 item 3): at most a key's limit of its tasks run
at a time, across agents and runners; a task whose key is busy is passed
over, not waited on. The race is proven by racing real processes, checked
from the database while they run."""

from __future__ import annotations

import json
import multiprocessing as mp
import time

import pytest

from watchdog import NewTask, Queue

CTX = mp.get_context("spawn")
AGENTS = ["a0", "a1", "a2", "a3"]


def test_a_busy_key_is_passed_over_for_the_agents_next_task(afk):
    afk.json("enqueue", "--agent", "A", "--title", "migrate", "--concurrency-key", "repo:app")
    afk.json("enqueue", "--agent", "B", "--title", "deploy", "--concurrency-key", "repo:app")
    afk.json("enqueue", "--agent", "B", "--title", "docs")
    held = afk.json("claim", "--agent", "A")
    assert held["title"] == "migrate" and held["concurrency_key"] == "repo:app"
    # B's first task shares the key: passed over, B's next one taken
    assert afk.json("claim", "--agent", "B", "--runner", "b1")["title"] == "docs"
    nothing = afk("claim", "--agent", "B", "--runner", "b2")
    assert nothing.returncode == 3, nothing.stderr
    # R4: it says why, not that the backlog is empty
    assert json.loads(nothing.stdout)["held_until"] is not None
    assert nothing.stderr == (
        "afk: nothing to claim now: a task of 'B' is held by a lease (maybe a dead loop's) "
        "or waits for room under its concurrency key\n"
    )
    afk.json("done", held["id"], "--token", str(held["token"]))
    assert afk.json("claim", "--agent", "B", "--runner", "b2")["title"] == "deploy"


def test_the_first_limit_of_a_key_stands_and_allows_that_many(afk, sql):
    lines = "".join(
        json.dumps({"title": f"t{i}", "concurrency_key": "db:staging", "concurrency_limit": lim})
        + "\n"
        for i, lim in enumerate([2, 5, 5])
    )
    afk.json("enqueue", "--agent", "A", "--file", "-", input=lines)
    assert sql.one("SELECT lim FROM afk_concurrency WHERE key = 'db:staging'") == 2
    taken = [afk("claim", "--agent", "A", "--runner", f"r{i}") for i in range(3)]
    assert [p.returncode for p in taken] == [0, 0, 3]
    # a pause, a failure, a reclaim and a retry all give the key's room back
    one = json.loads(taken[0].stdout)
    afk.json("pause", one["id"], "--token", str(one["token"]))
    assert sql.one("SELECT running FROM afk_concurrency") == 1
    two = json.loads(taken[1].stdout)
    sql.expire(two["id"])
    afk.json("reclaim")
    assert sql.one("SELECT running FROM afk_concurrency") == 0


@pytest.mark.parametrize(
    "args, said",
    [
        (["--concurrency-key", " x"], "spaces at either end"),
        (["--concurrency-limit", "2"], "goes with a concurrency key"),
        (["--concurrency-key", "x", "--concurrency-limit", "0"], "from 1 to 10000"),
    ],
)
def test_bad_concurrency_input_is_one_line_and_changes_nothing(afk, sql, args, said):
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "A", "--title", "t", *args)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before
    assert sql.one("SELECT count(*) FROM afk_concurrency") == 0


def _work(dsn: str, n: int, start: mp.synchronize.Event, out: mp.Queue) -> None:
    """A runner: claims its agent's tasks until none is left, holding each a
    moment; half the runners finish-and-claim-next in one statement."""
    agent, runner = AGENTS[n % len(AGENTS)], f"r{n}"
    q = Queue.connect(dsn, pool_size=None)
    start.wait()
    done: list[str] = []
    deadline = time.monotonic() + 120
    task = None
    while time.monotonic() < deadline:
        if task is None:
            task = q.claim(agent, runner=runner, lease_seconds=300)
        if task is None:
            counts = q.status(agent)
            if counts["todo"] == 0 and counts["running"] == 0:
                break
            time.sleep(0.002)  # the key is busy: try again
            continue
        time.sleep(0.003)  # the task runs
        done.append(str(task.id))
        task = q.done(task, claim_next=True) if n % 2 else (q.done(task) and None)
    q.close()
    out.put(done)


def test_sixteen_claimers_of_four_agents_never_run_two_tasks_of_one_key(queue, dsn, sql):
    for agent in AGENTS:
        queue.enqueue(
            agent,
            [NewTask(f"{agent}-app-{i}", concurrency_key="repo:app") for i in range(10)]
            + [
                NewTask(f"{agent}-db-{i}", concurrency_key="db:staging", concurrency_limit=2)
                for i in range(6)
            ]
            + [NewTask(f"{agent}-free-{i}") for i in range(4)],
        )
    start, out = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_work, args=(dsn, n, start, out)) for n in range(16)]
    for p in procs:
        p.start()
    start.set()
    most: dict[str, int] = {"repo:app": 0, "db:staging": 0}
    while any(p.is_alive() for p in procs) and out.qsize() < len(procs):
        for row in sql(
            "SELECT concurrency_key AS k, count(*) AS n FROM afk_task"
            " WHERE state = 'running' AND concurrency_key IS NOT NULL GROUP BY 1"
        ):
            most[row["k"]] = max(most[row["k"]], row["n"])
    results = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    finished = [t for got in results for t in got]
    assert len(finished) == 80 and len(set(finished)) == 80
    assert sum(1 for got in results if got) >= 2, "the race had only one participant"
    assert most["repo:app"] == 1, most
    assert 1 <= most["db:staging"] <= 2, most
    assert sql.one("SELECT count(*) FROM afk_task WHERE state = 'done'") == 80
    assert sql.one("SELECT sum(running) FROM afk_concurrency") == 0
