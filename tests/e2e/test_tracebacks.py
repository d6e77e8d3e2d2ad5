"""No traceback ever reaches a user: the round-three review's traceback
classes (N16-N24), each with its siblings. Bad input: exit 2, one line,
nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "watchdog.cli"]


def run(args, env, cwd, input=None):
    return subprocess.run(
        [*CLI, *args], env=env, cwd=cwd, capture_output=True, timeout=60, input=input
    )


def one_line(proc) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("afk: no DSN")]
    assert len(lines) == 1, err
    return lines[0]


def base_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AFK_", "PG"))}
    env["AFK_HOME"] = str(tmp_path / "home")
    return env


@pytest.mark.parametrize("name", ["AFK_DSN", "AFK_HOME"])
def test_a_variable_that_is_not_utf8_is_one_line_and_leaves_nothing(tmp_path, name):
    env = {k.encode(): v.encode() for k, v in base_env(tmp_path).items()}
    env[name.encode()] = b"postgresql://x\xff@/afk" if name == "AFK_DSN" else b"x\xffy"
    proc = subprocess.run(
        [*CLI, "claim", "--agent", "a"], env=env, cwd=tmp_path, capture_output=True, timeout=60
    )
    assert proc.returncode == 2
    assert name in one_line(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no half-made folder here


def test_an_afk_home_under_proc_is_one_line(tmp_path):
    env = {**base_env(tmp_path), "AFK_HOME": "/proc/afkhome"}
    proc = run(["status"], env, tmp_path)
    assert proc.returncode == 2 and "AFK_HOME" in one_line(proc)


@pytest.fixture
def task(afk):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    return afk.json("claim", "--agent", "a")


@pytest.mark.parametrize("kind", ["exec format", "missing interpreter", "not executable"])
def test_once_of_a_program_that_cannot_start_records_nothing(afk, task, tmp_path, sql, kind):
    program = tmp_path / "prog"
    if kind == "exec format":
        program.write_bytes(b"\x00\x01\x02 not a program")
        program.chmod(0o755)
    elif kind == "missing interpreter":
        program.write_text("#!/nonexistent/interpreter\necho hi\n")
        program.chmod(0o755)
    else:
        program.write_text("echo hi\n")
        program.chmod(0o644)
    proc = afk("once", task["id"], "--token", str(task["token"]), "--name", "n", "--", str(program))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql("SELECT * FROM afk_task_effect") == []  # no phantom "started" effect


def test_hooks_install_through_a_symlink_loop_is_one_line(afk, tmp_path):
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    proc = afk("hooks", "claude", "--install", str(tmp_path / "a.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


DEEP = '{"a":' + "[" * 5000 + "]" * 5000 + "}"


@pytest.mark.parametrize("where", ["--spec", "--patch", "--result", "a JSONL line", "a hook"])
def test_deeply_nested_json_is_refused_in_one_line(afk, task, tmp_path, sql, where):
    before = sql.fingerprint()
    if where == "--spec":
        proc = afk("enqueue", "--agent", "a", "--title", "x", "--spec", DEEP)
    elif where == "--patch":
        proc = afk("checkpoint", task["id"], "--token", str(task["token"]), "--patch", DEEP)
    elif where == "--result":
        proc = afk("done", task["id"], "--token", str(task["token"]), "--result", DEEP)
    elif where == "a JSONL line":
        proc = afk(
            "enqueue",
            "--agent",
            "a",
            "--file",
            "-",
            input=json.dumps({"title": "x"}) + "\n" + '{"title": "y", "spec": ' + DEEP + "}\n",
        )
    else:
        proc = afk(
            "hook", input='{"hook_event_name": "Stop", "session_id": "s", "x": ' + DEEP + "}"
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr
        return
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


@pytest.mark.parametrize(
    "template",
    [
        "https://t/{nope}/{task_id}",
        "https://t/{0}",
        "https://t/{task_id.__class__}",
        "https://t/{task_id",
    ],
)
def test_a_bad_link_template_is_refused_before_anything(afk, template):
    proc = afk("digest", "--dry-run", env={"AFK_DIGEST_LINK_TEMPLATE": template})
    assert proc.returncode == 2 and "link_template" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_crash_while_sending_never_wedges_the_ledger(dsn, sql, receiver):
    """A destination that raises something unexpected: the delivery is
    recorded as failed (to be retried), not left `sending` for good."""
    from watchdog import delivery
    from watchdog.config import DigestSettings
    from watchdog.db import Database
    from watchdog.destinations import Slack

    db = Database(dsn)
    settings = DigestSettings(slack_url=receiver.url())
    original = Slack.send_digest
    try:
        Slack.send_digest = lambda *a, **k: {}["boom"]  # type: ignore[method-assign]
        outcomes = delivery.send_due(db, settings, force=True)
    finally:
        Slack.send_digest = original  # type: ignore[method-assign]
        db.close()
    assert [o.state for o in outcomes] != ["sending"]
    assert sql.one("SELECT count(*) FROM afk_digest_delivery WHERE state = 'sending'") == 0
    assert "KeyError" in sql.one("SELECT last_error FROM afk_digest_delivery")


def test_a_closed_pipe_ends_a_command_quietly(afk):
    for _ in range(3):
        afk.json("enqueue", "--agent", "a", "--title", "t" * 5000)
    proc = subprocess.run(
        f"{' '.join(afk.command('dead'))} >/dev/null; "
        f"{' '.join(afk.command('status'))} | head -c 1 >/dev/null; "
        f"{' '.join(afk.command('resume-brief', '00000000-0000-0000-0000-000000000000'))} | true",
        shell=True,
        env=afk.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "--agent", "z", "--title", "t", "--spec", "@/dev/zero"],
        ["enqueue", "--agent", "z", "--file", "/dev/zero"],
        ["import", "prd", "/dev/zero", "--agent", "z"],
    ],
    ids=["--spec @", "--file", "import prd"],
)
def test_an_endless_input_is_refused_in_bounded_time_and_memory(afk, sql, args):
    """Sweep round five, also measured: /dev/zero given to an option that
    reads a file was a MemoryError. One line, exit 2, nothing created."""
    before = sql.fingerprint()
    proc = afk(*args)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr, proc.stderr
    assert sql.fingerprint() == before


@pytest.mark.parametrize("kind", ["/dev/zero", "a named pipe", "a folder", "2 MB", "not UTF-8"])
@pytest.mark.parametrize("how", ["--config", "AFK_CONFIG"])
def test_a_settings_file_that_is_endless_or_not_a_file_is_one_line(afk, sql, tmp_path, kind, how):
    """R11: `afk --config /dev/zero status` ran out of memory (1.8 GB); a pipe
    with no writer would block for ever. Refused before it is read: one line,
    exit 2, at once, by the flag and the variable alike."""
    path = {
        "/dev/zero": "/dev/zero",
        "a named pipe": str(tmp_path / "fifo"),
        "a folder": str(tmp_path),
        "2 MB": str(tmp_path / "big.toml"),
        "not UTF-8": str(tmp_path / "latin1.toml"),
    }[kind]
    if kind == "a named pipe":
        os.mkfifo(path)
    (tmp_path / "big.toml").write_text("# " + "x" * (2 << 20) + "\n")
    (tmp_path / "latin1.toml").write_bytes(b'agent = "caf\xe9"\n')
    before = sql.fingerprint()
    args, env = (["--config", path], {}) if how == "--config" else ([], {"AFK_CONFIG": path})
    proc = afk(*args, "status", env=env)  # (a timeout of 60 s: a pipe would block it)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr, proc.stderr
    assert path in proc.stderr
    assert sql.fingerprint() == before
