"""The agent holds no keys (issue 40 item 1): `afk loop` gives its agent no
DSN, no password and no libpq variable, and the agent's `afk` reaches the
queue through the run's broker, which takes the run's task token as its only
credential. A real loop, a real database, and a stand-in agent that runs the
real `afk` from inside its run, as an agent does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from helpers import Afk

#: the stand-in agent: records its environment, then runs each command of
#: AGENT_TRIES (JSON: a list of argv lists, $ID and $TOKEN filled from its
#: environment, $OTHER from AGENT_OTHER) and records what each answered
AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys
    out = os.environ["AGENT_LOG"]
    fill = {"$ID": os.environ.get("AFK_TASK_ID", ""),
            "$TOKEN": os.environ.get("AFK_TASK_TOKEN", ""),
            "$OTHER": os.environ["AGENT_OTHER"]}
    said = []
    for argv in json.loads(os.environ["AGENT_TRIES"]):
        argv = [fill.get(a, a) for a in argv]
        stdin = None
        if argv[0] == "<":  # ["<", TEXT, afk args...]: TEXT on the command's stdin
            stdin, argv = argv[1], argv[2:]
        proc = subprocess.run([sys.executable, "-m", "watchdog.cli", *argv], input=stdin,
                              capture_output=True, text=True)
        said.append({"argv": argv, "exit": proc.returncode, "stdout": proc.stdout,
                     "stderr": proc.stderr})
    with open(out, "a") as f:
        f.write(json.dumps({"env": dict(os.environ), "said": said}) + "\\n")
    """
)


def run_loop(
    afk: Afk, tmp_path: Path, tries: list[list[str]], other: str, *loop_args: str
) -> list[dict[str, Any]]:
    agent, log = tmp_path / "agent.py", tmp_path / "agent.log"
    agent.write_text(AGENT)
    (tmp_path / "patch.json").write_text('{"from": "a file"}')
    env = {
        **afk.env,
        "AGENT_LOG": str(log),
        "AGENT_TRIES": json.dumps(tries),
        "AGENT_OTHER": other,
        "PGPASSWORD": "not-for-agents",
        "PGSERVICEFILE": str(tmp_path / "pg_service.conf"),
        "DATABASE_URL": "postgresql://someone:secret@db.invalid/app",
    }
    proc = subprocess.run(
        [
            *Afk.command("loop", "--agent", "b", "--max-tasks", "1", *loop_args, "--"),
            sys.executable,
            str(agent),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_agent_gets_no_secret_and_acts_only_on_its_own_task(afk, tmp_path, sql):
    (mine,) = afk.json("enqueue", "--agent", "b", "--title", "mine")["enqueued"]
    (other,) = afk.json("enqueue", "--agent", "x", "--title", "another's")["enqueued"]
    tries = [
        ["checkpoint", "--patch", '{"step": "through the broker"}'],
        ["checkpoint", "--patch", "@patch.json"],
        ["<", '{"from": "stdin"}', "checkpoint", "--patch", "@-"],
        ["show", "$ID"],
        ["status"],
        ["show", "$OTHER"],
        ["done", "$OTHER", "--token", "$TOKEN"],
        ["checkpoint", "--patch", "{}", "--token", "1"],
        ["done", "--next"],
        ["enqueue", "--agent", "b", "--title", "sneaked in"],
        ["retry", "$OTHER"],
        ["db", "stats"],
        ["migrate"],
        ["pause", "--agent", "x"],
        ["--dsn", afk.env["AFK_DSN"], "status"],
        ["done", "--result", '{"ok": true}'],
    ]
    (run,) = run_loop(afk, tmp_path, tries, other)
    env = run["env"]
    # no secret of afk's, libpq's or a database's reached the agent
    assert not [k for k in env if k.startswith("PG")], env
    assert "AFK_DSN" not in env and "AFK_CONFIG" not in env and "DATABASE_URL" not in env
    given = {k: v for k, v in env.items() if k != "AGENT_TRIES"}  # (the test's own)
    assert not [v for v in given.values() if afk.env["AFK_DSN"] in v or "someone:secret" in v]
    assert "not-for-agents" not in json.dumps(given)
    # what it has: its credential, and its broker
    assert env["AFK_TASK_ID"] == mine and env["AFK_BROKER"] == env["AFK_HOOK_SOCKET"]
    said = {" ".join(s["argv"]): s for s in run["said"]}

    def answered(prefix: str) -> dict[str, Any]:
        (found,) = [s for argv, s in said.items() if argv.startswith(prefix)]
        return found

    for ok in ("checkpoint --patch {\"step\"", "checkpoint --patch @patch.json",
               "checkpoint --patch @-", f"show {mine}", "status", "done --result"):  # fmt: skip
        assert answered(ok)["exit"] == 0, answered(ok)
    assert json.loads(answered(f"show {mine}")["stdout"])["id"] == mine
    assert set(json.loads(answered("status")["stdout"])) >= {"running"}
    for refused in (f"show {other}", f"done {other}", "done --next", "enqueue", "retry",
                    "db stats", "migrate", "pause --agent", "--dsn"):  # fmt: skip
        got = answered(refused)
        assert got["exit"] == 2, (refused, got)
        assert got["stderr"].count("\n") == 1 and got["stderr"].startswith("afk: "), got
        assert "Traceback" not in got["stderr"]
    assert answered("checkpoint --patch {} --token 1")["exit"] in (2, 4)
    # nothing of another's changed; nothing sneaked in; its own task is done
    assert afk.json("show", other)["state"] == "todo"
    assert not sql("SELECT 1 FROM afk_task WHERE title = 'sneaked in'")
    task = afk.json("show", mine)
    assert task["state"] == "done" and task["result"] == {"ok": True}
    assert task["checkpoint"]["step"] == "through the broker"
    assert task["checkpoint"]["from"] == "stdin"


def test_a_hook_inside_a_run_is_answered_by_its_broker(afk, tmp_path):
    """A command hook fired inside the run (no DSN, no service) is answered
    by the run's broker, with the loop's database: the file it names is in
    the task's checkpoint."""
    (mine,) = afk.json("enqueue", "--agent", "b", "--title", "hooked")["enqueued"]
    payload = {
        "session_id": "s-broker",
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(tmp_path / "made.py"), "content": "x"},
        "tool_response": {"success": True},
        "cwd": str(tmp_path),
    }
    tries = [["<", json.dumps(payload), "hook"]]
    (run,) = run_loop(afk, tmp_path, tries, mine)
    (hooked,) = run["said"]
    assert hooked["exit"] == 0 and "warning" not in hooked["stderr"], hooked
    task = afk.json("show", mine)
    assert str(tmp_path / "made.py") in task["checkpoint"].get("files_touched", []), task


def test_a_command_that_skips_permissions_needs_a_boundary(afk, tmp_path):
    """Issue 40 item 3: `afk loop` refuses an agent command that turns its
    harness's permission checks off, with one line and exit 2, before
    anything is claimed; --unsandboxed says the person knows."""
    (task,) = afk.json("enqueue", "--agent", "y", "--title", "t")["enqueued"]
    stand_in = [sys.executable, "-c", "import sys; sys.exit(0)"]
    for flags in (["--dangerously-skip-permissions"], ["--permission-mode", "bypassPermissions"]):
        refused = afk("loop", "--agent", "y", "--", *stand_in, *flags)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and flags[0] in refused.stderr, refused.stderr
        assert afk.json("show", task)["state"] == "todo"  # nothing claimed
    ran = afk("loop", "--agent", "y", "--unsandboxed", "--", *stand_in, "--yolo")
    assert ran.returncode == 0, ran.stderr
    assert afk.json("show", task)["state"] == "done"


def test_afk_inside_a_workspace_run_warns_of_nothing(afk, tmp_path):
    """Issue 42 item 2: an agent's `afk status` in a worktree logged an
    "unknown setting" warning for each variable the run gave it, and read
    the task's AFK_PORTS_PER_TASK as its own setting."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", *args], cwd=repo, env={**afk.env, **git}, check=True)
    afk.json("enqueue", "--agent", "b", "--title", "in a worktree")
    (run,) = run_loop(afk, tmp_path, [["status"], ["done"]], "none", "--repo", str(repo))
    given = {k for k in run["env"] if k.startswith("AFK_")}
    assert {"AFK_WORKTREE", "AFK_BRANCH", "AFK_BASE_SHA", "AFK_PORT", "AFK_PORTS_PER_TASK"} <= given
    status, done = run["said"]
    assert (status["exit"], status["stderr"]) == (0, ""), status
    assert (done["exit"], done["stderr"]) == (0, ""), done
