"""A worker of the crash torture test (tests/e2e/test_torture.py), run as a real
process and SIGKILLed at random moments. Each task: three checkpointed steps,
a same-database effect (transactional: exactly once), an external effect (an
append to a file, standing in for a PR comment), done. Every successful write
is logged with its database time, for the test's checks."""

from __future__ import annotations

import json
import os
import random
import sys
import time

from watchdog import LeaseLost, Queue

STEPS = 3


def main(dsn: str, agent: str, runner: str, folder: str) -> None:
    queue = Queue.connect(dsn, pool_size=None)
    log = open(os.path.join(folder, f"writes-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
    effects = os.path.join(folder, "external-effects")

    def wrote(task_id: object, token: int, what: str, step: int, at: object) -> None:
        log.write(
            json.dumps(
                {
                    "task": str(task_id),
                    "token": token,
                    "what": what,
                    "step": step,
                    "at": str(at),
                    "pid": os.getpid(),
                }
            )
            + "\n"
        )
        log.flush()

    def external(ctx: object) -> dict[str, int]:
        with open(effects, "a") as out:
            out.write(f"{ctx.task_id} {os.getpid()}\n")  # type: ignore[attr-defined]
            out.flush()
        time.sleep(random.uniform(0, 0.01))  # the remote call's latency: a kill may land here
        return {"pid": os.getpid()}

    def same_db(ctx: object) -> None:
        ctx.conn.execute(
            "INSERT INTO torture_effect (task_id, pid) VALUES (%s, %s)",  # type: ignore[attr-defined]
            (ctx.task_id, os.getpid()),
        )  # type: ignore[attr-defined]

    while True:
        task = queue.claim(agent, runner=runner, lease_seconds=2)
        if task is None:
            status = queue.status(agent)
            if status["done"] + status["failed"] == sum(status.values()):
                return
            time.sleep(0.05)
            continue
        try:
            step = int(task.checkpoint.get("step", 0))
            while step < STEPS:
                time.sleep(random.uniform(0.01, 0.08))
                step += 1
                after = queue.checkpoint(task, {"step": step})
                wrote(task.id, task.token, "checkpoint", step, after.updated_at)
            queue.effect(task, "db-row", same_db, transactional=True)
            queue.effect(task, "comment", external)
            finished = queue.done(task)
            wrote(task.id, task.token, "done", step, finished.updated_at)
        except LeaseLost:
            continue


if __name__ == "__main__":
    main(*sys.argv[1:5])
