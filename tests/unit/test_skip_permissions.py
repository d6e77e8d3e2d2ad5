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
        # what keeps the checks on
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
