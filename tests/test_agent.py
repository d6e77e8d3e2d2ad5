"""Agent integration: Claude Code hook settings, the Stop hook (and why it
builds no SQL from its inputs), `afk once`, the resume brief, the examples."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from watchdog import NewTask, embedded

ROOT = Path(__file__).parent.parent


def claim(afk, agent="A", runner="sess-1"):
    task = afk.json("claim", "--agent", agent, "--runner", runner)
    return task["id"], str(task["token"])


def test_hooks_claude_prints_settings_for_stop_and_session_end(afk):
    settings = afk.json("hooks", "claude")
    assert set(settings["hooks"]) == {"Stop", "SessionEnd"}
    for groups in settings["hooks"].values():
        (hook,) = groups[0]["hooks"]
        assert hook["type"] == "command" and hook["command"].endswith(" hook stop")


def test_hooks_install_merges_without_touching_other_settings(afk, tmp_path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    other = {"model": "x", "permissions": {"allow": ["Bash(ls)"]},
             "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                       "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                                     "command": "check"}]}]}}
    path.write_text(json.dumps(other))
    for _ in range(2):  # idempotent
        assert afk("hooks", "claude", "--install", str(path)).returncode == 0
    merged = json.loads(path.read_text())
    assert merged["model"] == "x" and merged["permissions"] == other["permissions"]
    assert merged["hooks"]["PreToolUse"] == other["hooks"]["PreToolUse"]
    stop = [h["command"] for g in merged["hooks"]["Stop"] for h in g["hooks"]]
    assert stop[0] == "notify-send done" and len(stop) == 2
    assert len(merged["hooks"]["SessionEnd"]) == 1


def test_hooks_install_refuses_a_broken_settings_file(afk, tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    proc = afk("hooks", "claude", "--install", str(path))
    assert proc.returncode == 2 and path.read_text() == "{not json"


def test_stop_hook_pauses_only_the_rows_of_its_session(afk, queue):
    queue.enqueue("A", [NewTask(f"t{i}") for i in range(3)])
    mine = queue.claim("A", runner="sess-1")
    theirs = queue.claim("A", runner="sess-2")
    proc = afk("hook", "stop", input=json.dumps({"session_id": "sess-1",
                                                 "hook_event_name": "Stop"}))
    assert proc.returncode == 0 and proc.stdout == ""
    assert queue.show(mine.id)[0].state == "paused"
    assert queue.show(theirs.id)[0].state == "running"
    assert queue.show(mine.id)[1][-1]["reason"] == "stop hook"
    assert queue.show(mine.id)[0].attempts == 0  # a Stop is a pause: no attempt spent
    # AFK_RUNNER_ID wins over the session id
    afk("hook", "stop", input='{"session_id": "sess-1"}', env={"AFK_RUNNER_ID": "sess-2"})
    assert queue.show(theirs.id)[0].state == "paused"


@pytest.mark.parametrize("stdin", ["", "not json", "[1,2]", '{"session_id": 5}'])
def test_stop_hook_with_no_usable_input_exits_0_and_changes_nothing(afk, queue, sql, stdin):
    queue.enqueue("A", [NewTask("t")])
    queue.claim("A", runner="sess-1")
    before = sql.fingerprint()
    proc = afk("hook", "stop", input=stdin)
    assert proc.returncode == 0 and proc.stdout == ""
    assert sql.fingerprint() == before


def test_stop_hook_exits_0_quickly_with_the_database_down(afk):
    started = time.monotonic()
    proc = afk("hook", "stop", input='{"session_id": "s"}',
               env={"AFK_DSN": "postgresql://afk:pw@127.0.0.1:1/afk"})
    assert proc.returncode == 0
    assert "warning" in proc.stderr and "pw@" not in proc.stderr
    assert time.monotonic() - started < 5


ORIGINAL_HOOK = """psql "$AFK_DSN" -v ON_ERROR_STOP=1 -q -c \
"UPDATE afk_task SET state='paused', lease_until=NULL \
 WHERE agent_id='$AFK_AGENT_ID' AND state='running'" """


def test_the_original_psql_hook_is_injectable_and_ours_is_not(afk, queue, sql, dsn):
    evil = "me' OR agent_id <> 'me"
    queue.enqueue("me", [NewTask("mine")])
    queue.enqueue("victim", [NewTask("theirs")])
    queue.claim("me", runner="sess-1")
    victim = queue.claim("victim", runner="other-session")
    psql_dir = str(embedded._bin_dir())
    env = {**os.environ, "AFK_DSN": dsn, "AFK_AGENT_ID": evil,
           "PATH": psql_dir + os.pathsep + os.environ["PATH"]}
    subprocess.run(["bash", "-c", ORIGINAL_HOOK], env=env, check=True, timeout=30)
    # the interpolated agent id rewrote the WHERE clause: another agent's row was paused
    assert sql.one("SELECT state::text FROM afk_task WHERE id = %s", victim.id) == "paused"

    sql("UPDATE afk_task SET state = 'running', lease_until = now() + interval '1 hour'")
    before = sql.fingerprint()
    proc = afk("hook", "stop", input='{"session_id": "sess-1"}', env={"AFK_AGENT_ID": evil})
    assert proc.returncode == 0
    assert sql.fingerprint() == before  # the agent id is a value, matching no row


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
    script = f'[ -e {flag} ] && echo ok && exit 0; touch {flag}; echo failing; exit 7'
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
    for expected in ("# Resume: Fix login", '"issue": 12', "`auth.py`", "`repro`",
                     "`open-pr`", '"pr": 9', "tests timed out", "attempt 2 of 5"):
        assert expected in brief, expected


def stand_in_agent(tmp_path: Path) -> Path:
    """An agent command for the examples: logs its prompt; fails on 'broken'."""
    agent = tmp_path / "agent.sh"
    agent.write_text(f'#!/bin/sh\necho "$1" | head -n 1 >> {tmp_path}/prompts\n'
                     'case "$1" in *broken*) exit 9;; esac\n')
    agent.chmod(agent.stat().st_mode | stat.S_IEXEC)
    return agent


def test_the_ralph_loop_example(afk, queue, tmp_path, dsn):
    queue.enqueue("R", [NewTask("one"), NewTask("broken two", max_attempts=1), NewTask("three")])
    env = {**os.environ, "AFK_DSN": dsn, "AFK_AGENT_ID": "R",
           "AGENT_CMD": str(stand_in_agent(tmp_path)),
           "AFK": f"{sys.executable} -m watchdog.cli",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]}
    proc = subprocess.run(["bash", str(ROOT / "examples" / "ralph.sh")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "prompts").read_text().splitlines() == ["one", "broken two", "three"]
    assert queue.status("R") == {"todo": 0, "running": 0, "paused": 0, "done": 2, "failed": 1}


def test_the_python_worker_example(queue, tmp_path, dsn):
    queue.enqueue("W", [NewTask(f"t{i}") for i in range(3)])
    # a previous worker crashed after two steps of t0
    crashed = queue.claim("W", runner="old")
    queue.checkpoint(crashed, {"steps_done": ["reproduce", "fix"]})
    queue.pause("W", runner="old")
    env = {**os.environ, "AFK_DSN": dsn, "AFK_AGENT_ID": "W",
           "COMMENTS_FILE": str(tmp_path / "comments"),
           "AGENT_CMD": str(stand_in_agent(tmp_path))}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "worker.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert queue.status("W")["done"] == 3
    prompts = (tmp_path / "prompts").read_text().splitlines()
    assert prompts.count("t0: test") == 1 and "t0: fix" not in prompts
    assert len((tmp_path / "comments").read_text().splitlines()) == 3
