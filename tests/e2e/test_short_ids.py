"""Issue 53 item 3 (P32): `afk review` prints a task's short id (8ce4f0f5)
and `afk show`, `afk restore` and the rest refused it. Every command that
takes a task id takes the short one, resolved before anything else; one
that names several tasks, or none, is one line and exit 2, and changes
nothing."""

from __future__ import annotations

import json

import pytest

SHORT = 8


def claimed(afk) -> tuple[str, int]:
    (task,) = afk.json("enqueue", "--agent", "a", "--title", "port the parser")["enqueued"]
    got = afk.json("claim", "--agent", "a")
    assert got["id"] == task
    return task, got["token"]


def test_a_task_goes_its_whole_way_by_its_short_id(afk):
    task, token = claimed(afk)
    short = task[:SHORT]
    for argv in (
        ["checkpoint", short, "--token", str(token), "--patch", '{"step": 2}'],
        ["heartbeat", short, "--token", str(token)],
        ["ask", "which branch?", short, "--token", str(token)],
    ):
        done = afk(*argv)
        assert done.returncode == 0, (argv, done.stderr)
    shown = afk.json("show", short)
    assert shown["id"] == task and shown["checkpoint"]["step"] == 2
    assert afk.json("show", task.upper()[:13])["id"] == task  # (any case, with its dash)
    done = afk("answer", short, "main")
    assert done.returncode == 0, done.stderr
    assert afk("resume-brief", short).returncode == 0
    token = afk.json("claim", "--agent", "a")["token"]
    assert afk("done", short, "--token", str(token)).returncode == 0
    assert afk.json("show", short)["state"] == "done"
    (other,) = afk.json("enqueue", "--agent", "a", "--title", "another")["enqueued"]
    other = {"id": other}
    assert afk.json("cancel", other["id"][:SHORT])["cancelled"] == [other["id"]]
    assert afk.json("retry", other["id"][:SHORT])["retried"] == [other["id"]]


@pytest.mark.parametrize("command", ["restore", "trust"])
def test_a_short_id_gets_what_its_whole_id_gets(afk, command):
    """Where the whole id is refused for the task's own reason (no saved
    worktree, nothing to trust), the short one is refused the same way."""
    task, _ = claimed(afk)
    whole, short = afk(command, task), afk(command, task[:SHORT])
    assert (short.returncode, short.stderr) == (whole.returncode, whole.stderr)
    assert task in whole.stderr or whole.returncode == 0


def test_a_short_id_of_several_tasks_names_them_and_changes_nothing(afk, sql):
    ids = ["abcdef12-0000-4000-8000-000000000001", "abcdef12-0000-4000-8000-100000000002"]
    for n, task in enumerate(ids):
        sql("INSERT INTO afk_task (id, agent_id, ordinal, title) VALUES (%s, 'a', %s, 't')",
            task, n)  # fmt: skip
    before = sql.fingerprint()
    for argv in (["show", "abcdef12"], ["cancel", "abcdef12"], ["retry", ids[0], "abcdef12"]):
        done = afk(*argv)
        assert done.returncode == 2, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and all(t in lines[0] for t in ids), lines
        assert "Traceback" not in done.stderr
    assert sql.fingerprint() == before
    # one more digit names one of them
    assert afk.json("show", "abcdef12-0000-4000-8000-0")["id"] == ids[0]


@pytest.mark.parametrize("typed", ["0123abcd", "8ce4f0f", "not-an-id", "8ce4f0f5-zz"])
def test_an_id_that_names_no_task_is_one_line(afk, sql, typed):
    claimed(afk)
    before = sql.fingerprint()
    for argv in (["show", typed], ["cancel", typed], ["done", typed, "--token", "1"]):
        done = afk(*argv)
        assert done.returncode == 2, (argv, done)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert json.dumps(typed)[1:-1] in done.stderr
    assert sql.fingerprint() == before
