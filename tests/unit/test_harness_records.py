"""One record per harness (watchdog/agents/harnesses.py): what `afk hooks`,
`afk hook --harness`, `afk doctor` and the CLI read. The records agree with
each other and with the recorded payloads in tests/fixtures/hooks/; their
adapters are pure and tested here as tables."""

from __future__ import annotations

import ast
import json

import pytest
from helpers import ROOT, TESTS

from watchdog.agents.harnesses import (
    BY_NAME,
    EVENTS,
    HARNESS_TABLE,
    HARNESSES,
    READERS,
    SETTINGS,
    copilot_answer,
    cursor_answer,
    cursor_payload,
    gemini_answer,
    harness_of,
)
from watchdog.agents.reach import allowed_hosts, home_paths

FIXTURES = TESTS / "fixtures" / "hooks"
DENY = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "task lost",
    }
}
CONTEXT = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "brief"}}
BLOCK = {"decision": "block", "reason": "finish the task first"}


def test_every_harness_has_recorded_payloads_that_name_its_reader():
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(BY_NAME)
    for harness in HARNESS_TABLE:
        args = json.loads((FIXTURES / f"{harness.name}.json").read_text())["args"]
        told = args[args.index("--harness") + 1] if "--harness" in args else "claude"
        assert told == harness.reads, harness.name


def test_the_lists_the_cli_offers_come_from_the_records_in_their_order():
    assert list(SETTINGS) == ["claude", "codex", "gemini", "cursor", "copilot"]
    assert HARNESSES == ("claude", "gemini", "cursor", "copilot")
    assert set(READERS) == {h.reads for h in HARNESS_TABLE}


@pytest.mark.parametrize("harness", HARNESS_TABLE, ids=lambda h: h.name)
def test_the_events_a_harness_needs_are_ours_and_its_settings_name_them(harness):
    reader = READERS[harness.reads]
    assert all(reader.ours(event) in EVENTS for event in harness.needed)
    written = harness.settings("/usr/bin/afk", False, ())["hooks"]
    assert set(harness.needed) <= set(written)


@pytest.mark.parametrize("harness", HARNESS_TABLE, ids=lambda h: h.name)
def test_its_settings_files_are_under_the_project_or_the_home(harness, tmp_path, monkeypatch):
    monkeypatch.delenv("CODEX_HOME", raising=False)
    project, home = tmp_path / "p", tmp_path / "h"
    (project / ".github" / "hooks").mkdir(parents=True)
    (project / ".github" / "hooks" / "afk.json").write_text("{}")
    files = harness.files(project, home)
    assert files and all(f.is_relative_to(project) or f.is_relative_to(home) for f in files)


@pytest.mark.parametrize(
    "name, theirs, ours",
    [
        ("claude", "PreToolUse", "PreToolUse"),
        ("gemini", "BeforeTool", "PreToolUse"),
        ("gemini", "AfterAgent", "Stop"),
        ("gemini", "PreToolUse", ""),  # Claude Code's name is not Gemini's
        ("cursor", "afterFileEdit", "PostToolUse"),
        ("cursor", "beforeShellExecution", ""),
        ("copilot", "PreCompact", "PreCompact"),
    ],
)
def test_a_harness_event_as_ours(name, theirs, ours):
    assert BY_NAME[name].ours(theirs) == ours


@pytest.mark.parametrize(
    "adapter, ours, theirs",
    [
        (gemini_answer, DENY, {"decision": "deny", "reason": "task lost"}),
        (
            gemini_answer,
            CONTEXT,
            {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "brief"}},
        ),
        (
            gemini_answer,
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "x"}},
            {"hookSpecificOutput": {"hookEventName": "BeforeTool", "additionalContext": "x"}},
        ),
        (
            cursor_answer,
            DENY,
            {"permission": "deny", "user_message": "task lost", "agent_message": "task lost"},
        ),
        (cursor_answer, CONTEXT, {"additional_context": "brief"}),
        (cursor_answer, BLOCK, {"followup_message": "finish the task first"}),
        (cursor_answer, {"continue": True}, {}),
        (
            copilot_answer,
            DENY,
            {"permissionDecision": "deny", "permissionDecisionReason": "task lost"},
        ),
        (copilot_answer, BLOCK, BLOCK),
        (copilot_answer, CONTEXT, {}),  # Copilot CLI reads no added context
    ],
)
def test_our_answer_in_a_harness_words(adapter, ours, theirs):
    assert adapter(ours) == theirs


@pytest.mark.parametrize(
    "payload, session, cwd, tool",
    [
        (
            {"conversation_id": "c1", "workspace_roots": ["/w"], "hook_event_name": "stop"},
            "c1",
            "/w",
            None,
        ),
        ({"session_id": "s1", "cwd": "/here", "workspace_roots": ["/w"]}, "s1", "/here", None),
        (
            {"conversation_id": "c1", "hook_event_name": "afterFileEdit", "file_path": "/w/a.py"},
            "c1",
            None,
            ("Write", {"file_path": "/w/a.py"}),
        ),
    ],
)
def test_a_cursor_payload_in_claude_codes_words(payload, session, cwd, tool):
    got = cursor_payload(payload)
    assert got.get("session_id") == session and got.get("cwd") == cwd
    assert (got.get("tool_name"), got.get("tool_input")) == (tool or (None, None))
    assert payload.get("tool_name") is None  # (the payload itself is not changed)


def _names_a_harness(node: ast.AST) -> bool:
    """A string (or a tuple, list or set of strings) that is a harness's name
    or its command's program."""
    names = {h.name for h in HARNESS_TABLE} | {h.command for h in HARNESS_TABLE}
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_harness(e) for e in node.elts)
    return False


def test_no_module_tests_a_harness_by_its_name():
    """A harness's quirks are fields of its record: a comparison with a
    harness's name (``kind == "gemini"``, ``harness in ("gemini",
    "cursor")``) anywhere but the records' module fails here."""
    found = []
    for path in sorted((ROOT / "watchdog").rglob("*.py")):
        if path.name == "harnesses.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Compare) and any(
                _names_a_harness(side) for side in (node.left, *node.comparators)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_sandbox_reads_each_harness_state_and_api_from_its_record():
    for harness in HARNESS_TABLE:
        assert harness_of([f"/usr/bin/{harness.command}", "-p"]) is harness
        _, state = home_paths("/h", harness)
        assert state and all(p.startswith("/h/.") for p in state), harness.name
        assert allowed_hosts(harness, {}, (), None) == [harness.api[0]], harness.name
    assert harness_of(["cursor", "-p"]) is None  # (the editor, not its CLI)
    assert home_paths("/h", None)[1] == [] and allowed_hosts(None, {}, (), None) == []
