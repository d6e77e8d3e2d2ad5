"""The boundary holds (issue 49): from inside a run, the agent's `afk`
reaches its own task and nothing else, however a command is spelled, and
what the agent's afk runs (`afk once`) runs on the agent's side. A real
loop, a real database, and a stand-in agent that runs the real `afk` from
inside its run, as an attacker's agent would, and writes raw requests to its
broker's socket past its `afk`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import Afk

#: the stand-in agent: runs each try of AGENT_TRIES (JSON list) and records
#: what it answered. A try is {"afk": [args]} (the afk on PATH, as `python -m
#: watchdog.cli`; "$ID", "$TOKEN", "$OTHER", "$OTHER_TOKEN" filled in),
#: {"raw": {header}, "payload": TEXT} (straight to AFK_BROKER), or
#: {"stdin": TEXT, "afk": [...]}.
AGENT = textwrap.dedent(
    """
    import json, os, socket, subprocess, sys
    fill = {"$ID": os.environ.get("AFK_TASK_ID", ""),
            "$TOKEN": os.environ.get("AFK_TASK_TOKEN", ""),
            "$OTHER": os.environ["AGENT_OTHER"],
            "$OTHER_TOKEN": os.environ.get("AGENT_OTHER_TOKEN", "")}

    def filled(v):
        if isinstance(v, str):
            for k, x in sorted(fill.items(), key=lambda kx: -len(kx[0])):
                v = v.replace(k, x)
            return v
        if isinstance(v, list):
            return [filled(x) for x in v]
        if isinstance(v, dict):
            return {k: filled(x) for k, x in v.items()}
        return v

    said = []
    for t in json.loads(os.environ["AGENT_TRIES"]):
        t = filled(t)
        if "raw" in t:
            s = socket.socket(socket.AF_UNIX)
            s.connect(os.environ["AFK_BROKER"])
            s.sendall(json.dumps(t["raw"]).encode() + b"\\n" + t.get("payload", "").encode())
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            said.append({"try": t, "answer": json.loads(got or b"{}")})
            continue
        proc = subprocess.Popen([sys.executable, "-m", "watchdog.cli", *t["afk"]],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(t.get("stdin"))
        said.append({"try": t, "pid": proc.pid, "exit": proc.returncode,
                     "stdout": out, "stderr": err})
    with open(os.environ["AGENT_LOG"], "a") as f:
        f.write(json.dumps({"env": dict(os.environ), "said": said}) + "\\n")
    """
)


def run_loop(
    afk: Afk, tmp_path: Path, tries: list[dict[str, Any]], other: str, *loop_args: str, **env: str
) -> list[dict[str, Any]]:
    agent, log = tmp_path / "agent.py", tmp_path / "agent.log"
    agent.write_text(AGENT)
    given = {
        **afk.env,
        "AGENT_LOG": str(log),
        "AGENT_TRIES": json.dumps(tries),
        "AGENT_OTHER": other,
        **env,
    }
    proc = subprocess.run(
        [
            *Afk.command("loop", "--agent", "b", "--max-tasks", "1", *loop_args, "--"),
            sys.executable,
            str(agent),
        ],
        env=given,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode in (0, 5), proc.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def state_of(sql: Any) -> list[Any]:
    """Every row a command of a person's could change."""
    return [
        sql(
            "SELECT id, state, title, checkpoint, spec, attempts, lease_token"
            " FROM afk_task ORDER BY id"
        ),
        sql("SELECT * FROM afk_approval ORDER BY id"),
        sql("SELECT name FROM afk_web_login ORDER BY name"),
        sql("SELECT account, kind, until, cleared_at FROM afk_account_park ORDER BY id"),
        sql("SELECT name FROM afk_profile ORDER BY name"),
    ]


#: every spelling of the person's global options, before or after the command
GLOBALS = [
    ["--conf", "done", "enqueue", "--agent", "victim", "--title", "INJECTED"],
    ["--co", "show", "approve", "1"],
    ["--c", "show", "trust", "$OTHER"],
    ["--config=x", "status"],
    ["--config", "x", "status"],
    ["--dsn", "postgresql:///afk", "status"],
    ["--ds=postgresql:///afk", "status"],
    ["--dsn=postgresql:///afk", "show", "$OTHER"],
    ["status", "--conf", "x"],
    ["status", "--dsn", "postgresql:///afk"],
    ["checkpoint", "--patch", "{}", "--config=x"],
]
#: every command of a person's or an operator's
OPERATORS = [
    ["approve", "1"],
    ["deny", "1", "--note", "no"],
    ["approvals", "--all"],
    ["trust", "$OTHER"],
    ["web", "token", "--name", "evil"],
    ["profile", "add", "evil", "--", "sh"],
    ["profile", "list"],
    ["enqueue", "--agent", "victim", "--title", "INJECTED"],
    ["retry", "$OTHER"],
    ["cancel", "$OTHER"],
    ["answer", "$OTHER", "yes"],
    ["claim", "--agent", "victim"],
    ["limit", "--account", "victim", "--until", "2099-01-01T00:00:00Z"],
    ["limit"],
    ["hooks", "claude", "--install", "x.json"],
    ["db", "status"],
    ["migrate"],
    ["loop", "--agent", "victim", "--", "sh"],
    ["watchdog", "run"],
    ["reclaim"],
    ["dead"],
    ["review"],
    ["gc", "--force"],
    ["restore", "$OTHER"],
    ["import", "prd", "x.json"],
    ["export", "prd", "x.json"],
    ["digest", "send"],
    ["doctor"],
    ["questions"],
    ["loops"],
    ["demo"],
]
#: an agent's own commands reaching past its task, or spelled short
REACHING = [
    ["show", "$OTHER"],
    ["resume-brief", "$OTHER"],
    ["checkpoint", "$OTHER", "--patch", "{}", "--token", "$OTHER_TOKEN"],
    ["done", "$OTHER", "--token", "$OTHER_TOKEN"],
    ["pause", "$OTHER", "--token", "$OTHER_TOKEN"],
    ["pause", "--agent", "victim"],
    ["pause", "--runner", "r"],
    ["status", "--agent", "victim"],
    ["done", "--next"],
    ["fail", "--error", "x", "--next"],
    ["checkpoint", "--pat", "{}"],  # abbreviations argparse would take
    ["done", "--res", "{}"],
    ["done", "--tok", "1"],
    ["ask", "why?", "$OTHER"],
    ["once", "$OTHER", "--token", "$OTHER_TOKEN", "--name", "x", "--", "true"],
]


@pytest.mark.parametrize(
    ("family", "tries"), [("globals", GLOBALS), ("operators", OPERATORS), ("reaching", REACHING)]
)
def test_every_spelling_and_every_command_past_its_task_is_refused(
    afk, tmp_path, sql, family, tries
):
    """P1: `afk --conf done enqueue` ran any command with the loop's
    database; every global option in every spelling, every command of a
    person's, and every own command that reaches another task is refused with
    one line and exit 2 (4 for another token), and nothing changes."""
    (other,) = afk.json("enqueue", "--agent", "victim", "--title", "victim's")["enqueued"]
    claimed = afk.json("claim", "--agent", "victim")
    (mine,) = afk.json("enqueue", "--agent", "b", "--title", "mine")["enqueued"]
    for name in ("done", "show", "x"):  # empty settings files, as the agent would write
        (tmp_path / name).write_text("")
    before = state_of(sql)
    (run,) = run_loop(
        afk,
        tmp_path,
        [{"afk": argv} for argv in tries],
        other,
        AGENT_OTHER_TOKEN=str(claimed["token"]),
    )
    assert len(run["said"]) == len(tries)
    for said in run["said"]:
        assert said["exit"] in (2, 4), said
        assert said["stderr"].count("\n") == 1 and said["stderr"].startswith("afk: "), said
        assert "Traceback" not in said["stderr"] and said["stdout"] == "", said
    after = state_of(sql)
    # each is kept on the run: what the agent tried
    (kept,) = afk.json("show", mine)["runs"]
    assert len(kept["refused"]) == len(tries), kept["refused"]
    # the only change: its own task claimed by the loop and given back
    assert [r for r in after[0] if str(r["id"]) != mine] == [
        r for r in before[0] if str(r["id"]) != mine
    ]
    assert after[1:] == before[1:]
    assert not (tmp_path / "x.json").exists()


def test_its_own_commands_work_and_a_large_patch_is_no_argv(afk, tmp_path):
    """Its own checkpoint (a 200 KB patch from a file and from stdin: no
    argv limit in the broker), heartbeat, show, status, resume-brief and done
    work through the broker."""
    (mine,) = afk.json("enqueue", "--agent", "b", "--title", "mine")["enqueued"]
    big = {"notes": "x" * 200_000}
    (tmp_path / "big.json").write_text(json.dumps(big))
    tries = [
        {"afk": ["checkpoint", "--patch", "@big.json"]},
        {"afk": ["checkpoint", "--patch", "@-"], "stdin": json.dumps({"from": "stdin"})},
        {"afk": ["heartbeat"]},
        {"afk": ["show", "$ID"]},
        {"afk": ["status"]},
        {"afk": ["resume-brief"]},
        {"afk": ["done", "--result", '{"ok": true}']},
    ]
    (run,) = run_loop(afk, tmp_path, tries, "none")
    for said in run["said"]:
        assert said["exit"] == 0, said
    task = afk.json("show", mine)
    assert task["state"] == "done" and task["result"] == {"ok": True}
    assert task["checkpoint"]["notes"] == big["notes"] and task["checkpoint"]["from"] == "stdin"


def test_afk_once_runs_its_program_on_the_agents_side(afk, tmp_path, sql):
    """P2: `afk once -- CMD` ran CMD in the loop's process tree, outside the
    boundary. Its program is the agent's afk's own child; the effect is
    recorded once and replayed on a second call; a failure is not recorded."""
    afk.json("enqueue", "--agent", "b", "--title", "mine")
    probe = "import os; print(os.getppid(), os.environ.get('AFK_EFFECT_KEY', ''))"
    tries = [
        {"afk": ["once", "--name", "where", "--", sys.executable, "-c", probe]},
        {"afk": ["once", "--name", "where", "--", sys.executable, "-c", "print('again')"]},
        {"afk": ["once", "--name", "broken", "--", "false"]},
        {"afk": ["once", "--name", "missing", "--", "/no/such/program"]},
    ]
    (run,) = run_loop(afk, tmp_path, tries, "none")
    first, replayed, broken, missing = run["said"]
    assert first["exit"] == 0, first
    parent, key = first["stdout"].split()
    assert int(parent) == first["pid"], "the program is the agent's afk's own child"
    assert key.endswith(":where")
    assert (replayed["exit"], replayed["stdout"]) == (0, first["stdout"]), replayed
    assert broken["exit"] == 1 and missing["exit"] == 2, (broken, missing)
    recorded = {
        r["name"]: (r["done"], r["runs"], r["started_token"])
        for r in sql("SELECT name, done, runs, started_token FROM afk_task_effect")
    }
    # once recorded, never run again; the failure did not happen; the missing
    # program was never started
    assert recorded["where"][:2] == (True, 1), recorded
    assert recorded.get("broken", (False,))[0] is False and "missing" not in recorded


def test_a_raw_request_reads_no_file_of_the_host_and_names_no_other_task(afk, tmp_path, sql):
    """Past its afk, straight to the broker's socket: a patch that names a
    file (the broker would read it on the host) is refused; a hook naming
    another task's id and token acts on the run's own task only, and gives
    nothing of the other's; a command with another's token is refused."""
    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": "HOST-SECRET-42"}')
    os.chmod(secret, 0o600)
    (other,) = afk.json(
        "enqueue",
        "--agent",
        "victim",
        "--title",
        "victim's",
        "--spec",
        '{"s": "VICTIM-SPEC-SECRET-42"}',
    )["enqueued"]
    claimed = afk.json("claim", "--agent", "victim")
    (mine,) = afk.json("enqueue", "--agent", "b", "--title", "mine")["enqueued"]
    theirs = {"AFK_TASK_ID": "$OTHER", "AFK_TASK_TOKEN": "$OTHER_TOKEN", "AFK_ACCOUNT": "victim"}
    own = {"AFK_TASK_ID": "$ID", "AFK_TASK_TOKEN": "$TOKEN"}
    start = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}
    touched = {
        "session_id": "s1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": "/EVIL/touched", "content": "x"},
        "tool_response": {"success": True},
    }
    tries = [
        {"raw": {"cli": ["checkpoint", "--patch", f"@{secret}"], "env": own}},
        {"raw": {"cli": ["checkpoint", "--patch=@-"], "env": own}, "payload": "{}"},
        {"raw": {"argv": [], "env": theirs}, "payload": json.dumps(start)},
        {"raw": {"argv": [], "env": theirs}, "payload": json.dumps(touched)},
        {"raw": {"cli": ["show", "$OTHER"], "env": theirs}},
        {"raw": {"cli": ["--conf", "x", "status"], "env": own}},
    ]
    before = sql("SELECT checkpoint, spec, state FROM afk_task WHERE id = %s", other)
    (run,) = run_loop(afk, tmp_path, tries, other, AGENT_OTHER_TOKEN=str(claimed["token"]))
    file_patch, stdin_patch, brief, hook, show, conf = (s["answer"] for s in run["said"])
    assert file_patch["exit"] == "2" and "HOST-SECRET" not in json.dumps(file_patch)
    assert stdin_patch["exit"] == "2"
    assert "VICTIM-SPEC-SECRET-42" not in json.dumps(brief) and str(claimed["token"]) not in (
        json.dumps(brief)
    )
    assert "mine" not in json.dumps(brief), brief  # (no task's brief at all)
    assert "warning" in hook["stderr"] and "/EVIL" not in hook["stdout"], hook
    assert show["exit"] == "4" and "VICTIM" not in json.dumps(show)
    assert conf["exit"] in ("2", "4")
    assert sql("SELECT checkpoint, spec, state FROM afk_task WHERE id = %s", other) == before
    shown = afk.json("show", mine)
    assert "/EVIL/touched" not in json.dumps(shown)  # (nor into its own: refused)
    (kept,) = shown["runs"]  # (the attempts, kept on the run)
    assert any(f"a hook named task {other}" in r for r in kept["refused"]), kept["refused"]
    assert not sql("SELECT 1 FROM afk_account_park WHERE account = 'victim'")


def test_another_runs_broker_is_in_a_folder_no_run_is_given(afk, tmp_path):
    """P3 step 5: other runs' broker sockets sat in the shared temporary
    folder. Every broker and run folder is in one private folder of the
    user's (mode 0700), which the sandbox hides from every run but for its
    own two (tests/e2e/test_sandbox.py proves the hiding)."""
    afk.json("enqueue", "--agent", "b", "--title", "mine")
    (run,) = run_loop(afk, tmp_path, [], "none")
    root = Path(run["env"]["AFK_BROKER"]).parent.parent
    assert root.name == f"afk-{os.getuid()}" and root.stat().st_mode & 0o777 == 0o700


def test_no_other_local_user_reads_a_tasks_work(afk, tmp_path):
    """P11 (item 10): afk's home and the worktrees were 0755, so every local
    user read every task's files. As user nobody: a file beside afk's home
    is read (the test can fail), the task's file is not."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or not shutil.which("runuser"):
        if os.environ.get("CI"):
            pytest.fail("this test runs as root in CI, to act as user nobody")
        pytest.skip("acting as another user needs root")
    open_folder = Path(tempfile.mkdtemp(prefix="afk-open-", dir="/tmp"))
    try:
        open_folder.chmod(0o755)
        (open_folder / "control.txt").write_text("readable\n")
        (open_folder / "control.txt").chmod(0o644)
        repo, home = open_folder / "repo", open_folder / "afk-home"
        repo.mkdir()
        repo.chmod(0o755)
        who = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        for args in (
            ["init", "-q", "-b", "main"],
            [*who, "commit", "-q", "--allow-empty", "-m", "1"],
        ):
            subprocess.run(["git", *args], cwd=repo, check=True)
        env = {**afk.env, "AFK_HOME": str(home)}
        (task,) = afk.json("enqueue", "--agent", "p", "--title", "t", "--repo", str(repo), env=env)[
            "enqueued"
        ]
        loop = afk(
            "loop", "--agent", "p", "--max-tasks", "1", "--",
            "sh", "-c", "echo SECRET-OF-THE-TASK > .env.local", env=env,
        )  # fmt: skip
        assert loop.returncode == 0, loop.stderr
        path = Path(afk.json("show", task, env=env)["workspace"]["path"])
        assert (path / ".env.local").read_text().startswith("SECRET")

        def as_nobody(file: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["runuser", "-u", "nobody", "--", "cat", str(file)], capture_output=True, text=True
            )

        assert as_nobody(open_folder / "control.txt").stdout == "readable\n"
        seen = as_nobody(path / ".env.local")
        assert seen.returncode != 0 and "SECRET" not in seen.stdout, seen
        assert (path.stat().st_mode & 0o777, (home / "worktrees").stat().st_mode & 0o777) == (
            0o700,
            0o700,
        )
    finally:
        shutil.rmtree(open_folder, ignore_errors=True)


def test_a_run_gets_a_hook_credential_of_its_own_never_the_persons_token(afk, tmp_path):
    """P3: every run was given the one AFK_HOOK_TOKEN, with which an HTTP
    hook acted on any task its headers named. A run gets a credential signed
    for its own task, token and account; the person's token is not in its
    environment."""
    from watchdog.links import RUN_PREFIX

    (mine,) = afk.json("enqueue", "--agent", "b", "--title", "mine")["enqueued"]
    person = "the-persons-hook-token-0123456789"
    (run,) = run_loop(afk, tmp_path, [], "none", AFK_HOOK_HTTP="127.0.0.1:9", AFK_HOOK_TOKEN=person)
    given = run["env"]["AFK_HOOK_TOKEN"]
    assert given.startswith(RUN_PREFIX) and person not in json.dumps(run["env"])
    assert afk.json("show", mine)["state"] in ("done", "todo", "paused")
