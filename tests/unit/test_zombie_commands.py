"""What a session whose task is lost (a zombie) may still run of afk: the
commands that only read, help texts, and its own task's finishing commands
under its own token. Everything else is denied, however it is spelled."""

from __future__ import annotations

import pytest

from watchdog.agents.reach import COMMANDS as REACH
from watchdog.agents.zombie import afk_words, zombie_may_run
from watchdog.cli import COMMANDS

TASK = "0b9e3a52-8d4e-4c1e-9f55-1f6c3d2a7b10"
OTHER = "7d1f2c3b-1111-4222-8333-944455556666"
OWN = (TASK, 42)


def may(command: str, own: tuple[str, int] | None = OWN) -> bool:
    words = afk_words(command, path="/nonexistent")
    return bool(words) and zombie_may_run(words, own)


def test_every_command_of_the_cli_is_decided():
    """A new command is denied until it is put in the table with a reason."""
    assert set(REACH) == set(COMMANDS)


@pytest.mark.parametrize(
    "command",
    [
        "afk status",
        "afk status --agent a",
        "afk --dsn postgresql:///x status",
        "afk --config=/etc/afk.toml show " + TASK,
        "afk show " + OTHER,
        "afk dead --since 2h",
        "afk questions",
        "afk resume-brief",
        "afk doctor --json",
        "afk limit",
        "afk limit --account a",
        "afk hooks claude",
        "afk db status",
        "afk digest",
        "afk digest --dry-run --format html",
        "afk --help",
        "afk -h",
        "afk --version",
        "afk loop --help",
        "afk db status -h",
        # its own task, under its own (stale) token: the fence refuses them anyway
        "afk done",
        "afk done --result '{\"ok\": 1}' --next",
        "afk done " + TASK,
        "afk done --token 42 " + TASK,
        "afk done --token=42",
        "afk fail --error 'it broke'",
        "afk checkpoint --patch '{\"step\": 2}'",
        "afk heartbeat",
        "afk pause",
        "afk ask 'which branch?'",
        "afk ask 'which branch?' " + TASK,
        # its own task by the short id afk prints (issue 53 item 3)
        "afk done " + TASK[:8],
        "afk done --token 42 " + TASK[:13],
        "afk checkpoint --patch '{}' " + TASK.replace("-", "")[:12].upper(),
    ],
)
def test_a_zombie_may_read_and_finish_its_own_task(command):
    assert may(command), command


@pytest.mark.parametrize(
    "command",
    [
        # they run a program
        "afk loop --agent zx --max-tasks 1 -- sh -c 'rm -rf build'",
        "afk loop --agent zx sh -c 'rm -rf build' --help",
        "afk once --name x -- rm -rf build",
        "afk once " + TASK + " --token 42 --name x -- true",
        "afk demo",
        "afk watchdog run",
        "afk hook",
        # P8: it runs a project's hook commands, and posts to its URLs
        "afk doctor --live --project /tmp/p",
        "afk doctor --sandbox",
        # they claim, enqueue, retry, answer or reclaim
        "afk claim --agent zx",
        "afk enqueue --agent zx --title t",
        "afk retry " + OTHER,
        "afk answer " + OTHER + " yes",
        "afk reclaim",
        "afk migrate",
        # they park an account, stop a server, install, send
        "afk limit --account default --until 2099-01-01T00:00:00Z",
        "afk limit --account a --unt 2099-01-01",  # an abbreviation argparse would take
        "afk limit --clear",
        "afk limit --reason x",
        "afk db stop",
        "afk db start",
        "afk hooks claude --install .claude/settings.json",
        "afk hooks claude --inst x",
        "afk digest send",
        "afk digest send --force",
        # another task, another token, other tasks of an agent or runner
        "afk done " + OTHER,
        "afk done --token 43",
        "afk done --token=43 " + TASK,
        "afk fail --token 1 --error x",
        "afk checkpoint --patch '{}' " + OTHER,
        "afk done " + OTHER[:8],
        "afk done " + TASK[:7],  # (too short to name a task)
        "afk done " + TASK[:8] + "0",  # (not its prefix)
        "afk pause " + OTHER,
        "afk pause --agent a",
        "afk pause --runner r",
        "afk ask q " + OTHER,
        "afk heartbeat --token 43",
        "afk done --token 42 --token 43",  # given twice
        # what this reading cannot be sure of
        "afk done -- " + TASK,
        "afk",
        "afk --dsn",
        "afk nosuchcommand",
        "afk stat",
        # a second command after the first, however it is written
        "afk status # look\nrm -rf build",
        "afk status #\rrm -rf build",
        "afk status; rm -rf build",
        "afk status\nrm -rf build",
        "afk status && rm x",
        "afk status || rm x",
        "afk status | sh",
        "afk status & rm x",
        "afk status $(rm x)",
        "afk status `rm x`",
        "afk status > x",
        "afk status <(rm x)",
        "(afk status)",
    ],
)
def test_a_zombie_may_not_run_anything_else(command):
    assert not may(command), command


def test_without_its_own_token_known_a_zombie_names_none():
    """An unsupervised session's own token is in its shell's environment:
    one it names on the command line may be another claim's."""
    assert may("afk done", own=None)
    assert not may("afk done --token 42", own=None)
    assert not may("afk done " + TASK, own=None)


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("afk status", ["afk", "status"]),
        ("afk 'status'", ["afk", "status"]),
        ("afk status # a comment", ["afk", "status", "#", "a", "comment"]),
        ("afk status # x\nrm -rf ~", []),
        ("afk status\\\n --agent a", ["afk", "status\n", "--agent", "a"]),
        ("VAR=1 afk status", []),
        ("env afk status", []),
        ("./afk status", []),
        ("afk ${IFS}status", ["afk", "${IFS}status"]),
        ("afk 'unclosed", []),
        (None, []),
        (42, []),
    ],
)
def test_afk_words_parse_as_the_shell_would(command, words):
    assert afk_words(command, path="/nonexistent") == words


def test_the_deny_text_names_what_a_zombie_may_run_and_nothing_else():
    """House round four: the deny text said "commands that start with afk are
    still allowed" while the table denied loop, enqueue, claim and once. It
    is written from the table."""
    from watchdog.agents.zombie import may_text

    text = may_text()
    said = set(text.replace(",", " ").replace("afk ", " ").split())
    for command, row in REACH.items():
        assert (command in said) == (row.zombie is not None), command
