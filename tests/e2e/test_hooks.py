"""`afk hook` and `afk hooks`, one payload at a time, as the agent runs them: a
real subprocess with the payload on stdin. (Whole sessions: test_harness.py.)"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import Afk, poll

from watchdog import NewTask, embedded
from watchdog.agents.hooks import CHECK_TTL


@pytest.fixture
def afk(afk_through):
    """Every hook here runs twice: straight against the database, and
    answered by the watchdog service."""
    return afk_through


@pytest.fixture
def plain_afk(dsn, tmp_path):
    """`afk` alone, for the tests of the settings `afk hooks` prints or
    writes: no hook runs, so no service is started to answer one."""
    return Afk(dsn, tmp_path)


SESSION = "3f1c9a6e-5b7d-4c2a-9e8f-0a1b2c3d4e5f"  # one per test: each has its own database


def hook(afk, payload, env=None, *args):
    data = payload if isinstance(payload, bytes | str) else json.dumps(payload)
    proc = afk.hook(*args, input=data if isinstance(data, bytes) else data.encode(), env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    return (json.loads(out) if out.strip() else None), proc.stderr.decode()


def event(name, **fields):
    return {
        "session_id": SESSION,
        "cwd": "/work",
        "hook_event_name": name,
        "transcript_path": "/tmp/t.jsonl",
        **fields,
    }


def tool(name, tool_name="Bash", **tool_input):
    return event(name, tool_name=tool_name, tool_input=tool_input or {"command": "ls"})


def supervised(task):
    return {"AFK_TASK_ID": str(task.id), "AFK_TASK_TOKEN": str(task.token)}


# -- the settings ------------------------------------------------------------


def test_hooks_claude_writes_every_event_with_matchers_absolute_paths_and_timeouts(plain_afk):
    afk = plain_afk  # (settings printed or written: no service to answer)
    settings = afk.json("hooks", "claude")["hooks"]
    assert set(settings) == {
        "SessionStart",
        "PreToolUse",
        "PostToolUse",
        "PermissionRequest",
        "PreCompact",
        "PostCompact",
        "StopFailure",
        "SessionEnd",
    }  # (Stop only with --gate: without it the hook would do nothing, once a turn)
    assert settings["PreToolUse"][0]["matcher"] == settings["PostToolUse"][0]["matcher"] == "*"
    assert "compact" in settings["SessionStart"][0]["matcher"].split("|")
    for event_name, groups in settings.items():
        (entry,) = groups[0]["hooks"]
        command = shlex.split(entry["command"].removeprefix("trap '' TERM; exec "))
        # afk's entry point by the interpreter it is installed in, isolated
        # (-I: the project's own folder and PYTHON* variables have no say)
        assert Path(command[0]).is_absolute() and command[0] == sys.executable, event_name
        assert command[1:3] == ["-I", "-c"] and "watchdog.__main__" in command[3]
        assert command[4:] == ["hook"] and 0 < entry["timeout"] <= 20
    gated = afk.json("hooks", "claude", "--gate")["hooks"]
    assert gated["Stop"][0]["hooks"][0]["command"].endswith(" hook --gate")
    assert not gated["PreToolUse"][0]["hooks"][0]["command"].endswith("--gate")


def test_hooks_codex_shares_the_same_hook_command(plain_afk):
    afk = plain_afk  # (settings printed or written: no service to answer)
    codex = afk.json("hooks", "codex", "--gate")["hooks"]
    claude = afk.json("hooks", "claude", "--gate")["hooks"]
    assert set(codex) == {
        "SessionStart",
        "PreToolUse",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "Stop",
        "SessionEnd",
    }
    assert all(codex[e] == claude[e] for e in codex)


def test_install_merges_replaces_old_entries_and_is_idempotent(plain_afk, tmp_path):
    afk = plain_afk  # (settings printed or written: no service to answer)
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    other = {
        "model": "x",
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {
            "Stop": [
                {
                    "hooks": [
                        {"type": "command", "command": "notify-send done"},
                        {"type": "command", "command": "/old/venv/bin/afk hook stop"},
                    ]
                }
            ],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "'/old/bin/afk' hook stop"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check"}]}],
        },
    }
    path.write_text(json.dumps(other))
    for _ in range(2):
        assert afk("hooks", "claude", "--install", str(path)).returncode == 0
    merged = json.loads(path.read_text())
    assert merged["model"] == "x" and merged["permissions"] == other["permissions"]
    ours = afk.json("hooks", "claude")["hooks"]
    commands = {
        e: [h["command"] for g in merged["hooks"][e] for h in g["hooks"]] for e in merged["hooks"]
    }
    # the old afk Stop entry is gone, the user's own kept (no Stop without --gate)
    assert commands["Stop"] == ["notify-send done"]
    assert "Stop" not in ours
    assert commands["PreToolUse"] == ["check", ours["PreToolUse"][0]["hooks"][0]["command"]]
    assert all(len(commands[e]) == 1 for e in ("SessionEnd", "SessionStart", "PostToolUse"))


def test_install_follows_a_symlinked_settings_file(plain_afk, tmp_path):
    afk = plain_afk  # (settings printed or written: no service to answer)
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "y"}')
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    assert afk("hooks", "claude", "--install", str(link)).returncode == 0
    assert link.is_symlink() and link.resolve() == real
    assert json.loads(real.read_text())["model"] == "y" and "hooks" in json.loads(real.read_text())


@pytest.mark.parametrize("case", ["directory", "under a file", "broken json", "not an object"])
def test_install_refuses_what_it_cannot_write_and_changes_nothing(plain_afk, tmp_path, case):
    afk = plain_afk  # (settings printed or written: no service to answer)
    target = tmp_path / "settings.json"
    if case == "directory":
        target.mkdir()
    elif case == "under a file":
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "settings.json"
    else:
        target.write_text("{not json" if case == "broken json" else "[1]")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    content = target.read_text() if target.is_file() else None
    proc = afk("hooks", "claude", "--install", str(target))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    if content is not None:
        assert target.read_text() == content


# -- what each event does -----------------------------------------------------------


def test_stop_never_pauses_and_session_end_pauses_only_the_sessions_own_claim(afk, queue):
    queue.enqueue("A", [NewTask(f"t{i}") for i in range(3)])
    own = queue.claim("A", runner=SESSION)
    theirs = queue.claim("A", runner="a-supervisor")
    # the supervisor's task is in the agent's environment, as ralph.sh sets it
    env = supervised(theirs)
    assert hook(afk, event("Stop", stop_hook_active=False), env) == (None, "")
    assert queue.show(own.id)[0].state == queue.show(theirs.id)[0].state == "running"
    hook(afk, event("SessionEnd", reason="prompt_input_exit"), env)
    assert queue.show(theirs.id)[0].state == "running"
    hook(afk, event("SessionEnd", reason="prompt_input_exit"))
    task, history = queue.show(own.id)
    assert (task.state, task.attempts) == ("paused", 0)
    assert history[-1]["reason"] == "session ended: prompt_input_exit"
    assert queue.show(theirs.id)[0].state == "running"
    # settings written by an older version run `afk hook stop` on SessionEnd too
    third = queue.claim("A", runner=SESSION)
    hook(afk, event("SessionEnd", reason="logout"), None, "stop")
    assert queue.show(third.id)[0].state == "paused"


def test_pre_tool_use_denies_a_zombie_within_seconds_of_the_loss(afk, queue, sql):
    queue.enqueue("A", [NewTask("t")])
    task = queue.claim("A", runner="a-supervisor", lease_seconds=60)
    env = supervised(task)
    assert hook(afk, tool("PreToolUse"), env)[0] is None  # held: allowed, and cached
    cached_by = time.monotonic()
    sql.expire(task.id)
    queue.reclaim()
    allowed_at: list[float] = []

    def ask() -> dict | None:
        started = time.monotonic()
        out = hook(afk, tool("PreToolUse"), env)[0]
        if out is None:
            allowed_at.append(started)
        return out

    denied = poll(ask, interval=0.2)
    # the cached verdict is trusted CHECK_TTL seconds at most: any call made
    # later asks the database, however long a call takes on a loaded machine
    assert all(at < cached_by + CHECK_TTL for at in allowed_at), (allowed_at, cached_by)
    decision = denied["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    assert str(task.id) in decision["permissionDecisionReason"]
    # the agent may still talk to the queue (every afk write is fenced)
    assert hook(afk, tool("PreToolUse", command="afk status"), env)[0] is None
    assert hook(afk, tool("PreToolUse", command="afk status; rm -rf x"), env)[0] is not None
    assert queue.show(task.id)[0].state == "paused"  # the hook changed nothing


def test_post_tool_use_records_edited_files_fenced_and_renews_only_the_sessions_own_lease(
    afk, queue, sql
):
    queue.enqueue("A", [NewTask("mine"), NewTask("supervised")])
    own = queue.claim("A", runner=SESSION, lease_seconds=30)
    theirs = queue.claim("A", runner="a-supervisor", lease_seconds=30)
    sql("UPDATE afk_task SET lease_until = now() + interval '5 seconds'")
    for name, path in [
        ("Write", "/w/a.py"),
        ("Edit", "/w/b.py"),
        ("Write", "/w/a.py"),
        ("Bash", None),
    ]:
        fields = {"file_path": path} if path else {"command": "make"}
        hook(afk, tool("PostToolUse", name, **fields))
        hook(afk, tool("PostToolUse", name, **fields), supervised(theirs))
    hook(afk, tool("PostToolUse", "NotebookEdit", notebook_path="/w/n.ipynb"))
    left = {
        r["id"]: r["left"]
        for r in sql("SELECT id, extract(epoch FROM lease_until - now()) AS left FROM afk_task")
    }
    assert left[own.id] > 20  # the session's own claim: renewed by its lease (30 s)
    assert left[theirs.id] < 6  # the supervisor's: the supervisor keeps it, not the agent
    assert queue.show(own.id)[0].checkpoint["files_touched"] == ["/w/b.py", "/w/a.py", "/w/n.ipynb"]
    assert queue.show(theirs.id)[0].checkpoint["files_touched"] == ["/w/b.py", "/w/a.py"]
    # a stale token records nothing
    queue.pause_task(theirs)
    before = sql.fingerprint()
    hook(afk, tool("PostToolUse", "Write", file_path="/w/late.py"), supervised(theirs))
    assert sql.fingerprint() == before


def test_session_start_injects_the_brief_and_exports_the_runner(afk, queue, tmp_path):
    queue.enqueue("A", [NewTask("Fix the login", {"issue": 77})])
    env_file = tmp_path / "env"
    out, _ = hook(afk, event("SessionStart", source="startup"), {"CLAUDE_ENV_FILE": str(env_file)})
    assert out is None  # nothing claimed yet: nothing to tell
    assert env_file.read_text() == f"export AFK_RUNNER_ID={SESSION}\n"
    task = queue.claim("A", runner=SESSION)
    queue.checkpoint(task, {"step": "reproduced"})
    out, _ = hook(afk, event("SessionStart", source="compact"), {"CLAUDE_ENV_FILE": str(env_file)})
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    for expected in ("compacted", "Fix the login", '"issue": 77', "reproduced", str(task.id)):
        assert expected in context, expected
    assert f"export AFK_TASK_ID={task.id}" in env_file.read_text()


def test_the_stop_gate_blocks_a_bounded_number_of_times(afk, queue):
    queue.enqueue("A", [NewTask("t")])
    task = queue.claim("A", runner=SESSION)
    blocked, _ = hook(afk, event("Stop", stop_hook_active=False), None, "--gate")
    assert blocked["decision"] == "block" and f"afk done {task.id}" in blocked["reason"]
    assert hook(afk, event("Stop", stop_hook_active=True), None, "--gate")[0] is None
    outcomes = [
        hook(afk, event("Stop", stop_hook_active=False), None, "--gate")[0] for _ in range(4)
    ]
    assert [o is not None for o in outcomes] == [True, True, False, False]  # 3 in all
    assert queue.show(task.id)[0].state == "running"  # a Stop never pauses


def test_hooks_never_act_on_a_session_id_as_sql(afk, queue, sql):
    queue.enqueue("A", [NewTask("a"), NewTask("b")])
    queue.claim("A", runner="victim")
    evil = "x' OR lease_owner <> 'x"
    queue.claim("A", runner="other")
    before = sql.fingerprint()
    for name in ("SessionEnd", "PostToolUse", "Stop"):
        hook(afk, {**tool(name, "Write", file_path="/f"), "session_id": evil, "reason": "x"})
    assert sql.fingerprint() == before


HOSTILE = [
    b"",
    b"not json",
    b"[1, 2]",
    b'"a string"',
    b"\xff\xfe\x00garbage",
    b'{"hook_event_name": 5, "session_id": "s"}',
    b'{"hook_event_name": "SessionEnd", "session_id": 5}',
    b'{"hook_event_name": "SessionEnd", "session_id": ""}',
    b'{"hook_event_name": "SessionEnd", "session_id": "a\\u0000b"}',
    b'{"hook_event_name": "SessionEnd", "session_id": "\\ud800"}',
    b'{"hook_event_name": "PostToolUse", "session_id": "S", "tool_name": "Write",'
    b' "tool_input": "not an object"}',
    b'{"hook_event_name": "PostToolUse", "session_id": "S", "tool_name": "Write",'
    b' "tool_input": {"file_path": ["a"]}}',
    b'{"hook_event_name": "Notification", "session_id": "S"}',
    b'{"hook_event_name": "SessionEnd", "session_id": "' + b"x" * 100_000 + b'"}',
    b'{"hook_event_name": "SessionEnd", "session_id": "S", "reason": "x", "pad": "'
    + b"y" * (17 * 1024 * 1024)
    + b'"}',
]


@pytest.mark.parametrize("payload", HOSTILE, ids=range(len(HOSTILE)))
def test_malformed_and_hostile_payloads_change_nothing_and_exit_0(afk, queue, sql, payload):
    queue.enqueue("A", [NewTask("t")])
    task = queue.claim("A", runner="S")
    before = sql.fingerprint()
    out, err = hook(afk, payload, supervised(task) if b"Write" in payload else None)
    assert out is None and len(err.strip().splitlines()) <= 1
    assert "Traceback" not in err
    assert sql.fingerprint() == before


def test_a_hook_with_the_database_down_exits_0_quickly_with_a_warning(afk):
    started = time.monotonic()
    out, err = hook(afk, tool("PreToolUse"), {"AFK_DSN": "postgresql://afk:pw@127.0.0.1:1/afk"})
    assert out is None and "warning" in err and "pw" not in err
    assert time.monotonic() - started < 5


def test_a_hook_with_no_embedded_server_running_says_so(afk, tmp_path):
    env = {"AFK_HOME": str(tmp_path / "home")}
    env_without_dsn = {k: v for k, v in afk.env.items() if k != "AFK_DSN"}
    proc = subprocess.run(
        afk.command("hook"),
        input=json.dumps(event("SessionEnd")),
        text=True,
        capture_output=True,
        env={**env_without_dsn, **env},
        timeout=30,
    )
    assert proc.returncode == 0 and "not running" in proc.stderr
    assert embedded.running(tmp_path / "home" / "pgdata") is None  # and it started none


def test_cli_commands_take_the_task_from_the_environment(afk, queue):
    queue.enqueue("A", [NewTask("t")])
    task = queue.claim("A", runner="sup")
    env = supervised(task)
    assert afk.json("checkpoint", "--patch", '{"step": "one"}', env=env)["checkpoint"] == {
        "step": "one"
    }
    assert afk("heartbeat", env=env).returncode == 0
    assert afk("resume-brief", env=env).stdout.startswith("# Resume: t")
    assert afk("done", env=env).returncode == 0
    assert afk("done", env=env).returncode == 0  # a replay by the same token
    assert afk("checkpoint", "--patch", "{}").returncode == 2  # no id anywhere
    assert afk("checkpoint", "--patch", "{}", env=env).returncode == 4  # not held any more


# -- StopFailure: the account, not the task -------------------------------------


def stop_failure(error, message, **fields):
    return event("StopFailure", error=error, last_assistant_message=message, **fields)


def test_stop_failure_rate_limit_parks_the_sessions_account_until_the_reset_it_names(afk, sql):
    payload = stop_failure("rate_limit", "You've hit your session limit · resets 3:45am (UTC)")
    out, _ = hook(afk, payload, {"AFK_ACCOUNT": "max-1"})
    assert out is None  # its output is ignored by Claude Code: a side effect only
    # it returns at once and parks in a process of its own (Claude Code ends
    # a StopFailure hook as it exits)
    (parked,) = poll(lambda: sql("SELECT account, kind, until, reason FROM afk_account_park"))
    assert (parked["account"], parked["kind"]) == ("max-1", "usage_limit")
    assert (parked["until"].hour, parked["until"].minute) == (3, 45)
    assert "3:45am" in parked["reason"]


def test_stop_failure_without_a_reset_probes_after_the_probe_interval(afk, sql):
    """With no reset read, a guess: the first probe's interval (issue 41
    item 7; a hook knows of no guess before its own)."""
    text = "API Error: Request rejected (429) · This request would exceed your rate limit."
    probe = {"AFK_LIMIT_PROBE_FIRST_SECONDS": "600", "AFK_LIMIT_PROBE_SECONDS": "900"}
    hook(afk, stop_failure("rate_limit", text), probe)
    (parked,) = poll(lambda: sql("SELECT account, until - parked_at AS wait FROM afk_account_park"))
    assert parked["account"] == "default"
    assert 590 <= parked["wait"].total_seconds() <= 610


@pytest.mark.parametrize(
    "error, kind, ends",
    [
        ("authentication_failed", "needs_human", False),
        ("billing_error", "needs_human", False),
        ("overloaded", "outage", True),
    ],
)
def test_stop_failure_parks_by_the_loops_rules(afk, sql, error, kind, ends):
    hook(afk, stop_failure(error, "API Error: something"), {"AFK_ACCOUNT": "k"})
    (parked,) = poll(lambda: sql("SELECT kind, until FROM afk_account_park"))
    assert parked["kind"] == kind and (parked["until"] is not None) == ends


def test_stop_failure_outage_parks_for_the_loops_backoff_at_its_breaker(afk, sql):
    """One outage rule (watchdog/agents/decide.py): a StopFailure outage comes after
    the client's own retries, so it counts as the breaker's worth of outages
    in a row and parks the account for the backoff of the breaker-th one,
    as the loop would (10 s doubled twice: 40 s), not for the base."""
    env = {"AFK_TRANSIENT_BACKOFF_SECONDS": "10", "AFK_OUTAGE_BREAKER": "3"}
    hook(afk, stop_failure("overloaded", "API Error: Repeated 529 Overloaded errors"), env)
    (parked,) = poll(lambda: sql("SELECT kind, until - parked_at AS wait FROM afk_account_park"))
    assert parked["kind"] == "outage"
    assert 39 <= parked["wait"].total_seconds() <= 41


def test_stop_failure_of_other_errors_changes_nothing(afk, sql):
    for error in ("invalid_request", "max_output_tokens", "unknown", None):
        hook(afk, stop_failure(error, "API Error: 400 bad request"))
    assert sql("SELECT * FROM afk_account_park") == []


def test_post_compact_keeps_the_summary_for_the_next_brief(afk):
    afk.json("enqueue", "--agent", "a", "--title", "long refactor")
    task = afk.json("claim", "--agent", "a")
    env = {"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])}
    summary = "Moved the parser to src/parse.py; the lexer tests still fail on unicode."
    out, _ = hook(afk, event("PostCompact", trigger="auto", compact_summary=summary), env)
    assert out is None
    assert afk.json("show", task["id"])["checkpoint"]["compact_summary"] == summary
    context, _ = hook(afk, event("SessionStart", source="compact"), env)
    assert summary in context["hookSpecificOutput"]["additionalContext"]


# -- Gemini CLI: its own names and shapes (https://geminicli.com/docs/hooks/reference) ---


def gemini(name, **fields):
    """A Gemini CLI payload: its base fields (a timestamp, no source for a compact)."""
    return {
        "session_id": SESSION,
        "transcript_path": "/tmp/t.json",
        "cwd": "/work",
        "hook_event_name": name,
        "timestamp": "2026-12-01T03:00:00.000Z",
        **fields,
    }


def gemini_hook(afk, payload, env):
    return hook(afk, payload, env, "--harness", "gemini")


def leased(task):
    """Gemini drops variables whose name holds TOKEN: the lease name carries it."""
    return {"AFK_TASK_ID": str(task.id), "AFK_TASK_LEASE": str(task.token)}


def test_hooks_gemini_writes_its_own_events_with_timeouts_in_milliseconds(plain_afk):
    afk = plain_afk  # (settings printed or written: no service to answer)
    settings = afk.json("hooks", "gemini")["hooks"]
    assert set(settings) == {
        "SessionStart",
        "BeforeTool",
        "AfterTool",
        "PreCompress",
        "BeforeAgent",
        "SessionEnd",
    }
    assert "AfterAgent" in afk.json("hooks", "gemini", "--gate")["hooks"]
    for groups in settings.values():
        (entry,) = groups[0]["hooks"]
        assert entry["command"].endswith(" hook --harness gemini")
        assert entry["timeout"] >= 10_000  # milliseconds
    assert settings["BeforeTool"][0]["matcher"] == ".*"


def test_gemini_before_tool_denies_a_zombie_in_its_own_shape(afk, queue, sql):
    queue.enqueue("g", [NewTask("t")])
    task = queue.claim("g", runner="sup")
    call = gemini("BeforeTool", tool_name="run_shell_command", tool_input={"command": "rm -rf x"})
    out, _ = gemini_hook(afk, call, leased(task))
    assert out is None  # held
    sql.expire(task.id)
    queue.reclaim()
    # (a "held" verdict is trusted CHECK_TTL seconds at most)
    out = poll(lambda: gemini_hook(afk, call, leased(task))[0], timeout=CHECK_TTL + 10)
    assert out["decision"] == "deny" and "no longer yours" in out["reason"]
    afk_call = {**call, "tool_input": {"command": "afk status --agent g"}}
    assert gemini_hook(afk, afk_call, leased(task))[0] is None


def test_gemini_after_tool_records_its_writes(afk, queue):
    queue.enqueue("g", [NewTask("t")])
    task = queue.claim("g", runner="sup")
    for tool in ("write_file", "replace"):
        payload = gemini(
            "AfterTool",
            tool_name=tool,
            tool_input={"file_path": f"/p/{tool}.py"},
            tool_response={"llmContent": "ok"},
        )
        gemini_hook(afk, payload, leased(task))
    files = queue.show(task.id)[0].checkpoint["files_touched"]
    assert files == ["/p/write_file.py", "/p/replace.py"]


def test_gemini_gets_the_brief_at_start_and_again_after_a_compression(afk, queue):
    queue.enqueue("g", [NewTask("port the parser", {"repo": "acme"})])
    task = queue.claim("g", runner="sup")
    out, _ = gemini_hook(afk, gemini("SessionStart", source="startup"), leased(task))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "# Resume: port the parser" in context and "acme" in context
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    turn = gemini("BeforeAgent", prompt="go on")
    assert gemini_hook(afk, turn, leased(task))[0] is None  # nothing compressed yet
    gemini_hook(afk, gemini("PreCompress", trigger="auto"), leased(task))
    out, _ = gemini_hook(afk, turn, leased(task))
    assert "just compacted" in out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert gemini_hook(afk, turn, leased(task))[0] is None  # once


def test_headless_gemini_gets_the_brief_at_its_first_turn(afk, queue):
    """`gemini -p` (0.61.0) fires no SessionStart: the first BeforeAgent of a
    session that was not briefed yet carries the brief, once."""
    queue.enqueue("g", [NewTask("port the parser", {"repo": "acme"})])
    task = queue.claim("g", runner="sup")
    turn = gemini("BeforeAgent", prompt="go")
    out, _ = gemini_hook(afk, turn, leased(task))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "# Resume: port the parser" in context and "acme" in context
    assert "just compacted" not in context
    assert out["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert gemini_hook(afk, turn, leased(task))[0] is None  # once


# -- Cursor: its own names and shapes (https://cursor.com/docs/hooks) ---------


def cursor(name, **fields):
    """A Cursor payload: its common fields (a conversation, workspace roots,
    no session_id or cwd of Claude Code's kind)."""
    return {
        "conversation_id": SESSION,
        "generation_id": "gen-1",
        "model": "claude-sonnet-4",
        "hook_event_name": name,
        "cursor_version": "2.1.0",
        "workspace_roots": ["/work"],
        "user_email": None,
        **fields,
    }


def cursor_hook(afk, payload, env=None, *args):
    return hook(afk, payload, env, "--harness", "cursor", *args)


def test_hooks_cursor_writes_version_1_with_flat_entries(plain_afk, tmp_path):
    afk = plain_afk  # (settings printed or written: no service to answer)
    settings = afk.json("hooks", "cursor")
    assert settings["version"] == 1
    events = settings["hooks"]
    assert set(events) == {
        "sessionStart",
        "preToolUse",
        "postToolUse",
        "afterFileEdit",
        "preCompact",
        "sessionEnd",
    }
    assert "stop" in afk.json("hooks", "cursor", "--gate")["hooks"]
    for entries in events.values():
        (entry,) = entries
        assert set(entry) == {"command", "timeout"} and 0 < entry["timeout"] <= 20
        assert Path(entry["command"].split()[0]).is_absolute()
        assert entry["command"].endswith(" hook --harness cursor")
    # installed twice beside the user's own entries: theirs kept, ours once
    path = tmp_path / ".cursor" / "hooks.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"version": 1, "hooks": {"afterFileEdit": [{"command": "fmt"}]}}))
    for _ in range(2):
        assert afk("hooks", "cursor", "--install", str(path)).returncode == 0
    merged = json.loads(path.read_text())
    assert merged["version"] == 1
    assert [e["command"] for e in merged["hooks"]["afterFileEdit"]] == [
        "fmt",
        events["afterFileEdit"][0]["command"],
    ]
    assert all(len(merged["hooks"][e]) == 1 for e in ("preToolUse", "sessionStart"))


def test_cursor_pre_tool_use_denies_a_zombie_in_its_own_shape(afk, queue, sql):
    queue.enqueue("c", [NewTask("t")])
    task = queue.claim("c", runner="sup")
    call = cursor(
        "preToolUse",
        tool_name="Shell",
        tool_input={"command": "rm -rf x", "working_directory": "/work"},
        tool_use_id="abc123",
        cwd="/work",
    )
    assert cursor_hook(afk, call, supervised(task))[0] is None  # held
    sql.expire(task.id)
    queue.reclaim()
    out = poll(lambda: cursor_hook(afk, call, supervised(task))[0], timeout=CHECK_TTL + 10)
    assert out["permission"] == "deny" and "no longer yours" in out["agent_message"]
    assert out["user_message"] == out["agent_message"]
    afk_call = {**call, "tool_input": {"command": "afk status --agent c"}}
    assert cursor_hook(afk, afk_call, supervised(task))[0] is None


def test_cursor_after_file_edit_records_the_file(afk, queue):
    queue.enqueue("c", [NewTask("t")])
    task = queue.claim("c", runner="sup")
    edit = cursor(
        "afterFileEdit",
        file_path="/work/src/main.ts",
        edits=[{"old_string": "const foo = 1", "new_string": "const foo = 2"}],
    )
    assert cursor_hook(afk, edit, supervised(task))[0] is None
    assert queue.show(task.id)[0].checkpoint["files_touched"] == ["/work/src/main.ts"]


def test_cursor_gets_the_brief_at_start_and_after_a_compaction(afk, queue):
    queue.enqueue("c", [NewTask("port the parser", {"repo": "acme"})])
    task = queue.claim("c", runner="sup")
    start = cursor("sessionStart", session_id=SESSION, is_background_agent=False)
    out, _ = cursor_hook(afk, start, supervised(task))
    assert set(out) == {"additional_context"}
    assert "# Resume: port the parser" in out["additional_context"]
    after = cursor("postToolUse", tool_name="Shell", tool_input={"command": "ls"}, tool_output="{}")
    assert cursor_hook(afk, after, supervised(task))[0] is None  # nothing compacted yet
    compact = cursor("preCompact", trigger="auto", context_usage_percent=85)
    assert cursor_hook(afk, compact, supervised(task))[0] is None
    out, _ = cursor_hook(afk, after, supervised(task))
    assert "just compacted" in out["additional_context"]
    assert cursor_hook(afk, after, supervised(task))[0] is None  # once


def test_cursor_stop_gate_sends_a_followup_and_session_end_pauses_its_claim(afk, queue):
    queue.enqueue("c", [NewTask("t")])
    task = queue.claim("c", runner=SESSION)
    stop = cursor("stop", status="completed", loop_count=0)
    out, _ = cursor_hook(afk, stop, None, "--gate")
    assert set(out) == {"followup_message"} and f"afk done {task.id}" in out["followup_message"]
    assert queue.show(task.id)[0].state == "running"
    cursor_hook(afk, cursor("sessionEnd", session_id=SESSION, reason="user_close"))
    task_now, history = queue.show(task.id)
    assert task_now.state == "paused" and history[-1]["reason"] == "session ended: user_close"


# -- GitHub Copilot CLI: PascalCase events, snake_case payloads
# (https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference)


def copilot(name, **fields):
    """A Copilot CLI payload in its VS Code compatible format (an ISO timestamp)."""
    return {
        "hook_event_name": name,
        "session_id": SESSION,
        "timestamp": "2026-12-01T03:00:00.000Z",
        "cwd": "/work",
        **fields,
    }


def copilot_hook(afk, payload, env=None, *args):
    return hook(afk, payload, env, "--harness", "copilot", *args)


def test_hooks_copilot_writes_version_1_with_bash_entries(plain_afk, tmp_path):
    afk = plain_afk  # (settings printed or written: no service to answer)
    settings = afk.json("hooks", "copilot")
    assert settings["version"] == 1
    events = settings["hooks"]
    assert set(events) == {"PreToolUse", "PostToolUse", "PreCompact", "SessionEnd"}
    assert "Stop" in afk.json("hooks", "copilot", "--gate")["hooks"]
    for entries in events.values():
        (entry,) = entries
        assert entry["type"] == "command" and 0 < entry["timeoutSec"] <= 20
        assert Path(entry["bash"].split()[0]).is_absolute()
        assert entry["bash"].endswith(" hook --harness copilot")
    path = tmp_path / ".github" / "hooks" / "afk.json"
    for _ in range(2):
        assert afk("hooks", "copilot", "--install", str(path)).returncode == 0
    merged = json.loads(path.read_text())
    assert merged["version"] == 1 and all(len(v) == 1 for v in merged["hooks"].values())


def test_copilot_pre_tool_use_denies_a_zombie_in_its_own_shape(afk, queue, sql):
    queue.enqueue("p", [NewTask("t")])
    task = queue.claim("p", runner="sup")
    call = copilot("PreToolUse", tool_name="bash", tool_input={"command": "rm -rf x"})
    assert copilot_hook(afk, call, supervised(task))[0] is None  # held
    sql.expire(task.id)
    queue.reclaim()
    out = poll(lambda: copilot_hook(afk, call, supervised(task))[0], timeout=CHECK_TTL + 10)
    assert set(out) == {"permissionDecision", "permissionDecisionReason"}
    assert (
        out["permissionDecision"] == "deny" and "no longer yours" in out["permissionDecisionReason"]
    )
    afk_call = {**call, "tool_input": {"command": "afk status --agent p"}}
    assert copilot_hook(afk, afk_call, supervised(task))[0] is None


def test_copilot_records_its_edits_and_pauses_its_own_claim_at_session_end(afk, queue):
    queue.enqueue("p", [NewTask("t")])
    task = queue.claim("p", runner=SESSION)
    for tool_name in ("create", "edit"):
        done = copilot(
            "PostToolUse",
            tool_name=tool_name,
            tool_input={"path": f"/work/{tool_name}.py"},
            tool_result={"result_type": "success", "text_result_for_llm": "ok"},
        )
        assert copilot_hook(afk, done)[0] is None
    assert queue.show(task.id)[0].checkpoint["files_touched"] == [
        "/work/create.py",
        "/work/edit.py",
    ]
    stop = copilot("Stop", transcript_path="/tmp/t.jsonl", stop_reason="end_turn")
    out, _ = copilot_hook(afk, stop, None, "--gate")
    assert out["decision"] == "block" and f"afk done {task.id}" in out["reason"]
    copilot_hook(afk, copilot("SessionEnd", reason="user_exit"))
    task_now, history = queue.show(task.id)
    assert task_now.state == "paused" and history[-1]["reason"] == "session ended: user_exit"
