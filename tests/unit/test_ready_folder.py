"""A task folder made ready for the sandbox engine (issue 50 item 1): its
own git ignores the engine's placeholders, once; what it writes never goes
through a link a run could have left."""

from __future__ import annotations

import os

from watchdog.agents import reach
from watchdog.agents.sandbox import EXCLUDE_MARK, ready_folder


def test_the_placeholders_are_excluded_once_in_the_tasks_own_git(tmp_path):
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("*.log\n")
    ready_folder(str(tmp_path))
    ready_folder(str(tmp_path))
    lines = (tmp_path / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines[0] == "*.log" and lines.count(EXCLUDE_MARK) == 1
    assert {f"/{p}" for p in reach.PLACEHOLDERS} <= set(lines)
    assert "/.bashrc" in lines and "/.claude/commands" in lines and "/.claude" in lines


def test_a_committed_read_only_folder_gets_its_placeholder_folders_made(tmp_path):
    (tmp_path / ".claude").mkdir()
    ready_folder(str(tmp_path))
    assert (tmp_path / ".claude" / "commands").is_dir()
    assert (tmp_path / ".claude" / "agents").is_dir()
    assert not (tmp_path / ".git").exists()  # (no git of its own: nothing written there)


def test_nothing_is_written_through_a_link_a_run_left(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    os.symlink(outside, work / ".git" / "info")
    os.symlink(outside, work / ".claude")
    ready_folder(str(work))
    assert list(outside.iterdir()) == []
    (work / ".git" / "info").unlink()
    (work / ".git" / "info").mkdir()
    os.symlink(outside / "planted", work / ".git" / "info" / "exclude")
    ready_folder(str(work))  # (O_NOFOLLOW: refused, and the run goes on)
    assert not (outside / "planted").exists()
