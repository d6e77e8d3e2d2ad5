"""`afk loop` through a real night: usage limits, outages, a logged-out
agent and real failures, each handled as what it is. The agent is a stand-in
(tests/standin_agent.py) that prints exactly what Claude Code prints and exits
as it does; the loop, the CLI and the database are the real ones."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Afk, poll

pytestmark = pytest.mark.e2e

STANDIN = [sys.executable, str(Path(__file__).with_name("standin_agent.py"))]
#: short settings for a night compressed into seconds (the behaviour is the same)
FAST = {
    "AFK_TRANSIENT_BACKOFF_SECONDS": "1",
    "AFK_TRANSIENT_BACKOFF_CAP_SECONDS": "2",
    "AFK_BACKOFF_BASE_SECONDS": "1",
    "AFK_BACKOFF_CAP_SECONDS": "2",
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
        return list(self.afk.json("enqueue", "--agent", self.agent, "--file", "-", input=lines)["enqueued"])

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
    assert any(h["reason"].startswith("usage limit: Claude AI usage limit reached") for h in first["history"])
    assert "parked until" in err and "usage limit" in err
    assert "Claude AI usage limit reached" in out  # the agent's output passed through
    # the agent had its task and account in its environment
    env = runs[1]["env"]
    assert env["AFK_ACCOUNT"] == "max-1" and env["AFK_AGENT_ID"] == "night"
    assert env["AFK_TASK_ID"] in ids and env["AFK_TASK_TOKEN"] == env["AFK_TASK_LEASE"]
    assert runs[1]["argv"][-1].startswith("task ")  # the prompt: title, then the brief
    assert "# Resume: task" in runs[1]["argv"][-1]


def test_a_clock_time_reset_is_read_in_the_loops_zone_and_sigterm_while_parked_pauses(night, afk, sql):
    (task_id,) = night.backlog(1)
    night.then(stdout=["You've hit your session limit · resets 3:45am"], exit=1)
    proc = night.loop(env={"TZ": "America/New_York"})
    parked = poll(lambda: sql("SELECT until, reason FROM afk_account_park"), timeout=60)
    until = parked[0]["until"].astimezone(__import__("zoneinfo").ZoneInfo("America/New_York"))
    assert (until.hour, until.minute) == (3, 45)
    now = sql.one("SELECT now()")
    assert now < until <= now + __import__("datetime").timedelta(days=1)
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
    assert body["account"] == "default" and body["limited_until"].startswith(until.astimezone(__import__("datetime").UTC).strftime("%Y-%m-%dT%H:%M")) or body["limited_until"]
    other = afk("claim", "--agent", "night", "--account", "team-2")
    assert other.returncode == 0, other.stderr

