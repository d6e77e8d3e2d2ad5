"""The real Gemini CLI (tests/helpers/gemini_cli.py pins its version), headless as a
loop runs it (`gemini -p`), pointed at a scripted Gemini API on localhost
(tests/helpers/gemini_api.py): afk's installed hooks brief it at its first turn (it
fires no SessionStart headless) and deny a zombie's shell command, directly
and through the watchdog service; and with its environment redaction on it
really drops AFK_TASK_TOKEN from a hook's environment, which AFK_TASK_LEASE
survives. No model, no network."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import Afk, require_cli
from helpers.gemini_api import GeminiAPI
from helpers.gemini_cli import VERSION, binary
from helpers.service import hooks_through

DENIED = "is no longer yours"


@pytest.fixture
def gemini() -> str:
    return require_cli("Gemini CLI", VERSION, binary(), "gemini_cli")


@pytest.fixture
def api():
    server = GeminiAPI()
    yield server
    server.close()


class Gemini:
    """`gemini -p` in a project of a test, with a home of its own."""

    def __init__(self, binary: str, afk: Afk, api: GeminiAPI, tmp_path: Path) -> None:
        self.binary, self.afk, self.api = binary, afk, api
        self.home = tmp_path / "home"
        (self.home / ".gemini").mkdir(parents=True)
        (self.home / ".gemini" / "settings.json").write_text(
            json.dumps(
                {
                    "security": {
                        "auth": {"selectedType": "gemini-api-key"},
                        "folderTrust": {"enabled": False},
                    }
                }
            )
        )
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.env = {
            **afk.env,
            "HOME": str(self.home),
            "GEMINI_API_KEY": "not-a-key",
            "GOOGLE_GEMINI_BASE_URL": api.url,
            "PATH": str(Path(Afk.command()[0]).parent) + os.pathsep + afk.env["PATH"],
        }
        installed = afk(
            "hooks", "gemini", "--install", str(self.project / ".gemini" / "settings.json")
        )
        assert installed.returncode == 0, installed.stderr

    def run(self, *script: str) -> subprocess.CompletedProcess[str]:
        self.api.script = list(script)
        done = subprocess.run(
            [self.binary, "-p", "go", "--yolo"],
            env=self.env,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done


@pytest.fixture
def client(gemini, afk, api, tmp_path) -> Gemini:
    return Gemini(gemini, afk, api, tmp_path)


def claim(client: Gemini, *names: str) -> dict:
    """A supervisor's claim, its token exported under ``names``."""
    spec = '{"repo": "acme"}'
    client.afk.json("enqueue", "--agent", "gm", "--title", "port the parser", "--spec", spec)
    task = client.afk.json("claim", "--agent", "gm")
    client.env["AFK_TASK_ID"] = task["id"]
    for name in names:
        client.env[name] = str(task["token"])
    return task


@pytest.mark.parametrize("through", ["direct", "the service"])
def test_gemini_runs_afks_hooks_brief_and_a_zombies_command_denied(client, sql, through):
    task = claim(client, "AFK_TASK_TOKEN", "AFK_TASK_LEASE")  # as `afk loop` exports it
    with hooks_through(through, client.afk.env["AFK_DSN"], client.env, "BeforeAgent", "PreToolUse"):
        # held: the brief reaches the model at the first turn, the command runs
        client.run("bash:touch held.txt", "text:done")
        assert (client.project / "held.txt").exists()
        assert "# Resume: port the parser" in client.api.seen() and "acme" in client.api.seen()
        # lost: the installed BeforeTool hook denies the zombie's command
        sql.expire(task["id"])
        assert client.afk("reclaim").returncode == 0
        client.api.requests.clear()
        client.run("bash:touch zombie.txt", "text:stopped")
        assert not (client.project / "zombie.txt").exists()
        assert DENIED in client.api.seen()  # the deny reason reached the model


@pytest.mark.parametrize("names", [("AFK_TASK_TOKEN",), ("AFK_TASK_TOKEN", "AFK_TASK_LEASE")])
def test_gemini_redaction_drops_afk_task_token_and_afk_task_lease_survives(client, names):
    """With Gemini's environment redaction on (``security.
    environmentVariableRedaction``, off by default in 0.61.0), a hook sees the
    task id but not AFK_TASK_TOKEN: without AFK_TASK_LEASE it cannot check the
    task, so it fails closed and denies the tool; with it, the tool runs."""
    settings = client.home / ".gemini" / "settings.json"
    data = json.loads(settings.read_text())
    data["security"]["environmentVariableRedaction"] = {"enabled": True}
    settings.write_text(json.dumps(data))
    claim(client, *names)
    client.run("bash:touch held.txt", "text:done")
    if "AFK_TASK_LEASE" in names:
        assert (client.project / "held.txt").exists()
        assert "cannot be checked" not in client.api.seen()
    else:
        assert not (client.project / "held.txt").exists()
        assert "your task cannot be checked" in client.api.seen()
