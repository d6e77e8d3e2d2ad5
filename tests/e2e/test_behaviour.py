"""Wrong behaviour the round-three review found (N31-N65), each tested as a
class through the real CLI and database."""

from __future__ import annotations

import json

import pytest


def one_line(proc) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "dsn, says",
    [
        ("postgresql://u:hunter2@127.0.0.1:99999/db", "port"),
        ("postgresql://u:hunter2@127.0.0.1/db?sslmode=bogus", "sslmode"),
        ("host=127.0.0.1 port=abc password=hunter2", "port"),
        ("host=/tmp target_session_attrs=nope password=hunter2", "target_session_attrs"),
        ("postgresql://u:hunter2@h/db?bogus=1", "bogus"),
        ("mysql://u:hunter2@h/db", "postgresql://"),
        ("postgresql://u:50%off-hunter2@h/db", "%25"),
    ],
)
def test_a_malformed_dsn_is_bad_input_saying_what_is_wrong(afk, dsn, says):
    proc = afk("status", "--dsn", dsn)
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc)
    assert says in line and "hunter2" not in line, line


def test_the_word_once_elsewhere_does_not_swallow_what_follows_the_dashes(afk, sql):
    proc = afk("enqueue", "--agent", "a", "--title", "once", "--", "rm", "-rf", "/")
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr
    assert sql.one("SELECT count(*) FROM afk_task") == 0


def test_a_done_replay_with_another_result_is_refused(afk, sql):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    task = afk.json("claim", "--agent", "a")
    args = ("done", task["id"], "--token", str(task["token"]))
    afk.json(*args, "--result", '{"pr": 1}')
    assert afk.json(*args, "--result", '{"pr": 1}')["result"] == {"pr": 1}  # the same: a replay
    other = afk(*args, "--result", '{"pr": 2}')
    assert other.returncode == 4 and "another result" in one_line(other)
    assert sql.one("SELECT result FROM afk_task") == {"pr": 1}


@pytest.mark.parametrize("lease", ["0.001", "0.5", "nan", "inf"])
def test_a_lease_under_a_second_is_refused(afk, sql, lease):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    proc = afk("claim", "--agent", "a", "--lease", lease)
    assert proc.returncode == 2 and "lease" in one_line(proc)
    assert sql.one("SELECT state::text FROM afk_task") == "todo"


@pytest.mark.parametrize(
    "name, value",
    [
        ("AFK_BACKOFF_BASE_SECONDS", "nan"),
        ("AFK_BACKOFF_CAP_SECONDS", "inf"),
        ("AFK_MAX_ATTEMPTS", "1_000"),
        ("AFK_LEASE_SECONDS", "-inf"),
        ("AFK_RECLAIM_INTERVAL", "1_0s"),
    ],
)
def test_settings_take_plain_finite_numbers_only(afk, name, value):
    proc = afk("status", env={name: value})
    assert proc.returncode == 2 and name in one_line(proc)


def test_cli_statements_have_a_timeout(afk, sql, dsn):
    import psycopg

    afk.json("enqueue", "--agent", "a", "--title", "t")
    task = afk.json("claim", "--agent", "a")
    with psycopg.connect(dsn) as locker:
        locker.execute("SELECT 1 FROM afk_task FOR UPDATE")
        proc = afk(
            "heartbeat", task["id"], "--token", str(task["token"]), env={"AFK_COMMAND_TIMEOUT": "1"}
        )
        locker.rollback()
    assert proc.returncode == 1 and "statement timeout" in one_line(proc)


def test_pause_with_no_selector_says_so_before_reaching_any_database(afk):
    proc = afk("pause", env={"AFK_DSN": "postgresql://nobody@127.0.0.1:1/none"})
    assert proc.returncode == 2 and "--agent" in one_line(proc) and "--runner" in proc.stderr


def test_version(afk):
    from importlib.metadata import version

    proc = afk("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"afk {version('afk-watchdog')}"


def test_a_client_older_than_the_schema_says_so(afk, sql):
    sql("INSERT INTO afk_schema_version (version, name) VALUES (999, '0999_future.sql')")
    proc = afk("migrate")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["version"] == 999
    assert "newer than this afk" in proc.stderr
    # N49: and every command that uses the queue says so, once
    for args in (["status"], ["enqueue", "--agent", "a", "--title", "t"]):
        proc = afk(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("newer than this afk") == 1, proc.stderr


def test_a_long_tracebacks_excerpt_keeps_its_exception_line(afk):
    error = "Traceback (most recent call last):\n" + '  File "m.py", line 7, in f\n' * 400
    error += "KeyError: 'user_id'"
    afk.json("enqueue", "--agent", "a", "--title", "t", "--max-attempts", "1")
    task = afk.json("claim", "--agent", "a")
    afk("fail", task["id"], "--token", str(task["token"]), "--error", error)
    for fmt in ("text", "html", "slack"):
        out = afk("digest", "--dry-run", "--format", fmt).stdout
        excerpt = [line for line in out.splitlines() if "error:" in line or "user_id" in line]
        assert out.count("KeyError") >= 2, (fmt, excerpt)  # the group and the task's excerpt


@pytest.mark.parametrize("agent", ["bob ", " bob", "bo\nb", "b\tob"])
def test_ids_that_would_read_the_same_as_another_are_refused(afk, sql, agent):
    proc = afk("enqueue", "--agent", agent, "--title", "t")
    assert proc.returncode == 2 and "agent id" in one_line(proc)
    assert sql.one("SELECT count(*) FROM afk_task") == 0


def test_retry_of_many_unknown_ids_says_so_in_a_short_line(afk):
    import uuid

    proc = afk("retry", *(str(uuid.uuid4()) for _ in range(2000)))
    assert proc.returncode == 2 and len(one_line(proc)) < 400 and "1995 more" in proc.stderr


def test_enqueue_refuses_a_file_with_no_end_of_line_without_reading_it_all(afk, sql):
    proc = afk("enqueue", "--agent", "a", "--file", "/dev/zero")
    assert proc.returncode == 2 and "longer than" in one_line(proc)
    assert sql.one("SELECT count(*) FROM afk_task") == 0


def test_a_hook_payload_with_a_bom_is_read(afk):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    task = afk.json("claim", "--agent", "a")
    payload = json.dumps(
        {
            "session_id": "s",
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": "/p/x.py"},
        }
    )
    env = {"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])}
    proc = afk("hook", input="\ufeff" + payload, env=env)
    assert proc.returncode == 0 and "not JSON" not in proc.stderr
    assert afk.json("show", task["id"])["checkpoint"]["files_touched"] == ["/p/x.py"]


@pytest.mark.parametrize(
    "token",
    # M9: out of a bigint's range, the database answered with an error, not a verdict
    ["", "abc", "1.5", "99999999999999999999999999", "9223372036854775808", "-1", "0", "1e3"],
)
def test_an_agent_whose_task_token_is_unusable_is_denied_its_tools(afk, token):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    task = afk.json("claim", "--agent", "a")
    payload = json.dumps(
        {
            "session_id": "s",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build"},
        }
    )
    proc = afk("hook", input=payload, env={"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": token})
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize("token", ["99999999999999999999999999", "0", "-3", "x"])
def test_a_token_that_cannot_be_one_is_one_line_exit_2(afk, token):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    task = afk.json("claim", "--agent", "a")
    proc = afk("heartbeat", task["id"], "--token", token)
    assert proc.returncode == 2 and "is not a lease token" in proc.stderr, proc.stderr
    proc = afk("heartbeat", env={"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": token})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


def test_a_mistyped_flag_shows_the_commands_own_usage(afk):
    proc = afk("claim", "--agnet", "x")
    assert proc.returncode == 2 and "usage: afk claim" in proc.stderr


def test_without_the_gate_no_stop_hook_is_installed(afk):
    assert "Stop" not in afk.json("hooks", "claude")["hooks"]
    assert "Stop" in afk.json("hooks", "claude", "--gate")["hooks"]


def test_digest_options_that_do_not_go_together_are_refused_before_any_database(afk):
    env = {"AFK_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    for args in (["status", "--format", "slack"], ["send", "--dry-run"], ["status", "--force"]):
        proc = afk("digest", *args, env=env)
        assert proc.returncode == 2 and "unreachable" not in proc.stderr, (args, proc.stderr)
        one_line(proc)


@pytest.mark.parametrize(
    "patterns, says",
    [
        ("usage_limit:([unclosed", "not a regular expression"),
        # M24: a misspelt class was taken as a bare regex that never matches
        ("usagelimit:Quota exceeded", "'usagelimit' is not a class"),
        ("frobnicate:x", "'frobnicate' is not a class"),
        ("Quota exceeded", ""),  # a bare regex: a usage limit
        ("usage_limit:retry after: (?P<reset>\\S+)", ""),
    ],
)
def test_limit_patterns_are_checked_when_settings_load(afk, patterns, says):
    proc = afk("status", env={"AFK_LIMIT_PATTERNS": patterns})
    if says:
        assert proc.returncode == 2 and says in one_line(proc)
    else:
        assert proc.returncode == 0, proc.stderr
