"""Agent integration: `afk once`, the resume brief, the examples with a plain
agent command. (The hooks: test_hooks.py; the harness end to end: test_harness.py.)"""

from __future__ import annotations

from helpers.examples import check_ralph_example, check_worker_example

from watchdog import NewTask


def claim(afk, agent="A", runner="sess-1"):
    task = afk.json("claim", "--agent", agent, "--runner", runner)
    return task["id"], str(task["token"])


def test_once_runs_a_command_once_and_replays_it(afk, tmp_path):
    afk.json("enqueue", "--agent", "A", "--title", "t", "--key", "k1")
    task_id, token = claim(afk)
    log = tmp_path / "calls"
    script = f'echo "$AFK_EFFECT_KEY" >> {log}; echo "comment 42"'
    first = afk("once", task_id, "--token", token, "--name", "comment", "--", "sh", "-c", script)
    again = afk("once", task_id, "--token", token, "--name", "comment", "--", "sh", "-c", script)
    assert first.returncode == again.returncode == 0
    assert first.stdout == again.stdout == "comment 42\n"
    assert log.read_text() == "k1:comment\n"


def test_once_does_not_record_a_failing_command(afk, tmp_path):
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task_id, token = claim(afk)
    flag = tmp_path / "flag"
    script = f"[ -e {flag} ] && echo ok && exit 0; touch {flag}; echo failing; exit 7"
    failed = afk("once", task_id, "--token", token, "--name", "x", "--", "sh", "-c", script)
    assert (failed.returncode, failed.stdout) == (7, "failing\n")
    ok = afk("once", task_id, "--token", token, "--name", "x", "--", "sh", "-c", script)
    assert (ok.returncode, ok.stdout) == (0, "ok\n")


def test_once_with_a_lost_lease_does_not_run(afk, sql, tmp_path):
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task_id, token = claim(afk)
    sql.expire(task_id)
    afk.json("reclaim")
    marker = tmp_path / "ran"
    proc = afk("once", task_id, "--token", token, "--name", "x", "--", "touch", str(marker))
    assert proc.returncode == 4 and not marker.exists()


def test_resume_brief_tells_the_next_session_what_not_to_redo(afk, queue, sql):
    queue.enqueue("A", [NewTask("Fix login", {"issue": 12}, key="k")])
    task = queue.claim("A", runner="s1")
    queue.checkpoint(task, {"files": ["auth.py", "test_auth.py"], "steps_done": ["repro"]})
    queue.effect(task, "open-pr", lambda ctx: {"pr": 9})
    queue.fail(task, "tests timed out")
    sql("UPDATE afk_task SET run_after = NULL")
    queue.claim("A", runner="s2")
    brief = afk("resume-brief", str(task.id)).stdout
    for expected in (
        "# Resume: Fix login",
        '"issue": 12',
        "`auth.py`",
        "`repro`",
        "`open-pr`",
        '"pr": 9',
        "tests timed out",
        "attempt 2 of 5",
    ):
        assert expected in brief, expected


def test_the_ralph_loop_example(queue, tmp_path, dsn):
    check_ralph_example(queue, tmp_path, dsn)


def test_the_python_worker_example(queue, tmp_path, dsn):
    check_worker_example(queue, tmp_path, dsn)
