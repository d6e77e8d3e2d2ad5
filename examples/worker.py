"""A Python worker on afk-watchdog: claim, keep the lease alive while the
agent works, work in checkpointed steps, run a side effect at most once,
finish; a crash anywhere loses nothing.

    AFK_AGENT_ID=backlog-1 AGENT_CMD='claude -p' python examples/worker.py

The worker is the supervisor: it claimed the task, so it alone finishes it.
The agent gets AFK_TASK_ID and AFK_TASK_TOKEN. Ctrl-C or SIGTERM pauses the
task (no attempt spent) and exits 130 or 143 without taking the next one.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from watchdog import EffectContext, LeaseLost, Queue, Task

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


def run_agent(task: Task, step: str, stop: Stop) -> int:
    """The agent on one step, with the task in its environment. Returns its
    exit status; on a stop request the agent is terminated."""
    command = [*shlex.split(os.environ["AGENT_CMD"]), f"{task.title}: {step}"]
    env = {**os.environ, "AFK_TASK_ID": str(task.id), "AFK_TASK_TOKEN": str(task.token)}
    env.pop("AFK_RUNNER_ID", None)  # the agent must not claim under the worker's name
    with subprocess.Popen(command, env=env) as agent:
        while True:
            try:
                return agent.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                if stop.is_set():
                    agent.terminate()


def work(queue: Queue, agent: str, runner: str, stop: Stop) -> int:
    """Drain the agent's backlog. Finishing a task claims the next one in the
    same statement (``claim_next=True``): one round trip per task, not two."""
    finished = 0
    task = queue.claim(agent, runner=runner)
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
                    status = run_agent(current, step, stop) if os.environ.get("AGENT_CMD") else 0
                    if stop.is_set() or status in (130, 143):
                        raise Interrupted(status if status in (130, 143) else 130)
                    if lease.lost.is_set():
                        raise lease.error or LeaseLost()
                    if status != 0:
                        task = queue.fail(
                            current, f"agent exited {status} at {step!r}", claim_next=True
                        )
                        break
                    done.append(step)
                    queue.checkpoint(current, {"steps_done": done})
                else:
                    queue.effect(current, "post-comment", post_comment)
                    task = queue.done(current, {"steps": done}, claim_next=True)
                    finished += 1
        except LeaseLost:
            task = queue.claim(agent, runner=runner)  # someone else owns it now: move on
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
    with Queue.connect() as q:
        n = work(q, agent, runner, stop)
    print(f"finished {n} tasks", file=sys.stderr)
    sys.exit(stop.code)
