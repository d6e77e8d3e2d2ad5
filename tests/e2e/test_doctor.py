"""`afk doctor` against a healthy setup and each way it can be broken: a
stopped service, a wrong DSN, hooks disabled, a hook command that does not
exist. Real database, real service, real settings files."""

from __future__ import annotations

import json

import pytest
from helpers import poll
from helpers.service import Service


@pytest.fixture
def project(afk, tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    afk.env["HOME"] = str(home)
    installed = afk("hooks", "claude", "--install", str(folder / ".claude" / "settings.json"))
    assert installed.returncode == 0, installed.stderr
    return folder


def doctor(afk, project, *args: str, **env: str):
    proc = afk("doctor", "--json", "--project", str(project), *args, env=env)
    checks = json.loads(proc.stdout) if proc.stdout.strip() else []
    return proc.returncode, {c["check"].split(" ")[0]: c for c in checks}, checks


def test_a_healthy_setup_passes_every_check(afk, dsn, project):
    service = Service(dsn)
    try:
        assert poll(lambda: service.health() == 200)
        afk.env["AFK_HOOK_SOCKET"] = service.socket
        assert poll(lambda: doctor(afk, project)[0] == 0), doctor(afk, project)[2]
        _, by, checks = doctor(afk, project)
        assert {"database", "clock", "watchdog", "settings", "claude", "hook-service"} <= set(by)
        assert all(c["ok"] for c in checks)
        text = afk("doctor", "--project", str(project))
        assert text.returncode == 0 and text.stdout.startswith("ok   database")
    finally:
        service.cleanup()


def test_a_stopped_service_is_a_problem_with_its_fix(afk, project):
    code, by, _ = doctor(afk, project)
    assert code == 1
    assert not by["watchdog"]["ok"] and "afk watchdog run" in by["watchdog"]["fix"]
    # and with no service, every hook goes to the database itself
    assert not by["hook-service"]["ok"] and "afk watchdog run" in by["hook-service"]["fix"]
    assert "no service answers hooks" in by["hook-service"]["detail"]


def test_a_service_of_another_database_answers_no_hooks_and_doctor_says_so(afk, project, other_dsn):
    service = Service(other_dsn)
    try:
        poll(lambda: "answering hooks on" in service.log())
        _, by, _ = doctor(afk, project, AFK_HOOK_SOCKET=service.socket)
        assert not by["hook-service"]["ok"]
        assert "hands hooks back: another database" in by["hook-service"]["detail"]
    finally:
        service.cleanup()


def test_a_wrong_dsn_is_a_problem_not_a_traceback(afk, project):
    proc = afk(
        "doctor",
        "--project",
        str(project),
        env={"AFK_DSN": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"},
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stdout.startswith("FAIL database:")


def test_disabled_hooks_are_a_problem(afk, project):
    path = project / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    path.write_text(json.dumps({**settings, "disableAllHooks": True}))
    code, _, checks = doctor(afk, project)
    assert code == 1
    assert any("disableAllHooks" in c["detail"] and not c["ok"] for c in checks)


def test_a_hook_command_that_does_not_exist_is_a_problem(afk, project):
    path = project / ".claude" / "settings.json"
    text = path.read_text()
    afk_path = json.loads(text)["hooks"]["PreToolUse"][0]["hooks"][0]["command"].split()[0]
    path.write_text(text.replace(afk_path, "/nonexistent/bin/afk"))
    code, _, checks = doctor(afk, project)
    assert code == 1
    assert any("/nonexistent/bin/afk does not exist" in c["detail"] for c in checks)


def test_cursor_hooks_are_read_in_its_flat_format(afk, project):
    path = project / ".cursor" / "hooks.json"
    assert afk("hooks", "cursor", "--install", str(path)).returncode == 0
    _, _, checks = doctor(afk, project)
    (found,) = [c for c in checks if c["check"] == f"cursor {path}"]
    assert found["ok"] and "preToolUse" in found["detail"]
    settings = json.loads(path.read_text())
    del settings["hooks"]["preToolUse"]
    path.write_text(json.dumps(settings))
    _, _, checks = doctor(afk, project)
    (found,) = [c for c in checks if c["check"] == f"cursor {path}"]
    assert not found["ok"] and "missing for preToolUse" in found["detail"]
    assert found["fix"] == f"afk hooks cursor --install {path}"
    # an event whose hooks are not a list: named (Cursor runs none of them)
    settings["hooks"]["stop"] = {"command": "afk hook"}
    path.write_text(json.dumps(settings))
    _, _, checks = doctor(afk, project)
    said = [c for c in checks if c["check"] == f"cursor {path}" and not c["ok"]]
    assert any("the hooks of stop are not a list" in c["detail"] for c in said), checks


def test_copilot_hooks_files_are_read_from_github_hooks(afk, project):
    path = project / ".github" / "hooks" / "afk.json"
    assert afk("hooks", "copilot", "--install", str(path)).returncode == 0
    _, _, checks = doctor(afk, project)
    (found,) = [c for c in checks if c["check"] == f"copilot {path}"]
    assert found["ok"] and "PreToolUse" in found["detail"]
    text = path.read_text()
    afk_path = json.loads(text)["hooks"]["PreToolUse"][0]["bash"].split()[0]
    path.write_text(text.replace(afk_path, "/nonexistent/bin/afk"))
    _, _, checks = doctor(afk, project)
    assert any(
        c["check"] == f"copilot {path}" and "/nonexistent/bin/afk does not exist" in c["detail"]
        for c in checks
    )


def test_hooks_written_for_another_harness_are_a_problem(afk, project):
    path = project / ".gemini" / "settings.json"
    assert afk("hooks", "claude", "--install", str(path)).returncode == 0
    code, _, checks = doctor(afk, project)
    assert code == 1
    wrong = [c for c in checks if c["check"] == f"gemini {path}" and not c["ok"]]
    assert any("reads claude's payloads, not gemini's" in c["detail"] for c in wrong)
    assert afk("hooks", "gemini", "--install", str(path)).returncode == 0
    _, _, checks = doctor(afk, project)
    assert [c["ok"] for c in checks if c["check"] == f"gemini {path}"] == [True]


def test_codex_hooks_nobody_trusted_are_a_problem(afk, project, tmp_path):
    assert (
        afk("hooks", "codex", "--install", str(project / ".codex" / "hooks.json")).returncode == 0
    )
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    code, _, checks = doctor(afk, project, CODEX_HOME=str(codex_home))
    (trust,) = [c for c in checks if c["check"] == f"codex trust {config}"]
    assert code == 1 and not trust["ok"] and "--dangerously-bypass-hook-trust" in trust["fix"]
    config.write_text('[hooks.state."hooks.json:pre_tool_use:0:0"]\ntrusted_hash = "sha256:00ff"\n')
    _, _, checks = doctor(afk, project, CODEX_HOME=str(codex_home))
    (trust,) = [c for c in checks if c["check"] == f"codex trust {config}"]
    assert trust["ok"] and "trusts 1 hook" in trust["detail"]


def test_codex_hooks_in_codex_home_are_found(afk, tmp_path):
    """M11: the README installs Codex's hooks in $CODEX_HOME/hooks.json."""
    empty = tmp_path / "empty"
    empty.mkdir()
    afk.env["HOME"] = str(tmp_path)
    codex_home = tmp_path / "codex-home"
    path = codex_home / "hooks.json"
    assert afk("hooks", "codex", "--install", str(path)).returncode == 0
    _, by, checks = doctor(afk, empty, CODEX_HOME=str(codex_home))
    assert "hooks" not in by, by["hooks"]  # not "no settings file holds afk's hooks"
    (found,) = [c for c in checks if c["check"] == f"codex {path}"]
    assert found["ok"], found


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"version": 1, "hooks": "x"}', "'hooks' is not an object"),
        ("{not json", "is not valid JSON"),
        ('{"hooks": {}, "hooks": {}}', "there twice"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_broken_settings_file_is_named_with_why(afk, project, text, said):
    """M11, M20: a corrupt .cursor/hooks.json is named, as a Claude one is."""
    path = project / ".cursor" / "hooks.json"
    path.parent.mkdir()
    path.write_text(text)
    code, _, checks = doctor(afk, project)
    (found,) = [c for c in checks if c["check"] == f"cursor {path}"]
    assert code == 1 and not found["ok"] and said in found["detail"], found


def test_gemini_settings_with_comments_are_read_and_never_rewritten_without_them(afk, project):
    """M20: Gemini CLI reads its settings as JSONC; afk reads them too, and
    refuses to rewrite them (it would drop the comments), saying why."""
    path = project / ".gemini" / "settings.json"
    assert afk("hooks", "gemini", "--install", str(path)).returncode == 0
    commented = "// my settings\n" + path.read_text().replace(
        '"hooks"', '/* afk hooks */ "hooks"', 1
    )
    path.write_text(commented)
    _, _, checks = doctor(afk, project)
    assert [c["ok"] for c in checks if c["check"] == f"gemini {path}"] == [True]
    again = afk("hooks", "gemini", "--install", str(path))
    assert again.returncode == 2 and "has comments (JSONC)" in again.stderr, again.stderr
    assert path.read_text() == commented


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": 1, "a": 2}', "there twice"),
        ('{"version": 2, "hooks": {}}', "says version 2; afk writes hooks of version 1"),
    ],
)
def test_hooks_install_refuses_a_broken_file_in_one_line(afk, tmp_path, text, said):
    path = tmp_path / "settings.json"
    path.write_text(text)
    harness = "cursor" if "version" in text else "claude"
    proc = afk("hooks", harness, "--install", str(path))
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and path.read_text() == text


def test_hooks_install_reads_a_bounded_amount(afk):
    """M12: /dev/full reads zeros for ever: refused, not read until the OOM killer."""
    proc = afk("hooks", "claude", "--install", "/dev/full")
    assert proc.returncode == 2 and "larger than" in proc.stderr, proc.stderr


def test_no_hooks_anywhere_is_a_problem(afk, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    afk.env["HOME"] = str(tmp_path)
    code, by, _ = doctor(afk, empty)
    assert code == 1 and not by["hooks"]["ok"]
    assert by["hooks"]["fix"].startswith("afk hooks claude --install")


def test_doctor_says_what_an_agent_in_a_worktree_sees_of_the_projects_hooks(afk, project):
    """Issue 41 item 1: doctor said the hooks were fine while a task's
    worktree, made from committed files, had none. It says what a worktree
    holds: Claude Code's uncommitted hooks are given by afk loop itself;
    another harness's are missing there until they are committed."""
    import subprocess

    git = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, check=True)
    codex = project / ".codex" / "hooks.json"
    installed = afk("hooks", "codex", "--install", str(codex))
    assert installed.returncode == 0, installed.stderr

    def in_worktree() -> dict[str, dict]:
        _, _, checks = doctor(afk, project)
        return {c["check"].split(" ")[0]: c for c in checks if c["check"].endswith("in a worktree")}

    seen = in_worktree()
    assert seen["claude"]["ok"] and "--settings" in seen["claude"]["detail"], seen
    assert not seen["codex"]["ok"] and "without afk's hooks" in seen["codex"]["detail"], seen
    assert ".codex/hooks.json" in seen["codex"]["fix"]
    for args in (["add", "-A"], ["commit", "-q", "-m", "hooks"]):
        subprocess.run(["git", *args], cwd=project, check=True, env={**afk.env, **git})
    seen = in_worktree()
    assert seen["codex"]["ok"] and seen["claude"]["ok"], seen
    assert "committed" in seen["codex"]["detail"]
