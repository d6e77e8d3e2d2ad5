"""The embedded default: with no DSN, the first command starts a server from the
pip-installed wheel, later commands reuse it, `afk db stop` stops it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def afk_home():
    home = Path(tempfile.mkdtemp(prefix="afk-home-"))
    yield home
    subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "db", "stop"],
        env={**os.environ, "AFK_HOME": str(home)},
        capture_output=True,
        timeout=60,
    )
    shutil.rmtree(home, ignore_errors=True)


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AFK_DSN", "AFK_AGENT_ID")}
    env["AFK_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_first_command_starts_the_server_and_later_ones_reuse_it(afk_home):
    assert json.loads(run(afk_home, "db", "status").stdout)["running"] is False
    out = run(afk_home, "enqueue", "--agent", "a", "--title", "t", "--key", "k")
    assert out.returncode == 0, out.stderr
    # M16: said once, by the command that started it; not on every later call
    assert "started the embedded server under" in out.stderr
    later = run(afk_home, "status")
    assert later.returncode == 0 and "embedded server" not in later.stderr, later.stderr
    first = json.loads(run(afk_home, "db", "status").stdout)
    assert first["running"] and first["pgdata"] == str(afk_home / "pgdata")
    assert json.loads(
        run(afk_home, "enqueue", "--agent", "a", "--title", "t", "--key", "k").stdout
    )["duplicates"] == ["k"]
    assert json.loads(run(afk_home, "db", "status").stdout)["pid"] == first["pid"]

    assert json.loads(run(afk_home, "db", "stop").stdout) == {"stopped": True}
    assert json.loads(run(afk_home, "db", "status").stdout)["running"] is False
    # the data survives a stop: the next command starts the server again
    assert json.loads(run(afk_home, "status").stdout)["todo"] == 1
