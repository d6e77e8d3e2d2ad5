"""Which agent commands turn their harness's permission checks off (issue 40
item 3): `afk loop` refuses them without a boundary."""

from __future__ import annotations

import json

import pytest

from watchdog.agents.harnesses import skips_permissions


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["claude", "-p", "--dangerously-skip-permissions"], "--dangerously-skip-permissions"),
        (["claude", "-p", "--permission-mode", "bypassPermissions"],
         "--permission-mode bypassPermissions"),
        (["claude", "--permission-mode=bypassPermissions", "-p"],
         "--permission-mode bypassPermissions"),
        (["codex", "exec", "--dangerously-bypass-approvals-and-sandbox"],
         "--dangerously-bypass-approvals-and-sandbox"),
        (["codex", "exec", "--yolo"], "--yolo"),
        (["gemini", "--yolo", "-p"], "--yolo"),
        (["gemini", "--approval-mode", "yolo", "-p"], "--approval-mode yolo"),
        (["gemini", "--approval-mode=yolo"], "--approval-mode yolo"),
        (["copilot", "-p", "--allow-all-tools"], "--allow-all-tools"),
        (["sh", "-c", 'claude -p --dangerously-skip-permissions "$0"'],
         "--dangerously-skip-permissions"),
        (["sh", "-c", "claude -p 'unclosed --yolo"], "--yolo"),
        # P14: each harness's every form (issue 49 item 9)
        (["gemini", "-y", "-p"], "-y"),
        (["gemini", "-p", "x", "-y"], "-y"),
        (["codex", "exec", "-s", "danger-full-access", "-a", "never"],
         "-s danger-full-access"),
        (["codex", "exec", "--sandbox=danger-full-access"], "--sandbox danger-full-access"),
        (["codex", "exec", "-c", 'sandbox_mode="danger-full-access"'],
         "-c sandbox_mode=danger-full-access"),
        (["codex", "exec", "--config", "sandbox_mode=danger-full-access"],
         "--config sandbox_mode=danger-full-access"),
        (["codex", "exec", "--full-auto"], "--full-auto"),
        (["cursor-agent", "-p", "--force"], "--force"),
        (["cursor-agent", "-f", "-p"], "-f"),
        (["copilot", "-p", "--allow-all"], "--allow-all"),
        (["copilot", "-p", "--yolo"], "--yolo"),
        (["claude", "-p", "--allow-dangerously-skip-permissions"],
         "--allow-dangerously-skip-permissions"),
        (["claude", "-p", "--settings", '{"permissions":{"defaultMode":"bypassPermissions"}}'],
         "--settings with permissions.defaultMode bypassPermissions"),
        (["claude", "--settings={\"permissions\": {\"defaultMode\": \"bypassPermissions\"}}"],
         "--settings with permissions.defaultMode bypassPermissions"),
        (["sh", "-c", "exec gemini -y -p \"$0\""], "-y"),
        # what keeps the checks on
        (["claude", "-p", "--settings", '{"permissions":{"defaultMode":"acceptEdits"}}'], None),
        (["claude", "-p", "--settings", "{not json"], None),
        (["sh", "-c", "rm -f x; claude -p"], None),  # (-f is cursor's, not rm's)
        (["claude", "-p", "-y"], None),  # (-y is gemini's)
        (["codex", "exec", "-s", "workspace-write", "-a", "never"], None),
        (["codex", "exec", "-c", "model=o3"], None),
        (["claude", "-p", "--permission-mode", "acceptEdits"], None),
        (["claude", "-p", "--permission-mode", "plan"], None),
        (["gemini", "--approval-mode", "auto_edit", "-p"], None),
        (["codex", "exec", "--dangerously-bypass-hook-trust"], None),
        (["claude", "-p", "--allowedTools", "Bash"], None),
        (["claude", "-p", "--permission-mode"], None),
        (["echo", "--yolo=no"], None),
    ],
)  # fmt: skip
def test_a_command_that_skips_permissions_is_named_by_its_flag(command, flag):
    assert skips_permissions(command) == flag


def test_a_claude_command_gets_afks_hooks_on_its_command_line():
    """Issue 41 item 1: a worktree holds only committed files; the loop gives
    Claude Code afk's hooks with --settings, before its own flags and the
    prompt. Other harnesses' commands are left as they are."""
    from watchdog.agents.harnesses import claude_settings, with_hooks

    argv = with_hooks(["/opt/bin/claude", "-p", "--", "PROMPT"], "/venv/bin/python")
    assert argv[:2] == ["/opt/bin/claude", "--settings"] and argv[3:] == ["-p", "--", "PROMPT"]
    assert json.loads(argv[2]) == claude_settings("/venv/bin/python")
    for other in (["codex", "exec", "--", "P"], ["sh", "-c", "claude -p"], []):
        assert with_hooks(other, "/venv/bin/python") == other


def test_a_settings_file_that_turns_the_checks_off_is_named(tmp_path):
    """P14: permissions.defaultMode bypassPermissions in the project's or the
    user's Claude Code settings turns every check off as the flag does."""
    from watchdog.agents.harnesses import skips_in_settings

    project, home = tmp_path / "project", tmp_path / "home"
    for folder in (project / ".claude", home / ".claude"):
        folder.mkdir(parents=True)
    assert skips_in_settings(["claude", "-p"], project, home) is None
    user = home / ".claude" / "settings.json"
    user.write_text('{"permissions": {"defaultMode": "acceptEdits"}}')
    assert skips_in_settings(["claude", "-p"], project, home) is None
    user.write_text('{"permissions": {"defaultMode": "bypassPermissions"}}')
    assert str(user) in (skips_in_settings(["claude", "-p"], project, home) or "")
    assert skips_in_settings(["gemini", "-p"], project, home) is None
    user.write_text("{}")
    local = project / ".claude" / "settings.local.json"
    local.write_text('{"permissions": {"defaultMode": "bypassPermissions"}}')
    assert str(local) in (skips_in_settings(["/usr/bin/claude"], project, home) or "")
    (tmp_path / "s.json").write_text('{"permissions": {"defaultMode": "bypassPermissions"}}')
    assert skips_permissions(["claude", "--settings", str(tmp_path / "s.json")])


def test_a_sandboxed_claude_command_ignores_its_folders_own_settings():
    """Issue 49 item 8: a sandboxed run writes its profile's harness folder,
    so the settings there (hooks, plugins, permissions) may be the run's
    own plant: the loop gives Claude Code --setting-sources project,local,
    unless the command says otherwise; other harnesses as given."""
    from watchdog.agents.harnesses import isolated

    assert isolated(["/opt/claude", "-p", "--", "P"]) == [
        "/opt/claude", "--setting-sources", "project,local", "-p", "--", "P",
    ]  # fmt: skip
    given = ["claude", "--setting-sources=project", "-p"]
    assert isolated(given) == given
    # Codex CLI runs a hook only once a person trusted it: in the run's own
    # folder afk wrote its hooks itself, and nobody trusted them there
    assert isolated(["codex", "exec", "go"]) == [
        "codex", "--dangerously-bypass-hook-trust", "exec", "go",
    ]  # fmt: skip
    given = ["codex", "--dangerously-bypass-hook-trust", "exec"]
    assert isolated(given) == given
    for other in (["gemini", "-p"], ["sh", "-c", "claude -p"], []):
        assert isolated(other) == other
