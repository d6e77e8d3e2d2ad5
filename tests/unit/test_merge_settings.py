"""Our hooks merged into an agent's settings file (harnesses.merge_settings):
everything else kept, our own earlier entries replaced, one entry per event
after any number of installs; a file afk would damage is refused with one
line. And the fence's one wording of why a task is no longer held."""

from __future__ import annotations

import json

import pytest

from watchdog.agents.harnesses import SETTINGS, merge_settings
from watchdog.errors import BadInput
from watchdog.fence import lost_clause

AFK = "/usr/bin/python3"
CLAUDE = SETTINGS["claude"](AFK, False, ())
CURSOR = SETTINGS["cursor"](AFK, False, ())
THEIRS = {"type": "command", "command": "/usr/local/bin/lint --fix"}


def write(tmp_path, data, name="settings.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def ours_in(merged, event):
    return [h for g in merged["hooks"].get(event, []) for h in g.get("hooks", [g])]


def test_into_a_missing_file_our_hooks_alone(tmp_path):
    assert merge_settings(tmp_path / "none.json", CLAUDE) == {"hooks": CLAUDE["hooks"]}


def test_their_keys_and_hooks_are_kept_beside_ours(tmp_path):
    theirs = {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [THEIRS]}]},
    }
    merged = merge_settings(write(tmp_path, theirs), CLAUDE)
    assert merged["model"] == "opus" and merged["permissions"] == theirs["permissions"]
    assert THEIRS in ours_in(merged, "PreToolUse")
    assert len(merged["hooks"]["PreToolUse"]) == 1 + len(CLAUDE["hooks"]["PreToolUse"])


@pytest.mark.parametrize("settings", [CLAUDE, CURSOR], ids=["claude", "cursor"])
def test_installing_again_leaves_one_entry_per_event(tmp_path, settings):
    path = write(tmp_path, {})
    once = merge_settings(path, settings)
    path.write_text(json.dumps(once))
    twice = merge_settings(path, settings)
    assert twice == once


def test_a_group_shared_with_their_hook_keeps_theirs_and_loses_ours(tmp_path):
    (ours,) = CLAUDE["hooks"]["PreToolUse"][0]["hooks"]
    shared = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [THEIRS, ours]}]}}
    merged = merge_settings(write(tmp_path, shared), CLAUDE)
    groups = merged["hooks"]["PreToolUse"]
    assert groups[0] == {"matcher": "*", "hooks": [THEIRS]}
    assert groups[1:] == CLAUDE["hooks"]["PreToolUse"]


@pytest.mark.parametrize(
    "content, says",
    [
        ("{not json", "left unchanged"),
        ('{"hooks": {} // a comment\n}', "has comments (JSONC)"),
        ('{"hooks": []}', "'hooks' is not an object"),
        ('{"hooks": {"Stop": {}}}', "hooks.Stop is not a list"),
    ],
)
def test_a_file_afk_would_damage_is_refused(tmp_path, content, says):
    path = write(tmp_path, content)
    with pytest.raises(BadInput, match=says.replace("(", r"\(").replace(")", r"\)")):
        merge_settings(path, CLAUDE)


def test_another_version_of_a_versioned_format_is_refused(tmp_path):
    path = write(tmp_path, {"version": 2, "hooks": {}}, "hooks.json")
    with pytest.raises(BadInput, match="says version 2"):
        merge_settings(path, CURSOR)


@pytest.mark.parametrize(
    "state, current, token, held, clause",
    [
        ("running", 8, 7, False, "was claimed again since (token 8 replaced 7)"),
        ("todo", 8, 7, False, "was claimed again since (token 8 replaced 7)"),
        ("done", 7, 7, False, "is done, no longer running"),
        ("failed", 7, 7, False, "is failed, no longer running"),
        ("running", 7, 7, False, "has run out of its lease"),
        ("todo", 7, 7, False, "is todo (its lease ran out and it was reclaimed, or it was paused)"),
        ("paused", 7, 7, True, "is paused, waiting for a person (a question asked, or its budget"),
    ],
)
def test_why_a_task_is_no_longer_held(state, current, token, held, clause):
    assert lost_clause(state, current, token, held=held).startswith(clause)
