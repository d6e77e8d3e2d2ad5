"""The afk CLI contract: commands, JSON fields, exit codes, and bad input that
changes nothing. Calls are real subprocesses, except the bad-input table,
which runs through cli.main in-process (each exit status has its own
subprocess test)."""

from __future__ import annotations

import json

import pytest
from helpers import poll

CLAIM_FIELDS = {
    "id",
    "agent_id",
    "ordinal",
    "title",
    "spec",
    "state",
    "checkpoint",
    "attempts",
    "max_attempts",
    "lease_until",
    "token",
}


def test_a_task_s_life_through_the_cli(afk):
    out = afk.json(
        "enqueue",
        "--agent",
        "A",
        "--title",
        "fix it",
        "--spec",
        '{"issue": 12}',
        "--key",
        "issue-12",
        "--max-attempts",
        "3",
    )
    assert len(out["enqueued"]) == 1 and out["duplicates"] == []
    assert afk.json("enqueue", "--agent", "A", "--title", "fix it", "--key", "issue-12") == {
        "enqueued": [],
        "duplicates": ["issue-12"],
    }

    task = afk.json("claim", "--agent", "A", "--runner", "r1", "--lease", "60")
    assert set(task) >= CLAIM_FIELDS
    assert task["spec"] == {"issue": 12} and task["max_attempts"] == 3
    assert task["state"] == "running"
    tid, token = task["id"], str(task["token"])

    assert afk.json("checkpoint", tid, "--token", token, "--patch", '{"step": 1}')[
        "checkpoint"
    ] == {"step": 1}
    assert afk.json("heartbeat", tid, "--token", token)["state"] == "running"
    assert afk.json("done", tid, "--token", token, "--result", '{"pr": 3}')["state"] == "done"
    assert afk.json("status", "--agent", "A") == {
        "todo": 0,
        "running": 0,
        "paused": 0,
        "done": 1,
        "failed": 0,
        "blocked": 0,
        "retrying": 0,
    }
    shown = afk.json("show", tid)
    assert [h["reason"] for h in shown["history"]] == ["claimed", "done"]


def test_claim_with_nothing_to_claim_exits_3_saying_when_the_next_is_due(afk):
    proc = afk("claim", "--agent", "nobody")
    assert proc.returncode == 3 and json.loads(proc.stdout) == {"next_at": None}


def test_agent_and_runner_from_the_environment(afk):
    env = {"AFK_AGENT_ID": "envagent", "AFK_RUNNER_ID": "envrunner"}
    afk.json("enqueue", "--title", "t", env=env)
    task = afk.json("claim", env=env)
    assert task["agent_id"] == "envagent" and task["lease_owner"] == "envrunner"
    assert afk.json("pause", env=env) == {"paused": 1}


def test_lease_lost_exits_4(afk, sql):
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task = afk.json("claim", "--agent", "A", "--runner", "r1")
    sql.expire(task["id"])
    afk.json("reclaim")
    again = afk.json("claim", "--agent", "A", "--runner", "r2")
    assert again["token"] > task["token"]
    before = sql.fingerprint()
    for args in (
        ["checkpoint", task["id"], "--token", str(task["token"]), "--patch", "{}"],
        ["heartbeat", task["id"], "--token", str(task["token"])],
        ["done", task["id"], "--token", str(task["token"])],
        ["fail", task["id"], "--token", str(task["token"]), "--error", "x"],
    ):
        proc = afk(*args)
        assert proc.returncode == 4, (args, proc.stderr)
        assert "lease" in proc.stderr and proc.stdout == ""
    assert sql.fingerprint() == before


def test_pause_then_fail_then_dead_then_retry(afk):
    afk.json("enqueue", "--agent", "A", "--title", "t", "--max-attempts", "1")
    task = afk.json("claim", "--agent", "A", "--runner", "r")
    assert afk.json("pause", "--agent", "A", "--runner", "r") == {"paused": 1}
    task = afk.json("claim", "--agent", "A", "--runner", "r")
    assert task["attempts"] == 1
    assert (
        afk.json("fail", task["id"], "--token", str(task["token"]), "--error", "boom")["state"]
        == "failed"
    )
    dead = afk.json("dead", "--agent", "A", "--since", "1h")
    assert [d["id"] for d in dead] == [task["id"]] and dead[0]["last_error"] == "boom"
    assert afk.json("retry", task["id"]) == {"retried": [task["id"]]}
    assert afk.json("status")["todo"] == 1


def test_enqueue_from_a_jsonl_file_and_stdin(afk, tmp_path):
    lines = [{"title": "a", "key": "ka"}, {"title": "b", "spec": {"x": 1}}, {"title": "c"}]
    path = tmp_path / "plan.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    assert len(afk.json("enqueue", "--agent", "A", "--file", str(path))["enqueued"]) == 3
    out = afk.json("enqueue", "--agent", "A", "--file", "-", input=json.dumps(lines[0]) + "\n")
    assert out == {"enqueued": [], "duplicates": ["ka"]}
    titles = [afk.json("claim", "--agent", "A")["title"] for _ in range(3)]
    assert titles == ["a", "b", "c"]


def test_db_unreachable_exits_1_with_a_one_line_reason_and_no_password(afk):
    proc = afk("status", "--dsn", "postgresql://afk:s3cret-pw@127.0.0.1:1/afk?connect_timeout=2")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "unreachable" in proc.stderr
    assert "s3cret-pw" not in proc.stderr


def test_schema_missing_says_to_migrate(empty_dsn):
    from helpers import Afk

    proc = Afk(empty_dsn)("status")
    assert proc.returncode == 1 and "afk migrate" in proc.stderr


def test_each_exit_status_from_a_real_process(afk, sql):
    """The contract, once per exit status, as a script sees it."""
    bad = afk("enqueue", "--agent", "A", "--title", "t", "--spec", "{nope")
    assert (bad.returncode, bad.stdout) == (2, "") and bad.stderr.startswith("afk: ")
    assert afk("claim", "--agent", "A").returncode == 3  # nothing to claim
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task = afk.json("claim", "--agent", "A", "--runner", "r")  # 0
    sql.expire(task["id"])
    afk.json("reclaim")
    lost = afk("done", task["id"], "--token", str(task["token"]))
    assert lost.returncode == 4 and "lease lost" in lost.stderr
    down = afk("status", "--dsn", "postgresql://postgres@127.0.0.1:1/none")
    assert down.returncode == 1 and "unreachable" in down.stderr


@pytest.mark.parametrize(
    "bad_line",
    [
        '{"title": "x"',
        "[1]",
        '{"spec": {}}',
        '{"title": ""}',
        '{"title": "x", "spec": [1]}',
        '{"title": "x", "nope": 1}',
    ],
)
def test_a_bad_jsonl_line_refuses_the_whole_file(afk, sql, tmp_path, bad_line):
    path = tmp_path / "plan.jsonl"
    path.write_text('{"title": "good 1"}\n' + bad_line + '\n{"title": "good 2"}\n')
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "A", "--file", str(path))
    assert proc.returncode == 2 and "nothing was enqueued" in proc.stderr
    assert sql.fingerprint() == before


def test_spec_and_patch_from_files(afk, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"body": "z" * 200_000}))
    afk.json("enqueue", "--agent", "A", "--title", "t", "--spec", f"@{spec}")
    task = afk.json("claim", "--agent", "A")
    assert len(task["spec"]["body"]) == 200_000
    out = afk.json("checkpoint", task["id"], "--token", str(task["token"]), "--patch", f"@{spec}")
    assert out["checkpoint"] == task["spec"]


def test_quotes_semicolons_and_unicode_are_stored_verbatim(afk, sql):
    agent = "a'b\";c -- ü🙂 $(rm -rf /)"
    key = "k'; DROP TABLE afk_task; --"
    afk.json("enqueue", "--agent", agent, "--title", "t'\"", "--key", key)
    row = sql("SELECT agent_id, idem_key, title FROM afk_task")[0]
    assert row == {"agent_id": agent, "idem_key": key, "title": "t'\""}
    assert afk.json("claim", "--agent", agent)["agent_id"] == agent


@pytest.mark.parametrize("command", sorted(__import__("watchdog.cli").cli.COMMANDS))
def test_an_unknown_option_of_every_command_is_its_usage_and_exit_2(afk, sql, command):
    """`afk loop --agent x --bogus 3 -- true` ended in a traceback (the
    subcommand's name and loop's command shared one attribute)."""
    before = sql.fingerprint()
    args = [command, "--bogus-option", "3"]
    if command in ("loop", "once"):
        args += ["--", "true"]
    proc = afk(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert f"usage: afk {command}" in proc.stderr, proc.stderr  # its own usage, one error
    assert proc.stderr.strip().splitlines()[-1].startswith("afk: error: "), proc.stderr
    assert sql.fingerprint() == before


def test_a_second_question_says_the_task_waits_for_an_answer(afk):
    """M17: the second `afk ask` said "its lease ran out and it was
    reclaimed, or it was paused": it waits for a person's answer."""
    afk.json("enqueue", "--agent", "q", "--title", "t")
    task = afk.json("claim", "--agent", "q")
    first = afk("ask", "staging or prod?", task["id"], "--token", str(task["token"]))
    assert first.returncode == 0, first.stderr
    again = afk("ask", "and the region?", task["id"], "--token", str(task["token"]))
    assert again.returncode == 4, again.stderr
    assert "waiting for a person" in again.stderr and "reclaimed" not in again.stderr


def test_a_token_issued_before_says_the_task_was_claimed_again(afk, sql):
    """N33: a token the task had once (not one never issued) is exit 4 with
    the token that replaced it."""
    afk.json("enqueue", "--agent", "n", "--title", "t")
    first = afk.json("claim", "--agent", "n")
    sql.expire(first["id"])
    afk("reclaim")
    second = afk.json("claim", "--agent", "n")
    assert second["token"] > first["token"]
    stale = afk("heartbeat", first["id"], "--token", str(first["token"]))
    assert stale.returncode == 4, stale.stderr
    said = f"claimed again since (token {second['token']} replaced {first['token']})"
    assert said in stale.stderr


def test_not_before_keeps_a_task_unclaimable_until_then_and_claim_says_when(afk, sql):
    """Issue 32 item 2: --not-before +6s: claim exits 3 naming next_at, the
    same time afk show gives, then the task is claimable. (With +2s a loaded
    machine's claim came after the task was due.)"""
    (task_id,) = afk.json(
        "enqueue", "--agent", "A", "--title", "after the deploy", "--not-before", "+6s"
    )["enqueued"]
    waiting = afk("claim", "--agent", "A")
    assert waiting.returncode == 3, waiting.stderr
    next_at = json.loads(waiting.stdout)["next_at"]
    assert next_at == afk.json("show", task_id)["run_after"]
    ahead = sql.one("SELECT extract(epoch FROM run_after - created_at) FROM afk_task")
    assert 5.5 < float(ahead) < 6.5
    poll(lambda: sql.one("SELECT run_after <= now() FROM afk_task"), timeout=30)
    assert afk.json("claim", "--agent", "A")["id"] == task_id


def test_not_before_takes_an_iso_time_and_a_file_line(afk, sql, tmp_path):
    lines = tmp_path / "backlog.jsonl"
    lines.write_text(
        json.dumps({"title": "at two", "not_before": "2099-01-02T02:00:00+00:00"})
        + "\n"
        + json.dumps({"title": "now"})
        + "\n"
    )
    afk.json("enqueue", "--agent", "A", "--file", str(lines))
    afk.json("enqueue", "--agent", "A", "--title", "later", "--not-before", "2099-01-03T02:00Z")
    rows = sql("SELECT title, run_after FROM afk_task ORDER BY ordinal")
    assert [(r["title"], r["run_after"] and r["run_after"].isoformat()) for r in rows] == [
        ("at two", "2099-01-02T02:00:00+00:00"),
        ("now", None),
        ("later", "2099-01-03T02:00:00+00:00"),
    ]
    assert afk.json("claim", "--agent", "A")["title"] == "now"
    proc = afk("claim", "--agent", "A")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["next_at"] == "2099-01-02T02:00:00+00:00"


@pytest.mark.parametrize(
    "value, message",
    [
        ("tomorrow", "not an ISO 8601 time or +DURATION"),
        ("+forever", "is not +DURATION"),
        ("", "must be an ISO 8601 time"),
        ("+400d", "more than a year ahead"),
        ("9999-12-31T23:00Z", "too far ahead"),
    ],
)
def test_a_bad_not_before_is_one_line_and_enqueues_nothing(afk, sql, value, message):
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "A", "--title", "t", "--not-before", value)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


def test_the_variables_afk_gives_an_agent_are_no_unknown_settings(afk):
    """P28 and the house's item 2: an afk command run in a task's worktree
    (AFK_WORKTREE, AFK_BRANCH, AFK_BASE_SHA, AFK_PORT) or a hook doctor
    fires (AFK_HOOK_EXPLAIN) warned "unknown setting" for each variable afk
    itself had set."""
    given = {
        "AFK_WORKTREE": "/tmp/w",
        "AFK_BRANCH": "afk/x",
        "AFK_BASE_SHA": "0" * 40,
        "AFK_PORT": "20000",
        "AFK_HOOK_EXPLAIN": "1",
        "AFK_ALIVE_FILE": "/tmp/afk-alive-x",
    }
    proc = afk("status", env=given)
    assert proc.returncode == 0 and "unknown setting" not in proc.stderr, proc.stderr
    typo = afk("status", env={"AFK_LEASE_SECOND": "5"})
    assert "unknown setting AFK_LEASE_SECOND" in typo.stderr  # (a typo still is)


def test_cancel_ends_tasks_a_person_no_longer_wants_all_or_nothing(afk, sql):
    """P29: no command cancelled a task: one whose repository was gone made
    every loop of its agent stop again. `afk cancel` ends tasks not running
    and not ended, failed with the reason; its cancelling dependents with it."""
    (gone,) = afk.json("enqueue", "--agent", "c", "--title", "gone", "--key", "g")["enqueued"]
    (after,) = afk.json("enqueue", "--agent", "c", "--title", "after it", "--after", "g")[
        "enqueued"
    ]
    (other,) = afk.json("enqueue", "--agent", "c", "--title", "other")["enqueued"]
    task = afk.json("claim", "--agent", "c", "--runner", "r")
    assert task["id"] == gone
    before = sql.fingerprint()
    refused = afk("cancel", gone, other)  # running: nothing changes
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "nothing was cancelled" in refused.stderr and sql.fingerprint() == before
    afk.json("pause", gone, "--token", str(task["token"]))
    out = afk.json("cancel", gone, "--reason", "its repository is gone")
    assert out == {"cancelled": [gone]}
    shown = afk.json("show", gone)
    assert shown["state"] == "failed"
    assert shown["last_error"] == "cancelled by a person: its repository is gone"
    assert afk.json("show", after)["state"] == "failed"  # (it cancels on a failed dependency)
    assert afk.json("show", other)["state"] == "todo"
    again = afk("cancel", gone)
    assert again.returncode == 2 and "nothing was cancelled" in again.stderr


def test_not_before_past_a_year_is_said_with_the_flags_name(afk, sql):
    """P30: `--not-before +400d` said "not_before must be ..." (the flag is
    --not-before)."""
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "n", "--title", "t", "--not-before", "+400d")
    assert proc.returncode == 2 and "--not-before '+400d' is more than a year" in proc.stderr
    assert sql.fingerprint() == before


def test_the_watchdogs_help_shows_its_own_flags_and_points_to_the_settings(afk):
    """P34: `afk watchdog --help` and `run --help` say their flags and where
    the settings are; `afk watchdog settings` prints the table."""
    for args in (["watchdog", "--help"], ["watchdog", "run", "--help"]):
        out = afk(*args)
        assert out.returncode == 0 and len(out.stdout.splitlines()) < 35, out.stdout
        assert "AFK_RECLAIM_INTERVAL" not in out.stdout
        assert "`afk watchdog settings`" in " ".join(out.stdout.split())
    assert "--notify-every" in afk("watchdog", "run", "--help").stdout
    table = afk("watchdog", "settings")
    assert table.returncode == 0 and table.stderr == ""
    assert "AFK_RECLAIM_INTERVAL" in table.stdout and "AFK_DIGEST_SMTP_URL" in table.stdout
