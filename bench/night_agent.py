"""The agent of the simulated night (bench/night.py): a stand-in that behaves
as a coding agent's night does, drawn at random per run, and prints what
Claude Code prints for each case. Each run appends one JSON line to
NIGHT_LOG: the task, when it started and ended, what it did, and whether its
work was kept (a completed run whose supervisor then finished the task).

What a run does (NIGHT_WEIGHTS overrides the weights, as JSON):
  work      think for a while, print a JSON result with its cost, exit 0
  fail      print a test failure, exit 1
  limit     the account's usage limit, with a reset a few seconds ahead
  outage    an overloaded API (529), exit 1
  ask       `afk ask` a question, exit 0 (the task waits for a person)
  crash     SIGKILL the supervisor, then go on working as an orphan (its
            supervisor's guardian stops it: it never completes)
  long      work for longer than the lease, saying so as it goes (the
            supervisor keeps it)
  hang      say a line, then nothing for good (the supervisor stops it as
            stalled)
  startup   nothing at all from the start, as a client hung at start-up
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

WEIGHTS = {
    "work": 70,
    "fail": 8,
    "limit": 3,
    "outage": 6,
    "ask": 3,
    "crash": 2,
    "long": 8,
    "hang": 2,
    "startup": 2,
}


def log(entry: dict[str, object]) -> None:
    with open(os.environ["NIGHT_LOG"], "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def _log_lines() -> list[str]:
    try:
        with open(os.environ["NIGHT_LOG"], encoding="utf-8") as log:
            return log.readlines()
    except FileNotFoundError:
        return []


def main() -> int:
    weights = {**WEIGHTS, **json.loads(os.environ.get("NIGHT_WEIGHTS") or "{}")}
    task = os.environ["AFK_TASK_ID"]
    # what a run does is drawn from its task's title and how many runs it had
    # before: two nights of one backlog (inside the sandbox and without it)
    # draw the same runs, and their times compare run for run
    title = re.search(r"item \d+", " ".join(sys.argv[1:]))
    before = sum(1 for line in _log_lines() if f'"task": "{task}"' in line)
    rng = random.Random(f"{title.group(0)}|{before}" if title else None)
    kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    started = time.time()
    entry: dict[str, object] = {
        "task": task,
        "kind": kind,
        "start": started,
        "account": os.environ.get("AFK_ACCOUNT"),
    }
    unit = float(os.environ.get("NIGHT_UNIT", "0.5"))  # an agent-minute, in seconds
    if kind == "crash":
        entry["end"] = time.time()
        log(entry)
        os.kill(os.getppid(), signal.SIGKILL)  # the supervisor dies; the orphan works on
        time.sleep(unit * 3)
        log(
            {
                **entry,
                "kind": "orphan",
                "start": entry["end"],
                "end": time.time(),
                "completed": True,
            }
        )
        return 0
    if kind in ("hang", "startup"):
        if kind == "hang":
            print("Reading the codebase…", flush=True)
        entry["end"] = time.time()
        log(entry)  # (its end is the supervisor's: it says nothing more)
        time.sleep(3600)
        return 0
    if kind == "limit":
        reset = int(time.time() + float(os.environ.get("NIGHT_RESET", "4")))
        print(f"Claude AI usage limit reached|{reset}", flush=True)
        entry.update(end=time.time(), reset=reset)
        log(entry)
        return 1
    if kind == "outage":
        print("API Error: 529 Overloaded. This is a server-side issue, usually temporary.")
        entry["end"] = time.time()
        log(entry)
        return 1
    if kind == "ask":
        subprocess.run(
            [sys.executable, "-m", "watchdog.cli", "ask", f"Ship task {task[:8]} to prod?"],
            check=False,
            stdout=subprocess.DEVNULL,
        )
        entry["end"] = time.time()
        log(entry)
        return 0
    # (the night's lease, as the night says it: an agent is given no AFK_
    # setting of the loop's)
    lease = float(os.environ.get("NIGHT_LEASE", "120"))
    think = lease * 1.5 if kind == "long" else unit * rng.uniform(0.5, 1.5)
    until = time.monotonic() + think
    while time.monotonic() < until:  # working, and saying so now and then
        time.sleep(min(unit, max(until - time.monotonic(), 0)))
        if kind == "long":
            print("Running the tests…", flush=True)
    if kind == "fail":
        print("FAILED tests/test_api.py::test_login - AssertionError: 401 != 200", flush=True)
        entry["end"] = time.time()
        log(entry)
        return 1
    cost = round(rng.uniform(0.05, 0.4), 4)
    print(
        json.dumps(
            {
                "type": "result",
                "is_error": False,
                "result": "done",
                "total_cost_usd": cost,
                "num_turns": 4,
                "session_id": f"s-{task[:8]}-{int(started * 1000)}",
            }
        ),
        flush=True,
    )
    entry.update(end=time.time(), cost=cost, completed=True)
    log(entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
