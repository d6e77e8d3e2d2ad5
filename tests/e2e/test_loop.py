"""`afk loop` through a real night: usage limits, outages, a logged-out
agent and real failures, each handled as what it is. The agent is a stand-in
(tests/helpers/standin_agent.py) that prints exactly what Claude Code prints and exits
as it does; the loop, the CLI and the database are the real ones."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from helpers import HELPERS, ROOT, Afk, poll

STANDIN = [sys.executable, str(HELPERS / "standin_agent.py")]
#: short settings for a night compressed into seconds (the behaviour is the same)
FAST = {
    "AFK_TRANSIENT_BACKOFF_SECONDS": "1",
    "AFK_TRANSIENT_BACKOFF_CAP_SECONDS": "2",
    "AFK_BACKOFF_BASE_SECONDS": "1",
    "AFK_BACKOFF_CAP_SECONDS": "2",
    "AFK_LIMIT_PROBE_FIRST_SECONDS": "600",
    "AFK_LIMIT_PROBE_SECONDS": "900",
    "AFK_AGENT_GRACE_SECONDS": "5",
}


class Night:
    """A backlog, a script for the stand-in agent, and `afk loop` over them."""

    def __init__(self, afk: Afk, tmp: Path, agent: str = "night") -> None:
        self.afk, self.agent = afk, agent
        self.script, self.log = tmp / "script.jsonl", tmp / "runs.jsonl"
        self.out, self.err = tmp / "loop.out", tmp / "loop.err"
        self.script.write_text("")
        self.log.write_text("")
        self.env = {**FAST, "STANDIN_SCRIPT": str(self.script), "STANDIN_LOG": str(self.log)}

    def backlog(self, n: int, **task: Any) -> list[str]:
        lines = "".join(json.dumps({"title": f"task {i}", **task}) + "\n" for i in range(n))
        enqueued = self.afk.json("enqueue", "--agent", self.agent, "--file", "-", input=lines)
        return list(enqueued["enqueued"])

    def then(self, **step: Any) -> None:
        with self.script.open("a") as out:
            out.write(json.dumps(step) + "\n")

    def loop(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """`afk loop` started; what it says goes to files (``said()``)."""
        with self.out.open("wb") as out, self.err.open("wb") as err:
            return subprocess.Popen(
                Afk.command("loop", "--agent", self.agent, *args, "--", *STANDIN),
                env={**self.afk.env, **self.env, **(env or {})},
                stdout=out,
                stderr=err,
            )

    def said(self) -> str:
        return self.err.read_text()

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> tuple[int, str, str]:
        proc = self.loop(*args, env=env)
        status = proc.wait(timeout=timeout)
        return status, self.out.read_text(), self.said()

    def runs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def show(self, task_id: str) -> dict[str, Any]:
        return dict(self.afk.json("show", task_id))


@pytest.fixture
def night(afk: Afk, tmp_path: Path) -> Night:
    return Night(afk, tmp_path)


def test_a_usage_limit_parks_the_account_until_its_reset_and_spends_nothing(night, sql):
    ids = night.backlog(3, max_attempts=1)
    night.then(stdout=["Claude AI usage limit reached|{epoch+3}"], exit=1)
    status, out, err = night.run("--account", "max-1")
    assert status == 0, err
    runs = night.runs()
    # the limited run, then the three tasks after the reset: no session in between
    assert len(runs) == 4, err
    parked = sql("SELECT kind, account, until FROM afk_account_park")
    assert [(p["kind"], p["account"]) for p in parked] == [("usage_limit", "max-1")]
    reset = parked[0]["until"].timestamp()
    assert all(r["at"] >= reset for r in runs[1:]), (reset, runs)
    for task_id in ids:
        task = night.show(task_id)
        assert task["state"] == "done", task
        assert task["attempts"] == 1  # max_attempts 1, and still done
    first = night.show(ids[0])
    assert [r["outcome"] for r in first["runs"]] == ["usage_limit", "done"]
    assert [r["attempt_spent"] for r in first["runs"]] == [False, True]
    reasons = [h["reason"] for h in first["history"]]
    assert any(r.startswith("usage limit: Claude AI usage limit reached") for r in reasons)
    assert "parked until" in err and "usage limit" in err
    assert "Claude AI usage limit reached" in out  # the agent's output passed through
    # the agent had its task and account in its environment
    env = runs[1]["env"]
    assert env["AFK_ACCOUNT"] == "max-1" and env["AFK_AGENT_ID"] == "night"
    assert env["AFK_TASK_ID"] in ids and env["AFK_TASK_TOKEN"] == env["AFK_TASK_LEASE"]
    assert runs[1]["argv"][-1].startswith("task ")  # the prompt: title, then the brief
    assert "# Resume: task" in runs[1]["argv"][-1]
    # the morning digest tells the night's limit, and that it cost no attempt
    digest = night.afk("digest", "--dry-run", "--format", "text").stdout
    (line,) = [x for x in digest.splitlines() if x.startswith("  - max-1: parked")]
    assert line.endswith("(usage limit), 1 task(s) waited, 0 attempt(s) spent on limits")


def test_a_limit_that_names_no_reset_is_probed_soon_and_less_often_each_time(night, sql):
    """Issue 41 item 7: a 429 whose reset is not printed (the real client
    with an API key) parked the account for the whole probe (15 minutes)
    when the API would answer in a minute. The first guess is short and
    each guess in a row doubles, up to the cap; the digest says it was a
    guess."""
    night.backlog(1)
    limited = ["API Error: 429 rate_limit_error: This request would exceed your rate limit"]
    night.then(stdout=limited, exit=1)
    night.then(stdout=limited, exit=1)
    env = {"AFK_LIMIT_PROBE_FIRST_SECONDS": "2", "AFK_LIMIT_PROBE_SECONDS": "900"}
    status, _, err = night.run("--account", "api", env=env, timeout=120)
    assert status == 0, err
    parks = sql(
        "SELECT reason, extract(epoch FROM until - parked_at) AS secs FROM afk_account_park "
        "ORDER BY parked_at"
    )
    assert [round(float(p["secs"])) for p in parks] == [2, 4], parks
    assert all("a guessed reset" in p["reason"] for p in parks), parks
    digest = night.afk("digest", "--dry-run", "--format", "text").stdout
    assert "a guessed reset" in digest
    assert len(night.runs()) == 3  # two limits, then the work, done


def test_a_reset_centuries_off_is_not_believed_and_the_digest_says_the_end(night, sql):
    """M6: "resets 9999-12-31" parks the account for the probe time, not
    for centuries; the reason says why, and the digest says when it ends."""
    night.backlog(1)
    night.then(stdout=["You've hit your session limit · resets 9999-12-31T23:59:59Z"], exit=1)
    proc = night.loop("--account", "far")
    try:
        poll(lambda: sql("SELECT 1 FROM afk_account_park"), timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    (parked,) = sql("SELECT reason, until, until - parked_at AS length FROM afk_account_park")
    probe = timedelta(seconds=int(FAST["AFK_LIMIT_PROBE_FIRST_SECONDS"]))
    assert abs(parked["length"] - probe) < timedelta(seconds=30), parked  # probed, not 9999
    assert "not believed" in parked["reason"], parked
    digest = night.afk("digest", "--dry-run", "--format", "text").stdout
    (line,) = [x for x in digest.splitlines() if x.startswith("  - far: parked")]
    assert ", until " in line, line


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_an_agent_a_person_stops_pauses_its_task_and_the_loop_goes_on(night, signum):
    """M23: someone kills one stuck agent: that task is paused (no attempt
    spent) and the next one starts; only a signal to the loop ends the loop."""
    first, second = night.backlog(2, max_attempts=1)
    night.then(sleep=120)  # stuck
    proc = night.loop()
    try:
        (stuck,) = poll(night.runs, timeout=60)
        os.kill(stuck["pid"], signum)
        status = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert status == 0, night.said()
    assert "a signal the loop did not send" in night.said()
    one, two = night.show(first), night.show(second)
    assert one["state"] == two["state"] == "done", (one, two)
    assert [(r["outcome"], r["attempt_spent"]) for r in one["runs"]] == [
        ("interrupted", False),
        ("done", True),
    ]
    # the next task started before the stopped one was run again
    assert two["runs"][0]["started_at"] < one["runs"][1]["started_at"]


def test_an_agent_stopped_from_outside_twice_in_a_row_spends_an_attempt(night):
    """A task whose agent is killed every time (the OOM killer's, say) still
    ends: the second stop in a row is the task's failure."""
    (task_id,) = night.backlog(1, max_attempts=1)
    night.then(sleep=120)
    night.then(sleep=120)
    proc = night.loop()
    try:
        for n in (1, 2):
            runs = poll(lambda n=n: len(night.runs()) >= n and night.runs(), timeout=60)
            os.kill(runs[n - 1]["pid"], signal.SIGKILL)
        status = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert status == 0, night.said()
    task = night.show(task_id)
    assert task["state"] == "failed" and "twice in a row" in task["last_error"], task
    assert [r["attempt_spent"] for r in task["runs"]] == [False, True]


def test_a_clock_time_reset_is_read_in_the_loops_zone_and_sigterm_while_parked_pauses(
    night, afk, sql
):
    (task_id,) = night.backlog(1)
    night.then(stdout=["You've hit your session limit · resets 3:45am"], exit=1)
    proc = night.loop(env={"TZ": "America/New_York"})
    parked = poll(lambda: sql("SELECT until, reason FROM afk_account_park"), timeout=60)
    until = parked[0]["until"].astimezone(ZoneInfo("America/New_York"))
    assert (until.hour, until.minute) == (3, 45)
    now = sql.one("SELECT now()")
    assert now < until <= now + timedelta(days=1)
    poll(lambda: "waiting" in night.said())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143, night.said()
    task = night.show(task_id)
    assert task["state"] == "paused" and task["attempts"] == 0
    assert len(night.runs()) == 1
    # claim under that account is refused with the reset; another account goes on
    refused = afk("claim", "--agent", "night", "--account", "default")
    assert refused.returncode == 5
    body = json.loads(refused.stdout)
    assert set(body) >= {"account", "limited_until", "reason"}
    assert body["account"] == "default"
    assert datetime.fromisoformat(body["limited_until"]) == until
    other = afk("claim", "--agent", "night", "--account", "team-2")
    assert other.returncode == 0, other.stderr


def test_outages_are_retried_without_spending_an_attempt_and_trip_the_breaker(night, sql):
    (task_id,) = night.backlog(1, max_attempts=1)
    overloaded = "API Error: 529 Overloaded. This is a server-side issue, usually temporary"
    night.then(stdout=[overloaded], exit=1)
    refused = (
        "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"
    )
    night.then(stdout=[refused], exit=1)
    night.then(stderr=["API Error: Repeated 529 Overloaded errors"], exit=1)
    status, _, err = night.run(env={"AFK_OUTAGE_BREAKER": "3"})
    assert status == 0, err
    task = night.show(task_id)
    assert task["state"] == "done" and task["attempts"] == 1, task
    outcomes = [r["outcome"] for r in task["runs"]]
    assert outcomes == ["outage", "outage", "outage", "done"]
    assert not any(r["attempt_spent"] for r in task["runs"][:3])
    # each retry waited out its backoff (1 s, then 2 s), by the database's clock
    starts = [datetime.fromisoformat(r["started_at"]) for r in task["runs"]]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    assert gaps[0] >= 1 and gaps[1] >= 2, gaps
    # the third in a row parked the account for the backoff (a circuit breaker)
    parked = sql("SELECT kind, reason FROM afk_account_park")
    assert [p["kind"] for p in parked] == ["outage"] and "Repeated 529" in parked[0]["reason"]
    assert "provider outage" in err


def test_a_logged_out_agent_stops_the_loop_with_one_line_and_spends_nothing(night, afk, receiver):
    ids = night.backlog(3)
    night.then(stdout=["Not logged in · Please run /login"], exit=1)
    status, _, err = night.run(
        "--account",
        "laptop",
        env={"AFK_DIGEST_WEBHOOK_URL": receiver.url(), "AFK_DIGEST_WEBHOOK_SECRET": "s3cret"},
    )
    assert status == 5, err
    assert len(night.runs()) == 1  # no second session
    loop_lines = [line for line in err.splitlines() if line.startswith("afk loop:")]
    assert len(loop_lines) == 1 and "'laptop' needs a person: Not logged in" in loop_lines[0]
    first = night.show(ids[0])
    assert first["state"] == "paused" and first["attempts"] == 0
    assert [night.show(i)["state"] for i in ids[1:]] == ["todo", "todo"]
    # the alert went out through the alert destination
    (alert,) = poll(lambda: receiver.received)
    body = json.loads(alert.body)
    assert body["type"] == "afk.account_parked" and body["account"] == "laptop"
    # claims under that account are refused until a person clears it
    refused = afk("claim", "--agent", "night", "--account", "laptop")
    assert refused.returncode == 5
    assert json.loads(refused.stdout)["limited_until"] is None
    assert afk.json("limit") == [
        {**afk.json("limit")[0], "account": "laptop", "limited_until": None, "kind": "needs_human"}
    ]
    status, _, err = night.run("--account", "laptop")
    assert status == 5 and len(night.runs()) == 1, err
    cleared = afk.json("limit", "--account", "laptop", "--clear")
    assert [c["account"] for c in cleared["cleared"]] == ["laptop"]
    status, _, err = night.run("--account", "laptop")
    assert status == 0, err
    assert [night.show(i)["state"] for i in ids] == ["done"] * 3


def test_a_real_failure_records_what_the_agent_said_and_the_loop_waits_for_the_retry(night, afk):
    (task_id,) = night.backlog(1, max_attempts=2)
    said = [
        "Running the tests…",
        "FAILED tests/test_api.py::test_login - AssertionError: 401 != 200",
        "postgresql://app:hunter2@db.internal/app refused the migration",
    ]
    night.then(stdout=said, exit=1)
    status, _, err = night.run(env={"AFK_DSN": afk.env["AFK_DSN"]})
    assert status == 0, err
    task = night.show(task_id)
    assert task["state"] == "done" and task["attempts"] == 2
    failed = [h for h in task["history"] if h["reason"] == "failed with error"]
    assert len(failed) == 1
    error = failed[0]["error"]
    assert "FAILED tests/test_api.py::test_login" in error and "agent exited 1" in error
    assert "hunter2" not in error and "***" in error  # a DSN's password is scrubbed
    assert task["last_error"] == error
    assert [r["outcome"] for r in task["runs"]] == ["task_failure", "done"]
    assert "due at" in err  # it waited for the backoff instead of ending


SECRETS = {
    "ANTHROPIC_API_KEY=sk-ant-api03-Zq9xW2vB7nLmK4pR": "Zq9xW2vB7nLmK4pR",
    "pushing with ghp_R8tY6uI4oP2aS0dF9gH7jK5lZ3xC1vB": "R8tY6uI4oP2aS0dF9gH7",
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY": "wJalrXUtnFEMIK7MDENG",
    "curl: Authorization: Bearer tok_9f8e7d6c5b4a3210": "9f8e7d6c5b4a3210",
}


def test_secrets_in_an_agents_last_lines_reach_no_record_and_no_digest(night, afk):
    """M22: a failing agent that prints credentials: its error, its run's
    tail, its question and the digest in every format hold none of them."""
    (task_id,) = night.backlog(1, max_attempts=1)
    night.then(stdout=["Error: the deploy failed", *SECRETS], exit=1)
    status, _, err = night.run()
    assert status == 0, err
    task = night.show(task_id)
    assert task["state"] == "failed"
    shown = json.dumps(task)
    digests = [
        afk("digest", "--dry-run", "--format", f).stdout
        for f in ("text", "html", "slack", "webhook")
    ]
    for secret in SECRETS.values():
        assert secret not in shown, secret
        assert not any(secret in d for d in digests), secret
    assert "Error: the deploy failed" in task["last_error"] and "***" in task["last_error"]
    # what an agent writes through afk is agent text too
    (other,) = afk.json("enqueue", "--agent", "asks", "--title", "t")["enqueued"]
    claimed = afk.json("claim", "--agent", "asks")
    asked = afk(
        "ask", f"may I use GITHUB_TOKEN=ghp_{'A1' * 12}?", other, "--token", str(claimed["token"])
    )
    assert asked.returncode == 0, asked.stderr
    assert "A1A1A1A1" not in json.dumps(afk.json("questions"))


def test_the_digest_groups_a_failure_by_what_the_agent_said(night, afk):
    (task_id,) = night.backlog(1, max_attempts=1)
    night.then(stderr=["Error: ENOSPC: no space left on device, write"], exit=1)
    status, _, err = night.run()
    assert status == 0, err
    assert night.show(task_id)["state"] == "failed"
    digest = afk("digest", "--dry-run", "--format", "text")
    assert digest.returncode == 0, digest.stderr
    (group,) = [line for line in digest.stdout.splitlines() if line.startswith("== night:")]
    assert group == "== night: 1 x Error: ENOSPC: no space left on device, write", group


def test_claim_says_when_the_next_task_is_due_and_why_an_account_is_parked(afk, sql):
    (task_id,) = afk.json("enqueue", "--agent", "a", "--title", "t")["enqueued"]
    empty = afk("claim", "--agent", "nobody")
    assert empty.returncode == 3 and json.loads(empty.stdout) == {"next_at": None}
    task = afk.json("claim", "--agent", "a")
    afk("fail", task_id, "--token", str(task["token"]), "--error", "boom")
    waiting = afk("claim", "--agent", "a")
    assert waiting.returncode == 3
    next_at = json.loads(waiting.stdout)["next_at"]
    assert next_at is not None
    assert sql.one("SELECT run_after FROM afk_task").isoformat() == next_at
    until = (datetime.now(ZoneInfo("UTC")).replace(microsecond=0) + timedelta(days=2)).isoformat()
    parked = afk.json("limit", "--account", "k1", "--until", until, "--reason", "by hand")
    assert datetime.fromisoformat(parked["limited_until"]) == datetime.fromisoformat(until)
    refused = afk("claim", "--agent", "a", "--account", "k1")
    assert refused.returncode == 5
    assert json.loads(refused.stdout) == {
        "account": "k1",
        "limited_until": parked["limited_until"],
        "reason": "by hand",
    }
    assert afk("claim", "--agent", "a", env={"AFK_ACCOUNT": "k1"}).returncode == 5
    assert [p["account"] for p in afk.json("limit")] == ["k1"]
    assert afk.json("limit", "--account", "k2") == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--account", "k", "--until", "tomorrow"], "not an ISO 8601 time"),
        (["--account", "k", "--until", "2099-13-01T05:00"], "not an ISO 8601 time"),
        (["--account", "k", "--until", ""], "not an ISO 8601 time"),
        (["--until", "2099-01-01T05:00Z"], "--account is needed"),
        (["--account", "k", "--clear", "--until", "2099-01-01T05:00Z"], "cannot be combined"),
        (["--clear"], "--account is needed"),
        (["--account", "k", "--reason", "x"], "--reason goes with --until"),
        (["--account", " ", "--until", "2099-01-01T05:00Z"], "account must be a non-empty"),
        # M15, M6: the past, and further than a person parks an account
        (["--account", "k", "--until", "2000-01-01T00:00:00Z"], "is in the past"),
        (["--account", "k", "--until", "9999-12-31T23:59:59Z"], "more than 31 days ahead"),
    ],
)
def test_limit_refuses_bad_input_with_one_line_and_changes_nothing(afk, sql, args, message):
    before = sql("SELECT count(*) AS n FROM afk_account_park")
    proc = afk("limit", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert sql("SELECT count(*) AS n FROM afk_account_park") == before


def test_loop_refuses_bad_input_with_one_line(afk):
    for args, message in (
        (["loop", "--agent", "a"], "no agent command"),
        (["loop", "--agent", "a", "--max-tasks", "0", "--", "true"], "--max-tasks"),
        (["loop", "--agent", "a", "--account", "", "--", "true"], "--account must be"),
    ):
        proc = afk(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_shell_ralph_loop_waits_for_a_retry_instead_of_ending(night, afk):
    """examples/ralph.sh, the minimal loop: a failed task waits out its backoff
    and is run again, where the loop used to say the backlog was empty."""
    (task_id,) = night.backlog(1)
    night.then(stdout=["flaky: connection reset by peer"], exit=1)
    ralph = ROOT / "examples" / "ralph.sh"
    env = {
        **afk.env,
        **night.env,
        "AFK_AGENT_ID": "night",
        "AGENT_CMD": " ".join(STANDIN),
        "RALPH_POLL_SECONDS": "0.5",
        # a backoff longer than a CLI call, even on a loaded machine: the
        # claim after the failure finds the task waiting, not due
        "AFK_BACKOFF_BASE_SECONDS": "3",
        "AFK_BACKOFF_CAP_SECONDS": "3",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }
    proc = subprocess.run(
        ["bash", str(ralph)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    task = night.show(task_id)
    assert (task["state"], task["attempts"]) == ("done", 2), (task, proc.stderr)
    assert len(night.runs()) == 2


# -- what the night cost and what the agents asked ------------------------------------


def result(cost: float, session: str, is_error: bool = False, text: str = "ok") -> dict:
    """Claude Code's --output-format json result object."""
    return {
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "result": text,
        "total_cost_usd": cost,
        "num_turns": 3,
        "session_id": session,
        "usage": {"input_tokens": 1200, "output_tokens": 340},
    }


def test_a_question_holds_the_task_until_a_person_answers(night, afk, receiver):
    ids = night.backlog(2)
    night.then(afk=["ask", "Which database should the migration target: staging or prod?"])
    status, _, err = night.run()
    assert status == 0, err
    asked, other = night.show(ids[0]), night.show(ids[1])
    assert (asked["state"], asked["attempts"]) == ("paused", 0)
    assert other["state"] == "done"  # the loop went on with the next task
    assert len(night.runs()) == 2  # and did not run the asked one again
    (question,) = afk.json("questions")
    assert question["id"] == ids[0] and question["agent_id"] == "night"
    assert question["title"] == "task 0" and "staging or prod" in question["question"]
    assert question["asked_at"]
    assert afk.json("questions", "--agent", "other") == []
    assert [r["outcome"] for r in asked["runs"]] == ["needs_input"]
    digest = afk("digest", "--dry-run", "--format", "text").stdout
    assert "staging or prod" in digest
    # the watchdog tells the alert destinations of a new question, once
    hook_env = {"AFK_DIGEST_WEBHOOK_URL": receiver.url(), "AFK_DIGEST_WEBHOOK_SECRET": "s"}
    for _ in range(2):
        tick = afk("watchdog", "tick", "questions", env=hook_env)
        assert tick.returncode == 0, tick.stderr
    (alert,) = [json.loads(r.body) for r in receiver.received]
    assert alert["type"] == "afk.question" and alert["task_id"] == ids[0]
    assert "staging or prod" in alert["question"]
    # answered: back to todo, off the list, and the answer in the next prompt
    assert afk.json("answer", ids[0], "staging, never prod")["state"] == "todo"
    assert afk.json("questions") == []
    status, _, err = night.run()
    assert status == 0, err
    prompt = night.runs()[-1]["argv"][-1]
    assert "staging or prod" in prompt and "staging, never prod" in prompt
    assert night.show(ids[0])["state"] == "done"
    again = afk("answer", ids[0], "more")
    assert again.returncode == 2 and "no open question" in again.stderr


def test_the_cost_and_session_of_every_run_are_recorded_and_summed(night):
    (task_id,) = night.backlog(1, max_attempts=3)
    night.then(stdout=[json.dumps(result(0.25, "sess-1", True, "tests fail"))], exit=1)
    night.then(stdout=[json.dumps(result(0.27, "sess-2"))])
    status, _, err = night.run()
    assert status == 0, err
    task = night.show(task_id)
    assert task["cost_usd"] == pytest.approx(0.52)
    assert [(r["session_id"], r["cost_usd"]) for r in task["runs"]] == [
        ("sess-1", 0.25),
        ("sess-2", 0.27),
    ]
    assert task["runs"][0]["usage"]["output_tokens"] == 340 and task["runs"][0]["turns"] == 3
    # the second prompt offers the first session to resume
    assert "sess-1" in night.runs()[1]["argv"][-1]


def test_a_task_over_its_budget_is_held_not_run_again(night, afk):
    (task_id,) = night.backlog(1, max_attempts=5, budget_usd=0.5)
    night.then(stdout=[json.dumps(result(0.3, "s1", True, "still failing"))], exit=1)
    night.then(stdout=[json.dumps(result(0.3, "s2", True, "still failing"))], exit=1)
    status, _, err = night.run()
    assert status == 0, err
    runs = night.runs()
    assert len(runs) == 2  # not a third time
    assert runs[0]["env"]["AFK_TASK_BUDGET_USD"] == "0.50"
    assert runs[1]["env"]["AFK_TASK_BUDGET_USD"] == "0.20"
    task = night.show(task_id)
    assert task["state"] == "paused" and task["cost_usd"] == pytest.approx(0.6)
    assert any(h["reason"].startswith("over budget: $0.60 spent of $0.50") for h in task["history"])
    assert afk("claim", "--agent", "night").returncode == 3  # held: no claim takes it
    # M14: a "raise" below what was spent would start a run with nothing left
    before = night.show(task_id)
    lower = afk("retry", task_id, "--budget-usd", "0.55")
    assert lower.returncode == 2 and "$0.60 spent" in lower.stderr, lower.stderr
    assert night.show(task_id)["history"] == before["history"]  # nothing changed
    # a person raises it, and it runs again
    assert afk.json("retry", task_id, "--budget-usd", "2")["retried"] == [task_id]
    status, _, err = night.run()
    assert status == 0 and night.show(task_id)["state"] == "done", err


@pytest.mark.parametrize(
    "cost",
    [-100, 1e308, 10_000, "12"],
    ids=["negative", "1e308", "ten-thousand", "a-string"],
)
def test_a_cost_no_run_costs_is_not_believed(night, afk, cost):
    """M8: a negative cost paid a $0.10 budget back; 1e308 broke the pages.
    Not recorded, said, and the next run's real cost still holds the task."""
    (task_id,) = night.backlog(1, max_attempts=3, budget_usd=0.10)
    night.then(
        stdout=[json.dumps({**result(0, "s1", True, "failing"), "total_cost_usd": cost})], exit=1
    )
    night.then(stdout=[json.dumps(result(0.5, "s2", True, "failing"))], exit=1)
    status, _, err = night.run()
    assert status == 0, err
    task = night.show(task_id)
    assert [r["cost_usd"] for r in task["runs"]] == [None, 0.5]
    assert task["state"] == "paused" and task["cost_usd"] == 0.5  # held over its budget
    if not isinstance(cost, str):
        assert "which no run costs" in err
    digest = afk("digest", "--dry-run", "--format", "text").stdout
    assert "1e+308" not in digest and "100,000,000" not in digest


def test_an_account_over_its_daily_budget_is_parked_until_midnight(night, afk, sql):
    night.backlog(3)
    for session in ("a", "b"):
        night.then(stdout=[json.dumps(result(0.6, session))])
    proc = night.loop(
        "--account", "team", env={"AFK_DAILY_BUDGET_USD": "1", "AFK_DIGEST_TZ": "Europe/Berlin"}
    )
    poll(lambda: "daily budget" in night.said())  # parked: the loop waits for midnight
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143, night.said()
    assert len(night.runs()) == 2  # the third task waits for midnight
    refused = afk("claim", "--agent", "night", "--account", "team")
    assert refused.returncode == 5
    body = json.loads(refused.stdout)
    assert "daily budget: $1.20 spent of $1.00" in body["reason"]
    until = datetime.fromisoformat(body["limited_until"]).astimezone(ZoneInfo("Europe/Berlin"))
    assert (until.hour, until.minute) == (0, 0)


@pytest.mark.parametrize(
    "args, message",
    [
        (["enqueue", "--agent", "a", "--title", "t", "--budget-usd", "0"], "budget"),
        (["enqueue", "--agent", "a", "--title", "t", "--budget-usd", "nan"], "budget"),
        (["answer", "00000000-0000-0000-0000-000000000000", "x"], "no task"),
        (["ask", "?"], "task id"),
        (["retry", "00000000-0000-0000-0000-000000000000", "--budget-usd", "-1"], "budget"),
    ],
)
def test_questions_and_budgets_refuse_bad_input_in_one_line(afk, sql, args, message):
    before = sql.fingerprint()
    proc = afk(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


def test_limit_reads_a_time_without_an_offset_in_this_machines_zone(afk):
    tokyo = ZoneInfo("Asia/Tokyo")
    when = (datetime.now(tokyo) + timedelta(days=2)).replace(second=0, microsecond=0)
    local = when.strftime("%Y-%m-%dT%H:%M")  # no offset: this machine's zone
    parked = afk.json("limit", "--account", "k", "--until", local, env={"TZ": "Asia/Tokyo"})
    assert datetime.fromisoformat(parked["limited_until"]) == when


def test_a_task_whose_brief_is_larger_than_one_argument_still_runs(night, tmp_path):
    """M25: a 300 KB spec made the prompt too long for execve ("Argument
    list too long"): every attempt was spent. Now the brief is cut."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"notes": "x" * 300_000}))
    (task_id,) = night.afk.json(
        "enqueue", "--agent", night.agent, "--title", "big", "--spec", f"@{spec}"
    )["enqueued"]
    status, _, err = night.run("--max-tasks", "1")
    assert status == 0, err
    assert night.show(task_id)["state"] == "done"
    (run,) = night.runs()
    prompt = run["argv"][-1]
    assert prompt.startswith("big\n") and "afk resume-brief" in prompt
    assert len(prompt.encode()) < 128 * 1024


# -- M3, M13: no line of output stops the reading, or takes the loop's memory ---------

#: a stand-in agent for a test's own output: on its first run it prints what
#: AGENT_FIRST (a Python expression) writes, then the 529 line, and exits 1;
#: every later run exits 0
ODD_AGENT = """
import os, sys
mark = os.environ["AGENT_MARK"]
if os.path.exists(mark):
    sys.exit(0)
open(mark, "w").close()
exec(os.environ["AGENT_FIRST"])
sys.stdout.write("\\nAPI Error: 529 Overloaded. This is a server-side issue, usually temporary\\n")
sys.exit(1)
"""
#: the loop and its agent under a parent that reports their peak memory (kB)
MEASURED = """
import resource, subprocess, sys
status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
print(status, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run_odd_agent(afk, tmp_path, first: str) -> tuple[dict, str, int]:
    """One task under `afk loop` with the odd agent: the task as shown, what
    the loop said, and the peak memory of the loop and its agent (kB)."""
    (task_id,) = afk.json("enqueue", "--agent", "odd", "--title", "t", "--max-attempts", "1")[
        "enqueued"
    ]
    agent = tmp_path / "agent.py"
    agent.write_text(ODD_AGENT)
    err = tmp_path / "loop.err"
    with err.open("wb") as errors:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                MEASURED,
                *Afk.command("loop", "--agent", "odd", "--", sys.executable, str(agent)),
            ],
            env={**afk.env, **FAST, "AGENT_MARK": str(tmp_path / "mark"), "AGENT_FIRST": first},
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            timeout=240,
        )
    status, peak_kb = (int(w) for w in proc.stdout.split())
    said = err.read_text()
    assert status == 0, said
    return afk.json("show", task_id), said, peak_kb


@pytest.mark.parametrize(
    "first",
    [
        # a JSON line nested 200,000 deep: the parser gives up (RecursionError)
        "print('{\"type\":\"result\",\"x\":' + '[' * 200000 + ']' * 200000 + '}', flush=True)",
        # 64 MB without a newline, written as an agent streams it
        "[sys.stdout.write('x' * (1 << 20)) for _ in range(64)]; sys.stdout.flush()",
        # bytes that are no text at all
        "sys.stdout.buffer.write(bytes(range(256)) * 4096); sys.stdout.flush()",
    ],
    ids=["deep-json", "64MB-line", "binary"],
)
def test_no_line_stops_the_reading_and_the_line_after_it_counts(afk, tmp_path, first):
    """The 529 that follows the odd line is read: an outage (no attempt
    spent, retried), not a task failure that spends the only attempt; and
    the loop holds a bounded part of any one line."""
    task, said, peak_kb = run_odd_agent(afk, tmp_path, first)
    assert "Traceback" not in said and "Exception in thread" not in said, said
    assert task["state"] == "done", (task, said)
    assert [r["outcome"] for r in task["runs"]] == ["outage", "done"], task["runs"]
    # about a megabyte of a line at a time: the loop's own size, not the line's
    assert peak_kb < 150_000, peak_kb


DENIED = [
    {
        "tool_name": "Bash",
        "tool_use_id": "toolu_01",
        "tool_input": {"command": "git push origin main"},
    }
]


def test_a_failed_run_with_denied_tools_asks_a_person_instead_of_a_retry(night, afk):
    """Claude Code in -p mode cannot ask for a permission: it lists what it
    was denied in its JSON result. A run that failed so is held with the
    tools named, no attempt spent; an answer puts it back, and the answer
    reaches the next brief."""
    (task_id,) = night.backlog(1, max_attempts=1)
    failed = {**result(0.2, "s1", True, "could not push"), "permission_denials": DENIED}
    night.then(stdout=[json.dumps(failed)], exit=1)
    status, _, err = night.run()
    assert status == 0, err
    task = night.show(task_id)
    assert (task["state"], task["attempts"]) == ("paused", 0), task
    (run,) = task["runs"]
    assert run["outcome"] == "needs_input" and run["attempt_spent"] is False
    assert run["permission_denials"] == [
        {"tool_name": "Bash", "tool_input": {"command": "git push origin main"}}
    ]
    assert any(
        h["reason"].startswith("needs input: the agent was denied Bash(git push origin main)")
        for h in task["history"]
    ), task["history"]
    (question,) = afk.json("questions")
    assert "Bash(git push origin main)" in question["question"]
    digest = afk("digest", "--dry-run", "--format", "text").stdout
    assert "Bash(git push origin main)" in digest  # waiting for you
    assert afk.json("answer", task_id, "allowed now: push to a branch")["state"] == "todo"
    status, _, err = night.run()
    assert status == 0 and night.show(task_id)["state"] == "done", err
    assert "allowed now: push to a branch" in night.runs()[-1]["argv"][-1]


def test_a_done_run_with_denied_tools_is_done_and_keeps_them(night):
    (task_id,) = night.backlog(1)
    night.then(stdout=[json.dumps({**result(0.2, "s1"), "permission_denials": DENIED})])
    status, _, err = night.run()
    assert status == 0, err
    task = night.show(task_id)
    assert task["state"] == "done"
    assert task["runs"][0]["permission_denials"][0]["tool_name"] == "Bash"


def test_a_run_that_ends_on_a_deferred_tool_call_is_held_for_a_person_not_done(night, afk):
    """Issue 41 item 4: a PreToolUse hook that answers "defer" ends Claude
    Code's -p session with exit 0, ``stop_reason: "tool_deferred"`` and the
    call in ``deferred_tool_use`` (hooks reference, "defer"; the CLI emits it
    since 2.1.89). The work is not finished: the task is held with a question
    naming the call, no attempt spent, and the loop goes on to the next."""
    first, second = night.backlog(2)
    deferred = {
        **result(0.1, "s-deferred"),
        "stop_reason": "tool_deferred",
        "deferred_tool_use": {
            "id": "toolu_02",
            "name": "Bash",
            "input": {"command": "git push origin main"},
        },
    }
    night.then(stdout=[json.dumps(deferred)], exit=0)
    status, _, err = night.run()
    assert status == 0, err
    task = night.show(first)
    assert (task["state"], task["attempts"]) == ("paused", 0), task
    (run,) = task["runs"]
    assert (run["outcome"], run["attempt_spent"]) == ("needs_input", False), run
    (question,) = afk.json("questions")
    assert question["id"] == first, question
    assert "Bash(git push origin main) was deferred" in question["question"], question
    assert night.show(second)["state"] == "done"  # the loop went on


def test_a_loop_with_nothing_to_claim_waits_out_a_dead_loops_lease_and_takes_the_task(night):
    """Issue 41 item 5: a loop killed with -9 left its task under a lease;
    a second loop found nothing to claim and exited 0, the task stranded
    until a person came. It waits while the lease can still run out, takes
    the task back when it does (no watchdog running here), and runs it."""
    (task_id,) = night.backlog(1)
    night.then(sleep=300)  # the first run works until it is killed
    first = night.loop("--lease", "3")
    try:
        poll(lambda: night.runs(), timeout=60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    assert night.show(task_id)["state"] == "running"
    status, _, err = night.run("--lease", "3")  # the stand-in's next run exits 0
    assert status == 0, err
    task = night.show(task_id)
    assert task["state"] == "done", (task, err)
    assert "lease expired" in [h["reason"] for h in task["history"]]
    assert len(night.runs()) == 2, err


def test_a_loop_waits_for_room_under_another_agents_concurrency_key(night, afk):
    """P12: the loop's only task waited for a concurrency key another agent
    held, and the loop exited 0 as if nothing were left. It waits, and runs
    the task once the key has room."""
    key = {"concurrency_key": "deploy", "concurrency_limit": 1}
    (other,) = afk.json(
        "enqueue",
        "--agent",
        "other",
        "--title",
        "holds the key",
        "--concurrency-key",
        "deploy",
        "--concurrency-limit",
        "1",
    )["enqueued"]
    held = afk.json("claim", "--agent", "other", "--lease", "600")
    assert held["id"] == other, held
    (task_id,) = night.backlog(1, **key)
    proc = night.loop(env={"AFK_LOOP_POLL_SECONDS": "1"})
    try:
        poll(lambda: "waiting" in night.said(), timeout=60)
        assert proc.poll() is None, night.said()
        assert night.show(task_id)["state"] == "todo"
        afk.json("done", other, "--token", str(held["token"]))
        assert proc.wait(timeout=120) == 0, night.said()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert night.show(task_id)["state"] == "done"


def test_the_loop_waits_for_a_tasks_start_time_and_then_runs_it(night):
    """Issue 32 item 2: a task enqueued --not-before +6s is not lost to an
    empty backlog: the loop says when it is due, sleeps, and runs it. (With
    +2s a loaded machine started the loop after the task was due.)"""
    (task_id,) = night.backlog(1, not_before="+6s")
    status, _, err = night.run()
    assert status == 0, err
    assert "is due at" in err and "--not-before" in err
    assert night.show(task_id)["state"] == "done"


def test_the_loops_check_is_said_not_to_apply_to_a_task_without_a_workspace(night):
    """P17: `afk loop --verify` applied only to tasks with a worktree, and
    a task without one was done unchecked in silence. The loop says so."""
    (task_id,) = night.backlog(1)
    status, _, err = night.run("--verify", "false", "--require-changes")
    assert status == 0, err
    assert f"task {task_id} has no workspace" in err and "do not apply" in err
    assert night.show(task_id)["state"] == "done"


def test_the_loop_says_one_line_per_run_naming_the_task_and_what_comes_next(night):
    """Issue 53 item 2 (P31): the loop said nothing when a task was done, or
    failed and was retried. One line a run: the task's short id and title,
    and how it ended: done; or what spent the attempt, when it is tried
    again (in the loop's zone) and how many attempts are spent, or that it
    failed for good."""
    first, second = night.backlog(2, max_attempts=2)
    night.then()  # (done)
    night.then(stdout=["FAILED tests/test_api.py::test_login - 401 != 200"], exit=1)
    night.then(stdout=["FAILED tests/test_api.py::test_login - 401 != 200"], exit=1)
    status, _, err = night.run("--max-tasks", "3", env={"TZ": "Asia/Kolkata"})
    assert status == 0, err
    lines = [line for line in err.splitlines() if f"task {second[:8]}" in line]
    assert f'afk loop: task {first[:8]} "task 0": done' in err.splitlines(), err
    assert len(lines) == 2, err
    retry, failed = lines
    assert '"task 1": ' in retry and "attempt 1 of 2 spent" in retry, retry
    assert "retry at 20" in retry and "+05:30" in retry, retry  # (the loop's own zone)
    assert "failed, 2 of 2 attempts spent" in failed, failed
    assert night.show(second)["state"] == "failed"
