"""A Python worker on afk-watchdog: claim, keep the lease alive while the
agent works, work in checkpointed steps, run a side effect at most once,
finish; a crash anywhere loses nothing.

    AFK_AGENT_ID=backlog-1 AGENT_CMD='claude -p' python examples/worker.py

The worker is the supervisor: it claimed the task, so it alone finishes it.
The agent gets AFK_TASK_ID and AFK_TASK_TOKEN. Ctrl-C or SIGTERM pauses the
task (no attempt spent) and exits 130 or 143 without taking the next one.

A step that fails is read as `afk loop` reads it (watchdog/agents/outcome.py): a
usage limit or an outage gives the task back with no attempt spent and parks
the account (AFK_ACCOUNT, default "default"); a login that needs a person
exits 5; anything else fails the task with what the agent said.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys
import threading
from typing import Any

import tzlocal

from watchdog import EffectContext, LeaseLost, Queue, Task
from watchdog.agents.accounts import DEFAULT_ACCOUNT, Accounts
from watchdog.agents.loop import Loop, LoopOptions
from watchdog.agents.outcome import Report, classify, compile_patterns
from watchdog.agents.process import run_agent
from watchdog.config import load_all
from watchdog.errors import AccountParked

STEPS = ["reproduce", "fix", "test"]


class Stop:
    """Set by SIGINT or SIGTERM: finish nothing more, pause, exit 128+N."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.code = 0

    def __call__(self, signum: int, _frame: object) -> None:
        self.code = 128 + signum
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()


class Interrupted(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def post_comment(ctx: EffectContext) -> dict[str, Any]:
    """Stands in for a PR comment: ctx.key is the idempotency key to send along."""
    with open(os.environ.get("COMMENTS_FILE", "comments.log"), "a") as out:
        out.write(f"{ctx.task_id} {ctx.key}\n")
    return {"posted": True}


def run_step(task: Task, step: str, stop: Stop, lost: threading.Event) -> Report:
    """The agent on one step, with the task in its environment: its exit
    status and what it said. On a stop request the agent is terminated."""
    command = [*shlex.split(os.environ["AGENT_CMD"]), f"{task.title}: {step}"]
    env = {**os.environ, "AFK_TASK_ID": str(task.id), "AFK_TASK_TOKEN": str(task.token)}
    env.pop("AFK_RUNNER_ID", None)  # the agent must not claim under the worker's name
    return run_agent(command, env, stop=stop.event, lost=lost)


def settler(queue: Queue, agent: str, runner: str, account: str) -> Loop:
    """`afk loop`'s way of settling a run that failed, for this worker."""
    options = LoopOptions(agent=agent, command=[], account=account, runner=runner)
    settings = load_all().loop
    return Loop(queue, Accounts(queue.db), settings, options, tz=tzlocal.get_localzone())


def work(queue: Queue, agent: str, runner: str, stop: Stop, account: str = DEFAULT_ACCOUNT) -> int:
    """Drain the agent's backlog. Finishing a task claims the next one in the
    same statement (``claim_next=True``): one round trip per task, not two."""
    finished = 0
    loop = settler(queue, agent, runner, account)
    patterns = compile_patterns(loop.settings.limit_patterns)
    task = queue.claim(agent, runner=runner, account=account)
    while task is not None:
        if stop.is_set():  # claimed, but we are asked to stop: give it back
            queue.pause_task(task, reason="interrupted")
            break
        current = task
        try:
            with queue.leased(current) as lease:
                done = list(current.checkpoint.get("steps_done", []))
                for step in STEPS:
                    if step in done:
                        continue  # a previous attempt got this far
                    report = (
                        run_step(current, step, stop, lease.lost)
                        if os.environ.get("AGENT_CMD")
                        else Report(0)
                    )
                    status = report.exit_status
                    if stop.is_set() or status in (130, 143):
                        raise Interrupted(status if status in (130, 143) else 130)
                    if lease.lost.is_set():
                        raise lease.error or LeaseLost()
                    if status != 0:
                        now = loop.accounts.clock()
                        verdict = classify(report, now, loop.tz, patterns)
                        ended = loop.settle(current, report, verdict, now)
                        if ended is not None:
                            raise SystemExit(ended)  # the account needs a person
                        task = queue.claim(agent, runner=runner, account=account)
                        break
                    done.append(step)
                    queue.checkpoint(current, {"steps_done": done})
                else:
                    queue.effect(current, "post-comment", post_comment)
                    task = queue.done(current, {"steps": done}, claim_next=True, account=account)
                    finished += 1
        except LeaseLost:
            # someone else owns it now: move on
            task = queue.claim(agent, runner=runner, account=account)
        except Interrupted as stopped:
            queue.pause_task(current, reason="interrupted")
            print(f"worker: interrupted: task {current.id} paused", file=sys.stderr)
            raise SystemExit(stop.code or stopped.code) from None
    return finished


if __name__ == "__main__":
    agent = os.environ.get("AFK_AGENT_ID") or sys.exit("set AFK_AGENT_ID")
    # one runner id per worker process: two workers must never share one
    runner = os.environ.get("AFK_RUNNER_ID") or f"{socket.gethostname()}-worker-{os.getpid()}"
    stop = Stop()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    account = os.environ.get("AFK_ACCOUNT") or DEFAULT_ACCOUNT
    with Queue.connect() as q:
        try:
            n = work(q, agent, runner, stop, account)
        except AccountParked as parked:
            print(f"worker: {parked}", file=sys.stderr)  # `afk loop` waits; this one stops
            sys.exit(5)
    print(f"finished {n} tasks", file=sys.stderr)
    sys.exit(stop.code)
