"""What `afk --help` and a hook answered from its cache load, in a fresh
interpreter: no database driver, no templates, no HTTP, no scheduler before
they are needed (a hook runs on every tool call of an agent; what a hook
answered by the service loads: test_hook_service.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def loaded_by(code: str, env: dict[str, str] | None = None, stdin: str = "") -> set[str]:
    """The heavy libraries a fresh interpreter has loaded after ``code``."""
    probe = (
        f"{code}\nimport sys, json\n"
        "heavy = ('psycopg', 'jinja2', 'httpx', 'apscheduler', 'prometheus_client',"
        " 'tree_sitter', 'tree_sitter_bash')\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(heavy))),"
        " file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_afk_help_loads_no_heavy_library():
    code = (
        "from watchdog import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "try:\n    cli.main(['watchdog', 'run', '--help'])\nexcept SystemExit:\n    pass"
    )
    assert loaded_by(code) == set()


@pytest.mark.e2e
def test_a_hook_answered_from_its_cache_loads_no_heavy_library(afk, tmp_path):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    task = afk.json("claim", "--agent", "a")
    env = {
        **afk.env,
        "AFK_TASK_ID": task["id"],
        "AFK_TASK_TOKEN": str(task["token"]),
        "TMPDIR": str(tmp_path),
    }
    payload = json.dumps(
        {
            "session_id": "s",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
        }
    )
    code = "from watchdog import cli\ntry:\n    cli.main(['hook'])\nexcept SystemExit:\n    pass"
    # a verdict is cached for 2 s: on a loaded machine the second start may
    # come later than that, and rightly ask the database (and load psycopg);
    # the claim is that an answer from the cache loads nothing heavy
    seen = []
    for _ in range(5):
        assert afk("hook", input=payload, env=env).returncode == 0  # asks, and caches
        seen.append(loaded_by(code, env, stdin=payload))
        if seen[-1] == set():
            break
    assert seen[-1] == set(), seen
