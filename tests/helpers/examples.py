"""The examples (examples/ralph.sh, examples/worker.py) driven as a user runs
them, for the tests that check them on a database and through a pooler."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from watchdog import NewTask

ROOT = Path(__file__).parent.parent.parent


def stand_in_agent(tmp_path: Path) -> Path:
    """An agent command for the examples: logs its prompt; fails on 'broken'."""
    agent = tmp_path / "agent.sh"
    agent.write_text(
        f'#!/bin/sh\necho "$1" | head -n 1 >> {tmp_path}/prompts\n'
        'case "$1" in *broken*) exit 9;; esac\n'
    )
    agent.chmod(agent.stat().st_mode | stat.S_IEXEC)
    return agent


def check_ralph_example(queue: Any, tmp_path: Path, dsn: str) -> None:
    """ralph.sh drains a backlog: each task once, a broken one failed, its output closed."""
    queue.enqueue("R", [NewTask("one"), NewTask("broken two", max_attempts=1), NewTask("three")])
    env = {
        **os.environ,
        "AFK_DSN": dsn,
        "AFK_AGENT_ID": "R",
        "AGENT_CMD": str(stand_in_agent(tmp_path)),
        "AFK": f"{sys.executable} -m watchdog.cli",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }
    proc = subprocess.Popen(
        ["bash", str(ROOT / "examples" / "ralph.sh")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.wait(timeout=120) == 0
    # nothing the loop started outlives it holding its output open (the
    # keepalive's sleep lasts a third of the 120 s lease)
    reader = threading.Thread(target=proc.communicate)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "a child of the loop still holds its stdout"
    assert (tmp_path / "prompts").read_text().splitlines() == ["one", "broken two", "three"]
    assert queue.status("R") == {
        "todo": 0,
        "running": 0,
        "paused": 0,
        "done": 2,
        "failed": 1,
        "blocked": 0,
    }


def check_worker_example(queue: Any, tmp_path: Path, dsn: str) -> None:
    """worker.py resumes a crashed worker's steps and finishes every task."""
    queue.enqueue("W", [NewTask(f"t{i}") for i in range(3)])
    # a previous worker crashed after two steps of t0
    crashed = queue.claim("W", runner="old")
    queue.checkpoint(crashed, {"steps_done": ["reproduce", "fix"]})
    queue.pause("W", runner="old")
    env = {
        **os.environ,
        "AFK_DSN": dsn,
        "AFK_AGENT_ID": "W",
        "COMMENTS_FILE": str(tmp_path / "comments"),
        "AGENT_CMD": str(stand_in_agent(tmp_path)),
    }
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "worker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert queue.status("W")["done"] == 3
    prompts = (tmp_path / "prompts").read_text().splitlines()
    assert prompts.count("t0: test") == 1 and "t0: fix" not in prompts
    assert len((tmp_path / "comments").read_text().splitlines()) == 3
