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


def test_under_the_sandbox_gemini_keeps_its_state_in_its_profiles_folder(
    gemini, afk, api, tmp_path
):
    """Issue 49 item 6, Gemini's sibling: under `afk loop --sandbox` the
    person's ~/.gemini was the run's to write and read. The run's
    GEMINI_CLI_HOME is its profile's own folder under afk's home: its
    settings there (the login's choice) are kept, afk's hooks (written there
    by the loop, no other) brief it, a hook an earlier run planted never runs,
    and ~/.gemini is never read nor written."""
    import shutil
    import tempfile

    from helpers.sandbox_runtime import VERSION as SRT_VERSION
    from helpers.sandbox_runtime import binary as srt_binary

    srt = require_cli("the sandbox runtime", SRT_VERSION, srt_binary(), "sandbox_runtime")
    base = tmp_path if not str(tmp_path).startswith("/dev/") else None
    folder = Path(tempfile.mkdtemp(prefix="afk-gemini-home-", dir=base or "/tmp"))
    try:
        home, project = folder / "home", folder / "project"
        persons = home / ".gemini"
        persons.mkdir(parents=True)
        (persons / "secret.json").write_text('"THE PERSONS OWN LOGIN"\n')
        project.mkdir()
        for argv in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "base"]):
            subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid",
                            *argv], cwd=project, check=True)  # fmt: skip
        afk_home = folder / "afk-home"
        env = {"HOME": str(home), "AFK_SRT": srt, "AFK_HOME": str(afk_home),
               "GEMINI_API_KEY": "not-a-key", "GOOGLE_GEMINI_BASE_URL": api.url}  # fmt: skip
        own = afk_home / "homes" / "default" / "gemini"
        # what `afk profile login default --harness gemini` leaves there, and
        # a hook an earlier run planted beside it
        (own / ".gemini").mkdir(parents=True)
        (own / ".gemini" / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": False}},
            "hooks": {"BeforeTool": [{"matcher": "*", "hooks": [
                {"type": "command", "command": f"touch {own}/PLANTED-HOOK-RAN"}]}]},
        }))  # fmt: skip
        (task,) = afk.json("enqueue", "--agent", "gm", "--title", "port the parser",
                           "--spec", '{"repo": "acme"}', "--repo", str(project),
                           env=env)["enqueued"]  # fmt: skip
        api.script = [
            "bash:cat ~/.gemini/secret.json; echo read-rc=$?",
            "bash:echo x > ~/.gemini/PLANTED; echo write-rc=$?",
            "text:done",
        ]
        loop = Afk.command("loop", "--agent", "gm", "--max-tasks", "1", "--sandbox", "--")
        proc = subprocess.run([*loop, gemini, "--yolo", "-p"], env={**afk.env, **env},
                              cwd=project, capture_output=True, text=True,
                              timeout=240)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        shown = afk.json("show", task, env=env)
        said = api.seen()
        assert "# Resume: port the parser" in said, proc.stderr[-3000:]  # afk's hooks ran
        assert "THE PERSONS OWN LOGIN" not in said and "read-rc=0" not in said
        assert not (persons / "PLANTED").exists()
        assert sorted(p.name for p in persons.iterdir()) == ["secret.json"]
        assert not (own / "PLANTED-HOOK-RAN").exists()
        assert shown["runs"][0]["sandbox"]["engine"] == "srt", shown
    finally:
        shutil.rmtree(folder, ignore_errors=True)
