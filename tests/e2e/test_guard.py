"""The run's guard in `afk loop`: a hung agent is stopped (a stall, or the
cap on a run), an agent never outlives its loop, and a command that cannot
run stops the loop at once instead of failing the backlog. Real loops, real
process groups and signals, the real database; the agents are small scripts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import Afk, poll
from helpers.service import Service, free_port

FAST = {
    "AFK_BACKOFF_BASE_SECONDS": "1",
    "AFK_BACKOFF_CAP_SECONDS": "2",
    "AFK_AGENT_GRACE_SECONDS": "2",
}

#: an agent that logs its pid and its child's, starts a child that sleeps,
#: then does what AGENT_DOES says: "silent" (sleeps), "chatty" (a line every
#: 0.3 s for AGENT_FOR seconds, then done), "hooks" (fires the installed
#: afk hook every 0.3 s for AGENT_FOR seconds, saying nothing), "forever"
#: (a line every 0.3 s, never done)
AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    child = subprocess.Popen(["sleep", "300"])
    with open(os.environ["AGENT_LOG"], "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "child": child.pid}) + "\\n")
    does, lasts = os.environ["AGENT_DOES"], float(os.environ.get("AGENT_FOR", "0"))
    end = time.monotonic() + lasts
    payload = json.dumps({"session_id": "s", "hook_event_name": "PostToolUse",
                          "tool_name": "Bash", "tool_input": {"command": "ls"}})
    if does == "hangs":  # says what it does, on both streams, then hangs
        print("cloning the fixtures", flush=True)
        print("waiting for the lock on build/", file=sys.stderr, flush=True)
        time.sleep(300)
    if does == "silent":
        time.sleep(300)
    if does == "http":  # PostToolUse as Claude Code posts it, by the installed settings
        import re, urllib.request
        settings = json.load(open(os.environ["AGENT_SETTINGS"]))
        entry = settings["hooks"]["PostToolUse"][0]["hooks"][0]
        allowed = set(entry.get("allowedEnvVars", []))
        fill = lambda v: re.sub("[$][{]?([A-Za-z0-9_]+)[}]?",
                                lambda m: os.environ.get(m.group(1), "")
                                if m.group(1) in allowed else "", v)
        headers = {k: fill(v) for k, v in entry["headers"].items()}
        headers["Content-Type"] = "application/json"
    percent = 0
    while does == "forever" or time.monotonic() < end:
        if does == "hooks":
            subprocess.run([os.environ["AFK"], "hook"], input=payload.encode(),
                           capture_output=True)
        elif does == "http":
            request = urllib.request.Request(entry["url"], data=payload.encode(),
                                             headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status == 200
        elif does == "progress":  # a progress bar: bytes, never a newline
            percent += 1
            print(f"\\rbuilding {percent}%", end="", flush=True)
        else:
            print("working", flush=True)
        time.sleep(0.3)
    child.kill()
    """
)
AFK = str(Path(sys.executable).parent / "afk")


class Guarded:
    def __init__(self, afk: Afk, tmp: Path) -> None:
        self.afk, self.tmp = afk, tmp
        self.script = tmp / "agent.py"
        self.script.write_text(AGENT)
        self.log = tmp / "agent.log"
        self.log.write_text("")
        self.err = tmp / "loop.err"

    def enqueue(self, n: int = 1, agent: str = "g", **task: object) -> list[str]:
        lines = "".join(json.dumps({"title": f"t{i}", **task}) + "\n" for i in range(n))
        return list(
            self.afk.json("enqueue", "--agent", agent, "--file", "-", input=lines)["enqueued"]
        )

    def loop(
        self,
        *args: str,
        does: str = "silent",
        lasts: float = 0,
        agent: str = "g",
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        env = {
            **self.afk.env,
            **(env or {}),
            **FAST,
            "AGENT_LOG": str(self.log),
            "AGENT_DOES": does,
            "AGENT_FOR": str(lasts),
            "AFK": AFK,
        }
        command = command or [sys.executable, str(self.script)]
        with self.err.open("wb") as err:
            return subprocess.Popen(
                Afk.command("loop", "--agent", agent, *args, "--", *command),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def pids(self) -> list[int]:
        runs = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [p for r in runs for p in (r["pid"], r["child"])]

    def said(self) -> str:
        return self.err.read_text()


@pytest.fixture
def guarded(afk, tmp_path):
    g = Guarded(afk, tmp_path)
    yield g
    for pid in g.pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_silent_agent_is_stopped_as_stalled_then_spends_an_attempt_the_second_time(guarded, dsn):
    (task_id,) = guarded.enqueue(max_attempts=1)
    service = Service(dsn)  # it counts the runs that end while it runs
    try:
        poll(lambda: service.value("afk_agent_runs_total", outcome="stalled") == 0, timeout=60)
        proc = guarded.loop("--stall-after", "2s")
        assert proc.wait(timeout=120) == 0, guarded.said()
        poll(lambda: service.value("afk_agent_runs_total", outcome="stalled") == 2, timeout=60)
    finally:
        service.cleanup()
    task = guarded.afk.json("show", task_id)
    assert [(r["outcome"], r["attempt_spent"]) for r in task["runs"]] == [
        ("stalled", False),
        ("stalled", True),
    ], task["runs"]
    assert task["state"] == "failed" and "twice in a row" in task["last_error"]
    assert "no output and no hook for 2s" in task["last_error"]
    # each run's whole group was stopped: the agent and the child it started
    assert len(guarded.pids()) == 4
    poll(lambda: not any(alive(p) for p in guarded.pids()), timeout=30)
    # the morning's story counts them, and the time they took
    digest = guarded.afk("digest", "--dry-run", "--format", "text").stdout
    night = digest.split("The night:", 1)[1].split("\n\n", 1)[0]
    (line,) = [x for x in night.splitlines() if x.startswith("  - g:")]
    assert "2 hung run(s) stopped (" in line, digest


def test_a_stalled_run_keeps_its_last_lines_on_both_streams_as_its_error(guarded):
    (task_id,) = guarded.enqueue(max_attempts=1)
    proc = guarded.loop("--stall-after", "2s", does="hangs")
    assert proc.wait(timeout=120) == 0, guarded.said()
    task = guarded.afk.json("show", task_id)
    assert task["state"] == "failed", task
    for run in task["runs"]:
        assert run["outcome"] == "stalled"
        for said in ("cloning the fixtures", "waiting for the lock on build/"):
            assert said in run["output_tail"], run
    for said in ("cloning the fixtures", "waiting for the lock on build/"):
        assert said in task["last_error"], task["last_error"]


def test_a_stall_given_back_keeps_its_last_lines_as_the_tasks_error(guarded):
    """R10: after a first stall (given back, no attempt spent) `afk show`
    said last_error null; its last lines, on both streams, were only in its
    run's tail. They are its task's error from then on."""
    (task_id,) = guarded.enqueue(max_attempts=2)
    proc = guarded.loop("--stall-after", "2s", does="hangs")
    try:

        def given_back() -> dict | None:
            task = guarded.afk.json("show", task_id)
            first = task["runs"][:1]
            return task if first and first[0]["outcome"] == "stalled" else None

        task = poll(given_back, timeout=120)
        assert task["runs"][0]["attempt_spent"] is False, task["runs"]
        error = task["last_error"] or ""
        assert "no output and no hook for 2s" in error, task
        for said in ("cloning the fixtures", "waiting for the lock on build/"):
            assert said in error, error
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_the_status_page_shows_a_running_tasks_last_sign_of_life(guarded, dsn):
    (task_id,) = guarded.enqueue()
    service = Service(dsn)
    proc = guarded.loop("--lease", "1", does="chatty", lasts=30)
    try:

        def shown() -> str | None:
            page = service.get("/")
            text = page.text if page is not None and page.status_code == 200 else ""
            return text if "last sign of life" in text else None

        page = poll(shown, timeout=60)
        assert "working" in page
        (run,) = guarded.afk.json("show", task_id)["runs"]
        assert run["last_sign"] == "working" and run["last_sign_at"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        service.cleanup()


@pytest.mark.parametrize("does", ["chatty", "hooks", "progress"])
def test_an_agent_that_shows_signs_of_life_is_not_stopped(guarded, does):
    """A line a second, or a hook fired (a tool call) with nothing printed:
    both are signs of life, for longer than the stall time. The stall time
    leaves a margin for a loaded machine, where an interpreter's start and a
    hook's answer together can take seconds (a 2 s stall once stopped the
    hooks agent in CI before its first hook had answered)."""
    (task_id,) = guarded.enqueue()
    proc = guarded.loop("--stall-after", "6s", does=does, lasts=9)
    assert proc.wait(timeout=120) == 0, guarded.said()
    task = guarded.afk.json("show", task_id)
    assert [r["outcome"] for r in task["runs"]] == ["done"], task["runs"]


def test_http_hooks_through_the_service_are_signs_of_life(guarded, dsn, tmp_path):
    """P10: an agent that prints nothing (``--output-format json``) and
    whose hooks go over HTTP to the service, as `afk hooks claude --transport
    http` installs them, is working, not stalled."""
    port, token = free_port(), "guard-hook-token-0123456789"
    hook_env = {"AFK_HOOK_HTTP": f"127.0.0.1:{port}", "AFK_HOOK_TOKEN": token}
    settings = tmp_path / "settings.json"
    installed = guarded.afk(
        "hooks", "claude", "--transport", "http", "--install", str(settings), env=hook_env
    )
    assert installed.returncode == 0, installed.stderr
    service = Service(dsn, **hook_env)
    try:
        poll(lambda: "answering HTTP hooks on" in service.log(), timeout=60)
        (task_id,) = guarded.enqueue()
        proc = guarded.loop(
            "--stall-after",
            "6s",
            does="http",
            lasts=10,
            env={**hook_env, "AGENT_SETTINGS": str(settings)},
        )
        assert proc.wait(timeout=120) == 0, guarded.said()
    finally:
        service.cleanup()
    task = guarded.afk.json("show", task_id)
    assert [r["outcome"] for r in task["runs"]] == ["done"], (task["runs"], guarded.said())


def test_a_run_past_its_cap_is_timed_out_and_spends_an_attempt(guarded):
    (task_id,) = guarded.enqueue(max_attempts=1)
    proc = guarded.loop("--max-run", "2s", "--stall-after", "1h", does="forever")
    assert proc.wait(timeout=120) == 0, guarded.said()
    task = guarded.afk.json("show", task_id)
    assert [(r["outcome"], r["attempt_spent"]) for r in task["runs"]] == [("timed_out", True)]
    assert task["state"] == "failed"
    assert task["last_error"].startswith("timed out: still running after 2s")
    assert "working" in task["last_error"]  # its last lines
    poll(lambda: not any(alive(p) for p in guarded.pids()), timeout=30)


def test_a_sigkilled_loop_takes_its_agent_with_it(guarded, sql):
    """The agent and its child are gone within seconds of the loop's
    SIGKILL; the task, reclaimed, is done once by the next loop."""
    (task_id,) = guarded.enqueue()
    proc = guarded.loop("--lease", "2", "--stall-after", "1h")
    poll(lambda: len(guarded.pids()) == 2, timeout=60)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    began = time.monotonic()
    poll(lambda: not any(alive(p) for p in guarded.pids()), timeout=30)
    assert time.monotonic() - began < 15
    sql.expire(task_id)
    assert guarded.afk("reclaim").returncode == 0
    again = guarded.loop(does="chatty", lasts=0.5)
    assert again.wait(timeout=120) == 0, guarded.said()
    task = guarded.afk.json("show", task_id)
    assert task["state"] == "done"
    assert [e["reason"] for e in task["history"]].count("done") <= 1
    assert [r["outcome"] for r in task["runs"]][-1] == "done"


def _not_executable(tmp: Path) -> list[str]:
    path = tmp / "agent.txt"
    path.write_text("echo hi\n")
    return [str(path)]


def _bad_interpreter(tmp: Path) -> list[str]:
    path = tmp / "agent.sh"
    path.write_text("#!/nonexistent/bin/python9\nprint('hi')\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return [str(path)]


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (lambda tmp: ["cluade", "-p"], "'cluade' cannot run"),
        (_not_executable, "cannot run: Permission denied"),
        (_bad_interpreter, "cannot run: No such file or directory"),
        (lambda tmp: ["sh", "-c", 'cluade -p "$@"', "sh"], "'sh' cannot run"),
        # P15: the README's own pattern, the prompt (many lines) as $0: the
        # shell's line starts with the whole prompt
        (lambda tmp: ["sh", "-c", 'cluade -p "$0"'], "'sh' cannot run"),
    ],
    ids=["missing", "not-executable", "bad-interpreter", "missing-in-a-shell", "prompt-as-$0"],
)
def test_a_command_that_cannot_run_stops_the_loop_at_once(guarded, command, said):
    ids = guarded.enqueue(3)
    proc = guarded.loop(command=command(guarded.tmp))
    assert proc.wait(timeout=60) == 5, guarded.said()
    lines = guarded.said().strip().splitlines()
    assert said in lines[-1], lines
    tasks = [guarded.afk.json("show", i) for i in ids]
    assert [t["attempts"] for t in tasks] == [0, 0, 0]
    ran = [t for t in tasks if t["runs"]]
    assert len(ran) == 1 and ran[0]["state"] == "paused"  # no other task was started
    assert ran[0]["runs"][0]["outcome"] == "cannot_start"


def test_a_run_whose_lease_is_lost_ends_with_what_it_cost(guarded, sql):
    """M19: the run of a task reclaimed under its loop stayed open with no
    outcome, its cost out of every budget. It ends as lease_lost, with the
    cost its agent reported."""
    (task_id,) = guarded.enqueue()
    code = (
        "import json, time; print(json.dumps({'type': 'result', 'is_error': False, "
        "'result': 'x', 'total_cost_usd': 0.42, 'session_id': 's-lost'}), flush=True); "
        "time.sleep(300)"
    )
    proc = guarded.loop("--lease", "3", command=[sys.executable, "-c", code])
    try:
        # (what the agent printed is read to the pipe's end, whenever it is stopped)
        poll(lambda: sql("SELECT 1 FROM afk_run WHERE task_id = %s", task_id), timeout=60)

        # the loop is stopped while its lease is back-dated and reclaimed: its
        # heartbeat, every second, would otherwise renew the lease in between
        # whenever a CLI call takes longer than that (a loaded CI host did, for
        # a whole minute); it goes on and finds the task gone
        proc.send_signal(signal.SIGSTOP)
        try:
            sql.expire(task_id)
            counts = guarded.afk.json("reclaim")
        finally:
            proc.send_signal(signal.SIGCONT)
        assert counts["paused"] + counts["failed"] == 1, counts
        poll(lambda: "left to its new holder" in guarded.said(), timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    run = guarded.afk.json("show", task_id)["runs"][0]  # (the loop may claim it again)
    assert (run["outcome"], run["attempt_spent"]) == ("lease_lost", True), run
    assert run["cost_usd"] == 0.42 and run["session_id"] == "s-lost" and run["ended_at"]


def test_a_process_the_agent_detaches_is_stopped_after_its_run(guarded, tmp_path):
    """P27: a process an agent started with setsid (a dev server, say) left
    the run's group and outlived the run. The loop is its agents'
    subreaper: what a run left behind is stopped after it, and said."""
    (task_id,) = guarded.enqueue()
    pids = tmp_path / "pids"
    script = (
        f'setsid sh -c "echo \\$\\$ >> {pids}; exec sleep 300" & '
        f'nohup sh -c "echo \\$\\$ >> {pids}; exec sleep 301" >/dev/null 2>&1 & '
        f"while [ $(wc -l < {pids} 2>/dev/null || echo 0) -lt 2 ]; do sleep 0.05; done"
    )
    proc = guarded.loop("--max-tasks", "1", command=["sh", "-c", script])
    assert proc.wait(timeout=120) == 0, guarded.said()
    left = [int(p) for p in pids.read_text().split()]
    assert len(left) == 2

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as f:  # (a zombie of init's, not yet reaped)
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"

    poll(lambda: all(gone(p) for p in left), timeout=30)
    assert "left outside its group" in guarded.said()
    assert guarded.afk.json("show", task_id)["state"] == "done"
