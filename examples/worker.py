"""A Python worker on afk-watchdog: claim, work in checkpointed steps, run a
side effect at most once, finish; a crash anywhere loses nothing.

    AFK_AGENT_ID=backlog-1 python examples/worker.py
"""

from __future__ import annotations

import os
import subprocess
import sys

from watchdog import LeaseLost, Queue

STEPS = ["reproduce", "fix", "test"]


def post_comment(ctx) -> dict:
    """Stands in for a PR comment: ctx.key is the idempotency key to send along."""
    with open(os.environ.get("COMMENTS_FILE", "comments.log"), "a") as out:
        out.write(f"{ctx.task_id} {ctx.key}\n")
    return {"posted": True}


def work(queue: Queue, agent: str, runner: str) -> int:
    finished = 0
    while (task := queue.claim(agent, runner=runner)) is not None:
        try:
            done = list(task.checkpoint.get("steps_done", []))
            for step in STEPS:
                if step in done:
                    continue  # a previous attempt got this far
                agent_cmd = os.environ.get("AGENT_CMD")
                if agent_cmd:
                    subprocess.run([*agent_cmd.split(), f"{task.title}: {step}"], check=True)
                done.append(step)
                queue.checkpoint(task, {"steps_done": done})
            queue.effect(task, "post-comment", post_comment)
            queue.done(task, {"steps": done})
            finished += 1
        except LeaseLost:
            continue  # someone else owns it now: move on
        except subprocess.CalledProcessError as exc:
            queue.fail(task, f"agent exited {exc.returncode} at {step!r}")
    return finished


if __name__ == "__main__":
    agent = os.environ.get("AFK_AGENT_ID") or sys.exit("set AFK_AGENT_ID")
    with Queue() as q:
        n = work(q, agent, os.environ.get("AFK_RUNNER_ID", f"worker-{os.getpid()}"))
    print(f"finished {n} tasks", file=sys.stderr)
