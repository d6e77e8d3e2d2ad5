"""The real Codex CLI (tests/helpers/codex_cli.py pins its version) as a loop runs it,
`codex exec`, pointed at a scripted Responses API on localhost
(tests/helpers/responses_api.py): afk's installed hooks brief it and stop a zombie's
shell command, directly and through the watchdog service, and the two ways
Codex skips hooks without a word (an untrusted hook, an untrusted project)
are real and `afk doctor` names them. No model, no network."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import Afk, require_cli
from helpers.codex_cli import VERSION, binary
from helpers.responses_api import ResponsesAPI
from helpers.service import hooks_through

DENIED = "is no longer yours"


@pytest.fixture
def codex() -> str:
    return require_cli("Codex CLI", VERSION, binary(), "codex_cli")


@pytest.fixture
def api():
    server = ResponsesAPI()
    yield server
    server.close()


class Codex:
    """`codex exec` in a project of a test, with a home of its own."""

    def __init__(self, binary: str, afk: Afk, api: ResponsesAPI, tmp_path: Path) -> None:
        self.binary, self.afk, self.api = binary, afk, api
        self.home = tmp_path / "home"
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir(parents=True)
        self.project = tmp_path / "project"
        self.project.mkdir()
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        self.env = {
            **afk.env,
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "CODEX_TEST_KEY": "not-a-key",
            "PATH": str(Path(Afk.command()[0]).parent) + os.pathsep + afk.env["PATH"],
        }

    def install(self, path: Path) -> None:
        done = self.afk("hooks", "codex", "--install", str(path), env={"HOME": str(self.home)})
        assert done.returncode == 0, done.stderr

    def run(self, *script: str, trust_hooks: bool = True) -> subprocess.CompletedProcess[str]:
        self.api.script = list(script)
        command = [
            self.binary,
            "exec",
            "--dangerously-bypass-approvals-and-sandbox",
            *(["--dangerously-bypass-hook-trust"] if trust_hooks else []),
            "-c",
            "model_provider=local",
            "-c",
            'model_providers.local.name="local"',
            "-c",
            f'model_providers.local.base_url="{self.api.url}"',
            "-c",
            'model_providers.local.wire_api="responses"',
            "-c",
            'model_providers.local.env_key="CODEX_TEST_KEY"',
            "go",
        ]
        done = subprocess.run(
            command,
            env=self.env,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def doctor(self) -> dict[str, dict]:
        done = self.afk(
            "doctor",
            "--json",
            "--project",
            str(self.project),
            env={"HOME": str(self.home), "CODEX_HOME": str(self.codex_home)},
        )
        return {
            c["check"].split(" ")[0] + " " + c["check"].split(" ")[1]: c
            for c in json.loads(done.stdout)
            if " " in c["check"]
        }


@pytest.fixture
def client(codex, afk, api, tmp_path) -> Codex:
    return Codex(codex, afk, api, tmp_path)


def supervise(client: Codex, sql) -> dict:
    client.afk.json(
        "enqueue", "--agent", "cx", "--title", "port the parser", "--spec", '{"repo": "acme"}'
    )
    task = client.afk.json("claim", "--agent", "cx")
    client.env |= {"AFK_TASK_ID": task["id"], "AFK_TASK_TOKEN": str(task["token"])}
    return task


def lose(client: Codex, sql, task: dict) -> None:
    sql.expire(task["id"])
    assert client.afk("reclaim").returncode == 0


@pytest.mark.parametrize("through", ["direct", "the service"])
def test_codex_runs_afks_hooks_brief_and_a_zombies_command_denied(client, sql, through):
    client.install(client.codex_home / "hooks.json")
    task = supervise(client, sql)
    with hooks_through(
        through, client.afk.env["AFK_DSN"], client.env, "SessionStart", "PreToolUse"
    ):
        # held: the brief reaches the model, the command runs
        client.run("bash:touch held.txt", "text:done")
        assert (client.project / "held.txt").exists()
        assert "# Resume: port the parser" in client.api.seen() and "acme" in client.api.seen()
        # lost: the installed PreToolUse hook denies the zombie's command
        lose(client, sql, task)
        client.api.requests.clear()
        client.run("bash:touch zombie.txt", "text:stopped")
        assert not (client.project / "zombie.txt").exists()
        assert DENIED in client.api.seen()  # the deny reason reached the model


def test_codex_skips_untrusted_hooks_without_a_word_and_doctor_says_so(client, sql):
    client.install(client.codex_home / "hooks.json")
    task = supervise(client, sql)
    lose(client, sql, task)
    done = client.run("bash:touch zombie.txt", "text:went on", trust_hooks=False)
    assert (client.project / "zombie.txt").exists()  # no hook ran: the zombie went on
    assert DENIED not in client.api.seen() and DENIED not in done.stdout + done.stderr
    trust = client.doctor()["codex trust"]
    assert not trust["ok"] and "--dangerously-bypass-hook-trust" in trust["fix"]


def test_codex_loads_a_projects_hooks_only_in_a_trusted_project_and_doctor_says_so(client, sql):
    client.install(client.project / ".codex" / "hooks.json")
    task = supervise(client, sql)
    lose(client, sql, task)
    client.run("bash:touch untrusted.txt", "text:went on")
    assert (client.project / "untrusted.txt").exists()  # the project's hooks never ran
    project = client.doctor()["codex project"]
    assert not project["ok"] and "codex exec --trust" in project["fix"]
    # trusted, as `codex exec --trust` records it: the hooks run and deny
    config = client.codex_home / "config.toml"
    config.write_text(f'[projects."{client.project}"]\ntrust_level = "trusted"\n')
    client.run("bash:touch trusted.txt", "text:stopped")
    assert not (client.project / "trusted.txt").exists()
    assert DENIED in client.api.seen()
    assert client.doctor()["codex project"]["ok"]


def test_under_the_sandbox_codex_keeps_its_state_in_its_profiles_folder(codex, afk, api, tmp_path):
    """Issue 49 item 6, Codex's sibling: under `afk loop --sandbox` the
    person's ~/.codex was writable to the run (a hook planted there ran at
    their next `codex`) and its other sessions readable. The run's
    CODEX_HOME is its profile's own folder under afk's home: its session is
    kept there, afk's hooks (written there by the loop, no other) brief it,
    a hook an earlier run planted there never runs, and ~/.codex is never
    read nor written."""
    import shutil
    import tempfile

    from helpers.sandbox_runtime import VERSION as SRT_VERSION
    from helpers.sandbox_runtime import binary as srt_binary

    srt = require_cli("the sandbox runtime", SRT_VERSION, srt_binary(), "sandbox_runtime")
    base = tmp_path if not str(tmp_path).startswith("/dev/") else None
    folder = Path(tempfile.mkdtemp(prefix="afk-codex-home-", dir=base or "/tmp"))
    try:
        home, project = folder / "home", folder / "project"
        persons = home / ".codex"
        persons.mkdir(parents=True)
        (persons / "secret-session.jsonl").write_text("THE PERSONS OWN SESSION\n")
        project.mkdir()
        for argv in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "base"]):
            subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid",
                            *argv], cwd=project, check=True)  # fmt: skip
        afk_home = folder / "afk-home"
        env = {"HOME": str(home), "AFK_SRT": srt, "AFK_HOME": str(afk_home),
               "CODEX_TEST_KEY": "not-a-key", "OPENAI_BASE_URL": api.url}  # fmt: skip
        own = afk_home / "homes" / "default" / "codex"
        planted = {"hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": f"touch {own}/PLANTED-HOOK-RAN"}]}]}}  # fmt: skip
        own.mkdir(parents=True)
        (own / "hooks.json").write_text(json.dumps(planted))
        (task,) = afk.json("enqueue", "--agent", "cx", "--title", "port the parser",
                           "--spec", '{"repo": "acme"}', "--repo", str(project),
                           env=env)["enqueued"]  # fmt: skip
        api.script = [
            "bash:cat ~/.codex/secret-session.jsonl; echo read-rc=$?",
            "bash:echo x > ~/.codex/PLANTED; echo write-rc=$?",
            "text:done",
        ]
        agent = [codex, "exec", "--dangerously-bypass-approvals-and-sandbox",
                 "-c", "model_provider=local", "-c", 'model_providers.local.name="local"',
                 "-c", f'model_providers.local.base_url="{api.url}"',
                 "-c", 'model_providers.local.wire_api="responses"',
                 "-c", 'model_providers.local.env_key="CODEX_TEST_KEY"']  # fmt: skip
        loop = Afk.command("loop", "--agent", "cx", "--max-tasks", "1", "--sandbox", "--")
        proc = subprocess.run([*loop, *agent], env={**afk.env, **env}, cwd=project,
                              capture_output=True, text=True, timeout=240)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        shown = afk.json("show", task, env=env)
        said = api.seen()
        assert "# Resume: port the parser" in said  # afk's hooks, from its folder, ran
        assert "THE PERSONS OWN SESSION" not in said and "read-rc=0" not in said
        # (the engine hides it under an empty folder of the run's: a write
        # there may succeed, and is gone with the run)
        assert not (persons / "PLANTED").exists()
        assert sorted(p.name for p in persons.iterdir()) == ["secret-session.jsonl"]
        assert list((own / "sessions").rglob("*.jsonl")), "no session kept in its folder"
        assert not (own / "PLANTED-HOOK-RAN").exists()
        assert shown["runs"][0]["sandbox"]["engine"] == "srt", shown
    finally:
        shutil.rmtree(folder, ignore_errors=True)
