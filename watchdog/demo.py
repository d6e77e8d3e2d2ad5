"""``afk demo``: a small backlog, a worker that crashes mid-task, the reclaim,
and a resume that reads the crashed worker's checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

from .db import Database
from .models import NewTask
from .queue import Queue

LEASE = 2.0
STEPS = ["read the issue", "write the test", "fix the code", "open the PR"]
BACKLOG = [
    "Fix the flaky login test",
    "Bump the HTTP client",
    "Add retry to the uploader",
    "Document the config file",
    "Remove the dead feature flag",
]


def say(text: str) -> None:
    print(text, flush=True)


def run(dsn: str) -> int:
    db = Database(dsn)
    db.migrate()
    queue = Queue(db)
    agent = f"demo-{uuid.uuid4().hex[:8]}"
    try:
        plan = [
            NewTask(title, {"steps": STEPS}, key=f"{agent}:{i}")
            for i, title in enumerate(BACKLOG, 1)
        ]
        first = queue.enqueue(agent, plan)
        again = queue.enqueue(agent, plan)
        say(
            f"1. Enqueued {len(first.enqueued)} tasks for agent {agent}; enqueueing the same "
            f"plan again added {len(again.enqueued)} ({len(again.duplicates)} duplicates)."
        )

        say("2. A worker claims the first task, checkpoints two steps, and is killed (SIGKILL).")
        crash = subprocess.run(
            [sys.executable, "-m", "watchdog.demo", "crash", dsn, agent],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if crash.returncode != -signal.SIGKILL:
            say(
                f"   the worker was expected to die by SIGKILL; it exited {crash.returncode}: "
                f"{crash.stderr.strip()}"
            )
            return 1
        crashed = uuid.UUID(crash.stdout.strip())
        task, _ = queue.show(crashed)
        say(
            f"   '{task.title}' is still {task.state}, checkpoint "
            f"{json.dumps(task.checkpoint)}, lease until {task.lease_until:%H:%M:%S%z}."
        )

        say(f"3. The lease ({LEASE:g}s) runs out; the watchdog's reclaim pauses the task.")
        reclaimed = 0
        deadline = time.monotonic() + 30
        while reclaimed == 0 and time.monotonic() < deadline:
            reclaimed = queue.reclaim().total
            if reclaimed == 0:
                time.sleep(0.2)
        task, _ = queue.show(crashed)
        say(
            f"   reclaimed {reclaimed}: '{task.title}' is {task.state} "
            f"(last error: {task.last_error})."
        )

        say("4. A new worker resumes it from the checkpoint, then drains the backlog.")
        runner = f"{agent}-worker-2"
        while (claimed := queue.claim(agent, runner=runner, lease_seconds=60)) is not None:
            done_steps = list(claimed.checkpoint.get("steps_done", []))
            todo = [s for s in STEPS if s not in done_steps]
            if done_steps:
                say(
                    f"   '{claimed.title}' (attempt {claimed.attempts}): skipping "
                    f"{json.dumps(done_steps)}, doing {json.dumps(todo)}"
                )
            for step in todo:
                done_steps.append(step)
                queue.checkpoint(claimed, {"steps_done": done_steps})
            queue.done(claimed, {"steps": len(done_steps)})
        _, history = queue.show(crashed)
        say("5. History of the crashed task:")
        for event in history:
            say(
                f"   {event['reason']:<16} {event['from_state'] or '-':>8} -> "
                f"{event['to_state']:<8} runner={event['runner']}"
            )
        status = queue.status(agent)
        say(f"6. Final status: {json.dumps(status)}")
        return 0 if status["done"] == len(BACKLOG) else 1
    finally:
        # the demo's tasks are not the user's: leave the queue as it was
        queue.forget_agent(agent)
        say(f"   (the demo's tasks, agent {agent}, were deleted again)")
        queue.close()


def crash(dsn: str, agent: str) -> None:
    """A worker that checkpoints two steps of its task and then dies hard."""
    queue = Queue.connect(dsn, pool_size=None)
    task = queue.claim(agent, runner=f"{agent}-worker-1", lease_seconds=LEASE)
    assert task is not None
    queue.checkpoint(task, {"steps_done": STEPS[:1]})
    queue.checkpoint(task, {"steps_done": STEPS[:2]})
    print(task.id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1:2] == ["crash"]:
        crash(sys.argv[2], sys.argv[3])
