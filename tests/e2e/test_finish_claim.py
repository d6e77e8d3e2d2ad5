"""Finish the held task and claim the runner's next one, in one statement:
`q.done(task, claim_next=True)`, `q.fail(task, error, claim_next=True)`,
`afk done --next`, `afk fail --next`."""

from __future__ import annotations

import json


def test_afk_done_next_prints_the_next_task_and_exits_3_when_empty(afk):
    afk.json("enqueue", "--agent", "A", "--title", "one")
    afk.json("enqueue", "--agent", "A", "--title", "two")
    task = afk.json("claim", "--agent", "A", "--runner", "r")
    nxt = afk.json("done", task["id"], "--token", str(task["token"]), "--next")
    assert nxt["title"] == "two" and nxt["state"] == "running" and nxt["lease_owner"] == "r"
    last = afk("fail", nxt["id"], "--token", str(nxt["token"]), "--error", "x", "--next")
    assert last.returncode == 3 and last.stdout == ""
    assert "nothing to claim" in last.stderr
    # the replay of a done by its own token: recognised, and nothing is left
    stale = afk("done", task["id"], "--token", str(task["token"]), "--next")
    assert stale.returncode == 3, stale.stderr
    status = json.loads(afk("status", "--agent", "A").stdout)
    assert status["running"] == 0
