"""The guarantees the round-three review broke (../shared/review-turn3.md,
N1-N9), each tested as a class: the example the review gave and the siblings
of it, through the real CLI, hooks and database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import poll


def claim(afk, agent="a", title="t"):
    afk.json("enqueue", "--agent", agent, "--title", title)
    return afk.json("claim", "--agent", agent)


# -- N1: at most once for overlapping calls ---------------------------------------


def test_two_overlapping_once_calls_run_the_command_once(afk, tmp_path):
    task = claim(afk)
    log = tmp_path / "ran.log"
    script = f"echo ran >> {log}; echo out-$$; sleep 2"
    args = ("once", task["id"], "--token", str(task["token"]), "--name", "deploy", "--")
    first = subprocess.Popen(
        afk.command(*args, "sh", "-c", script), env=afk.env, stdout=subprocess.PIPE, text=True
    )
    poll(lambda: log.exists())  # the first has started the command
    second = afk(*args, "sh", "-c", script)
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0
    assert log.read_text() == "ran\n"  # never a second run
    # the second waited for the first and replayed its output
    assert second.returncode == 0, second.stderr
    assert second.stdout == out
    assert "lease lost" not in second.stderr


def test_an_effect_whose_starter_died_is_refused_until_a_new_claim(afk, tmp_path, sql):
    task = claim(afk)
    args = ("once", task["id"], "--token", str(task["token"]), "--name", "pay", "--")
    log = tmp_path / "paid"
    killed = subprocess.Popen(
        afk.command(*args, "sh", "-c", f"echo 1 >> {log}; sleep 30"),
        env=afk.env,
        start_new_session=True,
    )
    poll(lambda: log.exists())
    os.killpg(killed.pid, signal.SIGKILL)  # the CLI dies between the start and the record
    killed.wait()
    again = afk(*args, "sh", "-c", f"echo 1 >> {log}")
    assert again.returncode == 6, again.stderr
    assert "may or may not have happened" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert log.read_text() == "1\n"


# -- N2: only a plain `afk ...` command passes a zombie's deny -----------------------


def run_hook(afk, payload, env) -> subprocess.CompletedProcess[str]:
    """`afk hook` as the agent runs it: the payload on stdin."""
    return subprocess.run(
        afk.command("hook"),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**afk.env, **env},
        timeout=30,
    )


def hook(afk, payload, env):
    proc = run_hook(afk, payload, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else None


@pytest.mark.parametrize(
    "command",
    [
        "afk status\nrm -rf build",
        "afk status\rrm -rf build",
        "afk status > /etc/passwd",
        "afk status 2>&1 >out",
        "afk status < /dev/null; rm x",
        "./afk status",
        "/tmp/afk status",
        "PATH=. afk status",
        "afk status && rm x",
        "afk status | sh",
        "afk status $(rm x)",
        "afk status `rm x`",
        "(afk status)",
        "afk status &",
        # a comment ends at the newline, and the shell starts a new command there
        "afk status # look\nrm -rf build",
        # M2: plain afk commands that run, claim, enqueue, park or stop something
        "afk loop --agent zx --max-tasks 1 -- sh -c 'rm -rf build'",
        "afk once --name x -- rm -rf build",
        "afk enqueue --agent zx --title run-anything",
        "afk claim --agent zx",
        "afk db stop",
        "afk limit --account default --until 2099-01-01T00:00:00Z",
        "afk limit --account default --clear",
        "afk hooks claude --install .claude/settings.json",
        "afk digest send",
        "afk pause --agent a",
        "afk done --token 12345",
    ],
)
def test_a_zombie_is_denied_anything_but_a_plain_afk_command(afk, sql, command):
    task = claim(afk)
    env = {"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])}
    sql.expire(task["id"])
    afk("reclaim")
    payload = {
        "session_id": "z",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }
    out = hook(afk, payload, env)
    assert out and out["hookSpecificOutput"]["permissionDecision"] == "deny", command
    plain = {**payload, "tool_input": {"command": "afk status --agent a"}}
    assert hook(afk, plain, env) is None  # a plain afk command still passes


# -- N3: the hooks reach the supervisor's database ------------------------------------


def test_hooks_installed_with_a_config_use_that_database(afk, tmp_path, dsn):
    config = tmp_path / "afk.toml"
    config.write_text(f'dsn = "{dsn}"\n')
    settings = tmp_path / "settings.json"
    env = {k: v for k, v in afk.env.items() if k != "AFK_DSN"}
    proc = subprocess.run(
        afk.command("hooks", "claude", "--install", str(settings), "--config", str(config)),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    commands = {
        e: g[0]["hooks"][0]["command"] for e, g in json.loads(settings.read_text())["hooks"].items()
    }
    assert all(f"--config {config}" in c for c in commands.values()), commands
    # the installed command, run as the agent runs it, finds the task and denies a zombie
    task = claim(afk)
    afk("pause", task["id"], "--token", str(task["token"]))
    payload = {
        "session_id": "z",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf build"},
    }
    out = subprocess.run(
        ["sh", "-c", commands["PreToolUse"]],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**env, "AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])},
        timeout=30,
    )
    assert json.loads(out.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_hooks_refuse_a_dsn_with_a_password_in_the_settings_file(afk, tmp_path):
    settings = tmp_path / "settings.json"
    proc = afk("hooks", "claude", "--install", str(settings), "--dsn", "postgresql://u:s3cret@h/db")
    assert proc.returncode == 2 and "s3cret" not in proc.stderr
    assert not settings.exists()


def test_a_hook_says_when_the_supervised_task_is_not_in_its_database(afk):
    payload = {
        "session_id": "z",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    }
    env = {"AFK_TASK_ID": "0b7a6c3e-0000-4000-8000-000000000001", "AFK_TASK_TOKEN": "7"}
    proc = run_hook(afk, payload, env)
    assert proc.returncode == 0
    assert "not in this hook's database" in proc.stderr


# -- N6: a replayed done --next never claims ---------------------------------------------


def test_a_replayed_done_next_returns_the_same_answer_and_claims_nothing(afk, sql):
    for title in ("one", "two", "three"):
        afk.json("enqueue", "--agent", "a", "--title", title)
    first = afk.json("claim", "--agent", "a", "--runner", "w")
    args = ("done", first["id"], "--token", str(first["token"]), "--next")
    reply = afk.json(*args)
    replay = afk.json(*args)
    assert (replay["id"], replay["token"]) == (reply["id"], reply["token"])
    assert sql.one("SELECT count(*) FROM afk_task WHERE state = 'running'") == 1
    # the first reply's token still holds its task
    ok = afk("checkpoint", reply["id"], "--token", str(reply["token"]), "--patch", "{}")
    assert ok.returncode == 0, ok.stderr
    # and once that one is finished too, a late replay of the first finish claims nothing
    afk.json("done", reply["id"], "--token", str(reply["token"]))
    late = afk(*args)
    assert late.returncode == 3
    assert sql.one("SELECT count(*) FROM afk_task WHERE state = 'todo'") == 1


# -- N7: the hooks' additions respect the checkpoint's size cap -----------------------


def test_hooks_never_grow_the_checkpoint_past_its_cap(afk, sql):
    task = claim(afk)
    env = {"AFK_MAX_JSON_BYTES": "20000"}
    note = json.dumps({"note": "x" * 19_000})
    assert (
        afk(
            "checkpoint", task["id"], "--token", str(task["token"]), "--patch", note, env=env
        ).returncode
        == 0
    )
    for n in range(5):
        payload = {
            "session_id": "s",
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": f"/p/{n}-" + "y" * 400},
        }
        hook(afk, payload, {**env, "AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])})
    size = sql.one("SELECT octet_length(checkpoint::text) FROM afk_task")
    assert size <= 20000
    step = afk(
        "checkpoint", task["id"], "--token", str(task["token"]), "--patch", '{"step": "x"}', env=env
    )
    assert step.returncode == 0, step.stderr


# -- N8: the brief comes first ------------------------------------------------------------


def test_session_start_gives_the_brief_when_the_env_file_cannot_be_written(afk):
    afk.json("enqueue", "--agent", "a", "--title", "resume me")
    subprocess.run(
        ["sh", "-c", "afk claim --agent a --runner S"],
        env={**afk.env, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]},
        check=True,
        capture_output=True,
    )
    payload = {"session_id": "S", "hook_event_name": "SessionStart", "source": "compact"}
    proc = run_hook(afk, payload, {"CLAUDE_ENV_FILE": "/nonexistent/env"})
    assert proc.returncode == 0
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "resume me" in context
    assert "CLAUDE_ENV_FILE" in proc.stderr and "Traceback" not in proc.stderr


# -- one configuration, one database -------------------------------------------------


def isolated(tmp_path, **env: str) -> dict[str, str]:
    """An environment with no AFK_* or PG* variable, and an AFK_HOME of its own."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AFK_", "PG"))}
    return {**base, "AFK_HOME": str(tmp_path / "home"), **env}


def run_cli(args, env, tmp_path):
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    "case",
    [
        "empty credential",
        "directory credential",
        "unreadable credential",
        "blank AFK_DSN",
        "empty AFK_DSN",
        "empty --dsn",
        "empty dsn in the config file",
    ],
)
def test_a_dsn_given_but_empty_is_refused_and_no_server_starts(tmp_path, case):
    creds = tmp_path / "creds"
    creds.mkdir()
    env = isolated(tmp_path, CREDENTIALS_DIRECTORY=str(creds))
    args = ["status"]
    if case == "empty credential":
        (creds / "dsn").write_text("\n")
    elif case == "directory credential":
        (creds / "dsn").mkdir()
    elif case == "unreadable credential":
        (creds / "dsn").write_text("postgresql://x@/y")
        (creds / "dsn").chmod(0)
        if os.geteuid() == 0:  # root reads anything: make it unreadable another way
            (creds / "dsn").unlink()
            (creds / "dsn").symlink_to(creds / "nowhere")
    elif case == "blank AFK_DSN":
        env["AFK_DSN"] = "   "
    elif case == "empty AFK_DSN":
        env["AFK_DSN"] = ""
    elif case == "empty --dsn":
        args = ["status", "--dsn", ""]
    else:
        (tmp_path / "c.toml").write_text('dsn = ""\n')
        args = ["status", "--config", str(tmp_path / "c.toml")]
    proc = run_cli(args, env, tmp_path)
    assert proc.returncode == 2, (case, proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "home").exists()  # no embedded server was started


def test_the_embedded_default_ignores_libpq_environment_and_says_so(tmp_path):
    import shutil
    import tempfile

    # a home the server's own user can reach (pytest's tmp_path is private to
    # root, and the embedded server does not run as root)
    home = Path(tempfile.mkdtemp(prefix="afk-home-"))
    home.chmod(0o755)
    env = isolated(
        tmp_path,
        AFK_HOME=str(home),
        PGHOSTADDR="127.0.0.2",
        PGOPTIONS="-c default_transaction_read_only=on",
        PGTARGETSESSIONATTRS="standby",
    )
    try:
        proc = run_cli(["enqueue", "--agent", "a", "--title", "t"], env, tmp_path)
        assert proc.returncode == 0, proc.stderr  # a write: not read-only, not elsewhere
        assert "embedded server" in proc.stderr
        assert json.loads(proc.stdout)["enqueued"]
    finally:
        run_cli(["db", "stop"], env, tmp_path)
        shutil.rmtree(home, ignore_errors=True)


def test_a_libpq_service_with_the_embedded_default_is_refused(tmp_path):
    env = isolated(tmp_path, PGSERVICE="prod")
    proc = run_cli(["status"], env, tmp_path)
    assert proc.returncode == 2 and "PGSERVICE" in proc.stderr
    assert not (tmp_path / "home").exists()


# -- security: a planted cache, terminal escapes -------------------------------------


def test_a_planted_session_cache_does_not_let_a_zombie_through(afk, tmp_path, sql):
    task = claim(afk)
    env = {
        "AFK_TASK_ID": task["id"],
        "AFK_TASK_TOKEN": str(task["token"]),
        "TMPDIR": str(tmp_path),
        "XDG_RUNTIME_DIR": str(tmp_path / "none"),  # no runtime folder: the cache is in TMPDIR
    }
    payload = {
        "session_id": "z",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf build"},
    }
    assert hook(afk, payload, env) is None  # held: allowed, and the verdict cached
    folder = tmp_path / f"afk-hooks-{os.getuid()}"
    (cached,) = folder.glob("*.json")
    # an entry that says "held" far into the future...
    planted = {**json.loads(cached.read_text()), "lost": None, "until": 9_999_999_999}
    cached.write_text(json.dumps(planted))
    sql.expire(task["id"])
    afk("reclaim")
    out = hook(afk, payload, env)  # ...is not trusted past CHECK_TTL
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    # a cache folder others may write to is not used at all
    cached.write_text(json.dumps(planted))
    folder.chmod(0o777)
    out = run_hook(afk, payload, env)
    assert json.loads(out.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "is writable by others; the hook keeps no cache there" in out.stderr


def test_c1_controls_reach_no_terminal_by_any_command(afk, sql):
    """R3: the one-byte CSI, OSC and ST in a title, an error and a question
    (written today, or stored by an older afk) reach no terminal: not `afk
    show`, `dead`, `questions`, `resume-brief` or the digest's text."""
    title, error = "C1 \x9b31m title \x9d0;pwned\x9c", "boom \x9b2J \x85 cleared"
    task = claim(afk, title=title)
    afk("fail", task["id"], "--token", str(task["token"]), "--error", error)
    asked = claim(afk, title=title)
    env = {"AFK_TASK_ID": asked["id"], "AFK_TASK_TOKEN": str(asked["token"])}
    assert afk("ask", f"which one? {title}", env=env).returncode == 0
    afk("enqueue", "--agent", "f", "--title", title, "--max-attempts", "1")
    failing = afk.json("claim", "--agent", "f")
    afk("fail", failing["id"], "--token", str(failing["token"]), "--error", error)
    outs = {}
    for stored in ("today", "by an older afk"):
        if stored != "today":
            sql("UPDATE afk_task SET title = %s, last_error = %s", title, error)
            sql("UPDATE afk_question SET question = %s", f"which one? {title}")
        outs.update({
            f"show {stored}": afk("show", task["id"]),
            f"dead {stored}": afk("dead"),
            f"questions {stored}": afk("questions"),
            f"resume-brief {stored}": afk("resume-brief", task["id"]),
            f"digest {stored}": afk("digest", "--dry-run", "--format", "text"),
        })  # fmt: skip
    for name, out in outs.items():
        assert out.returncode == 0, (name, out.stderr)
        raw = [c for c in "\x9b\x9c\x9d\x85" if c in out.stdout + out.stderr]
        assert not raw, (name, raw, out.stdout)
        assert "title" in out.stdout, (name, out.stdout)
    assert "which one?" in outs["questions by an older afk"].stdout


def test_agent_text_reaches_a_terminal_without_its_escapes(afk):
    title = "\x1b[31mRED\x1b[0m \x1b]0;pwned\x07 title"
    task = claim(afk, title=title)
    afk("fail", task["id"], "--token", str(task["token"]), "--error", "boom \x1b[2J cleared")
    brief = afk("resume-brief", task["id"])
    assert brief.returncode == 0
    assert "\x1b" not in brief.stdout and "\x07" not in brief.stdout
    assert "RED" in brief.stdout and "boom" in brief.stdout
    afk("enqueue", "--agent", "f", "--title", title, "--max-attempts", "1")
    failing = afk.json("claim", "--agent", "f")
    afk("fail", failing["id"], "--token", str(failing["token"]), "--error", "\x1b[2Jboom")
    digest = afk("digest", "--dry-run", "--format", "text")
    assert digest.returncode == 0 and "\x1b" not in digest.stdout and "boom" in digest.stdout
