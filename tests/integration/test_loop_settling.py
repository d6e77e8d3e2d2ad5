"""`afk loop`'s settling rules, in-process: a real queue and real tasks, the
agent a stand-in that returns what the run printed (Loop's ``start`` seam,
as honcho's manager takes its process constructor). What needs a real
process (signals, the stall, the 1.5 s kill) stays in tests/e2e."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

from watchdog.agents.accounts import Accounts
from watchdog.agents.loop import Loop, LoopOptions
from watchdog.agents.outcome import Report
from watchdog.config import LoopSettings
from watchdog.models import NewTask

OVERLOADED = "API Error: 529 Overloaded. This is a server-side issue, usually temporary"


class Agent:
    """A stand-in agent: each run prints the next of ``said`` and exits with
    its status; what the loop gave it is kept."""

    def __init__(self, *said: tuple[int, list[str]]) -> None:
        self.said = list(said)
        self.runs: list[dict[str, Any]] = []

    def __call__(self, command: list[str], env: dict[str, str], **kwargs: Any) -> Report:
        self.runs.append({"command": command, "env": dict(env), **kwargs})
        status, lines = self.said.pop(0)
        return Report(status, lines)


def loop(queue, agent: Agent, *, runs: int, **settings: Any) -> tuple[Loop, io.StringIO]:
    out = io.StringIO()
    supervisor = Loop(
        queue,
        Accounts(queue.db),
        LoopSettings(**settings),
        LoopOptions(agent="a", command=["agent", "-p"], account="acct", max_tasks=runs),
        tz=UTC,
        out=out,
        start=agent,
    )
    return supervisor, out


def test_a_run_that_exits_0_is_done_and_its_agent_had_the_task_credential(queue, sql):
    (task,) = queue.enqueue("a", [NewTask("write the parser")]).enqueued
    agent = Agent((0, ["all tests pass"]))
    supervisor, _ = loop(queue, agent, runs=1)
    assert supervisor.run() == 0
    assert queue.show(task)[0].state == "done"
    (run,) = agent.runs
    assert run["env"]["AFK_TASK_ID"] == str(task) and run["env"]["AFK_ACCOUNT"] == "acct"
    assert run["command"][:2] == ["agent", "-p"] and "write the parser" in run["command"][2]
    (ended,) = queue.runs(task)
    assert ended["outcome"] == "done" and ended["ended_at"] is not None


def test_a_failing_run_spends_an_attempt_with_the_agents_telling_line(queue):
    (task,) = queue.enqueue("a", [NewTask("fix the build")]).enqueued
    supervisor, _ = loop(queue, Agent((1, ["FAILED tests/test_api.py::test_login"])), runs=1)
    assert supervisor.run() == 0
    got = queue.show(task)[0]
    assert (got.state, got.attempts) == ("todo", 1)
    assert "FAILED tests/test_api.py::test_login" in (got.last_error or "")


def test_outages_in_a_row_retry_without_an_attempt_and_park_the_account_at_the_breaker(queue, sql):
    tasks = queue.enqueue("a", [NewTask(f"t{i}") for i in range(3)]).enqueued
    agent = Agent(*[(1, [OVERLOADED])] * 3)
    supervisor, out = loop(queue, agent, runs=3, transient_backoff_seconds=10, outage_breaker=3)
    assert supervisor.run() == 0
    shown = [queue.show(t)[0] for t in tasks]
    assert [(t.state, t.attempts) for t in shown] == [("todo", 0)] * 3
    (parked,) = sql("SELECT kind, until - parked_at AS wait FROM afk_account_park")
    # the third in a row: 10 s doubled twice, and the account parked for it
    assert parked["kind"] == "outage" and 39 <= parked["wait"].total_seconds() <= 41
    assert "provider outage (3 in a row)" in out.getvalue()


def test_a_usage_limit_pauses_the_task_and_parks_the_account_until_the_reset(queue, sql):
    (task,) = queue.enqueue("a", [NewTask("t")]).enqueued
    reset = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=3)
    said = f"Claude AI usage limit reached|{int(reset.timestamp())}"
    supervisor, out = loop(queue, Agent((1, [said])), runs=1)
    assert supervisor.run() == 0
    got = queue.show(task)[0]
    assert (got.state, got.attempts) == ("paused", 0)
    (parked,) = sql("SELECT kind, until FROM afk_account_park WHERE cleared_at IS NULL")
    assert parked["kind"] == "usage_limit" and parked["until"] == reset
    assert "account 'acct' hit a usage limit" in out.getvalue()


def test_a_login_that_needs_a_person_stops_the_loop_with_5_and_parks_for_good(queue, sql):
    queue.enqueue("a", [NewTask("t"), NewTask("u")])
    alerts = []
    supervisor, out = loop(queue, Agent((1, ["Invalid API key · Please run /login"])), runs=2)
    supervisor.alert = alerts.append
    assert supervisor.run() == 5
    (parked,) = sql("SELECT kind, until FROM afk_account_park")
    assert parked == {"kind": "needs_human", "until": None}
    assert [p.account for p in alerts] == ["acct"]
    assert "afk limit --account acct --clear" in out.getvalue()
    assert queue.status("a")["todo"] == 1  # the second task was never started
