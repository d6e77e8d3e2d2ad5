"""One room owns a run's boundary (issue 49 item 1): what an agent's `afk`
may run, what a zombie may still run, the paths and the sockets a run never
reaches are data in `watchdog/agents/reach.py`, and every door reads them
there. These fail when a door keeps a list of its own again."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import ROOT

from watchdog.agents import reach
from watchdog.agents.harnesses import HARNESS_TABLE
from watchdog.cli import COMMANDS, run_command
from watchdog.cli.agentcli import AgentCli, Said, agent_parser
from watchdog.config import load_all

PACKAGE = ROOT / "watchdog"
#: the room, and the CLI's own table of its commands (their definition)
OWNERS = {PACKAGE / "agents" / "reach.py", PACKAGE / "cli" / "__init__.py"}


def literal_strings(node: ast.AST) -> list[str]:
    """The strings of a literal collection (a dict's keys and values)."""
    if isinstance(node, ast.Dict):
        items = [*node.keys, *node.values]
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = list(node.elts)
    elif isinstance(node, ast.Call) and node.args and getattr(node.func, "id", "") == "frozenset":
        return literal_strings(node.args[0])
    else:
        return []
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def lists_of_its_own(names: set[str], at_least: int) -> list[str]:
    """Every literal collection outside the room holding ``at_least`` of
    ``names``: a door's list of its own."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            held = set(literal_strings(node)) & names
            if len(held) >= at_least:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(held)}")
    return found


def test_every_command_of_the_cli_is_in_the_room():
    assert set(reach.COMMANDS) == set(COMMANDS)


def test_no_door_lists_commands_of_its_own():
    """The broker's AGENT_COMMANDS, the zombie's ZOMBIE_MAY and the check
    parser's dict of configure functions were three lists that disagreed."""
    assert lists_of_its_own(set(COMMANDS), 4) == []  # (a link's three decisions are no list)


def test_no_door_lists_the_rooms_paths_of_its_own():
    paths = {*reach.DENIED_HOME, *reach.PINNED, *reach.SOCKET_FOLDERS}
    assert lists_of_its_own(paths, 2) == []


def test_the_agents_parser_is_the_rooms_commands_and_takes_no_abbreviation():
    parser = agent_parser(COMMANDS)
    (sub,) = [a for a in parser._actions if a.dest == "subcommand"]
    assert tuple(sub.choices) == reach.AGENT_COMMANDS  # type: ignore[attr-defined]
    assert parser.allow_abbrev is False
    for name, command in sub.choices.items():  # type: ignore[attr-defined]
        assert command.allow_abbrev is False, name
        options = {o for a in command._actions for o in a.option_strings}
        assert not options & set(reach.GLOBAL_OPTIONS), name


RUN = SimpleNamespace(id=uuid.uuid4(), token=7, agent_id="a")


@pytest.mark.parametrize(
    "argv",
    [
        # every spelling of a global option, before and after the command
        ["--conf", "done", "enqueue"],
        ["--co", "show", "approve", "1"],
        ["--c", "x", "status"],
        ["--config=x", "status"],
        ["--dsn", "x", "status"],
        ["--d=x", "status"],
        ["status", "--config", "x"],
        ["status", "--con=x"],
        ["done", "--dsn=x"],
        # every command that is not an agent's
        *([name] for name, c in reach.COMMANDS.items() if not c.agent),
        # abbreviations of an agent's own options
        ["checkpoint", "--pat", "{}"],
        ["done", "--res", "{}"],
        ["fail", "--err", "x"],
        ["heartbeat", "--tok", "7"],
        # past its own task
        ["show", str(uuid.uuid4())],
        ["show", str(uuid.uuid4())[:8]],  # (another task's short id)
        ["done", str(RUN.id)[:7]],  # (too short to name a task)
        ["done", "--next"],
        ["fail", "--error", "x", "--next"],
        ["pause", "--runner", "r"],
        ["pause", "--agent", "b"],
        ["status", "--agent", "b"],
        ["done", "--token", "8"],
        ["checkpoint", "--patch", "@/etc/passwd"],
        ["checkpoint", "--patch=@-"],
        ["done", "--result", "@secret.json"],
        # what does not parse
        [],
        ["done", "extra", "words"],
        ["checkpoint"],
    ],
)
def test_the_broker_refuses_what_is_not_its_runs_own_in_one_line(argv):
    said = AgentCli(load_all(None, {}), COMMANDS, run_command).check(argv, RUN)  # type: ignore[arg-type]
    assert isinstance(said, Said), argv
    assert said.exit == 2 and said.stdout == "", said
    assert said.stderr.startswith("afk: ") and said.stderr.count("\n") == 1, said


@pytest.mark.parametrize(
    "argv",
    [
        ["done"],
        ["done", "--result", '{"ok": 1}'],
        ["fail", "--error", "broke"],
        ["checkpoint", "--patch", "{}"],
        ["checkpoint", "--patch={}"],
        ["heartbeat", "--token", "7"],
        ["show", str(RUN.id)],
        ["show", str(RUN.id)[:8]],  # its own short id (issue 53 item 3)
        ["checkpoint", str(RUN.id)[:13].upper(), "--patch", "{}"],
        ["status"],
        ["status", "--agent", "a"],
        ["resume-brief"],
        ["pause"],
        ["ask", "which branch?"],
        ["once", "--name", "x"],
    ],
)
def test_its_own_commands_are_filled_with_the_runs_credential(argv):
    args = AgentCli(load_all(None, {}), COMMANDS, run_command).check(argv, RUN)  # type: ignore[arg-type]
    assert not isinstance(args, Said), args
    assert (args.dsn, args.config) == (None, None)
    if hasattr(args, "id"):
        assert (args.id, getattr(args, "token", 7)) == (str(RUN.id), 7)
    if hasattr(args, "agent"):
        assert args.agent == "a"


def test_no_agents_own_command_runs_a_program_in_afks_process():
    """What runs a program runs on the agent's side (afk once) or is no
    agent's at all."""
    for name, command in reach.COMMANDS.items():
        if command.runs_program and command.agent:
            assert name == "once", name
    assert Path(reach.__file__).name == "reach.py"


def test_a_run_writes_its_own_harness_home_and_never_reads_the_persons():
    """P6 (item 6): ~/.claude was writable (a planted hook ran at the
    person's next `claude`) and readable (other sessions' transcripts, the
    login). A run whose harness's state moves (CLAUDE_CONFIG_DIR) writes only
    its own folder; the person's own and every other profile's are never read."""
    from watchdog.agents.harnesses import BY_NAME

    env = {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/afk/homes/one/claude"}
    got = reach.of_run(
        BY_NAME["claude"], env, work="/w", tmp="/t", own=["/b"], git_dir=None, denied=[],
        allow=[], hook_http=None, denied_hosts=[],
        homes=["/afk/homes/one/claude", "/h/.claude-2"],
    )  # fmt: skip
    assert "/afk/homes/one/claude" in got.writable and "/afk/homes/one/claude" in got.readable
    assert {"/h/.claude", "/h/.claude.json", "/h/.claude-2"} <= set(got.denied)
    assert not {"/h/.claude", "/h/.claude.json"} & set(got.writable)
    assert "/afk/homes/one/claude" not in got.denied
    # and no other harness's logins and sessions
    assert {"/h/.codex", "/h/.gemini", "/h/.cursor", "/h/.copilot"} <= set(got.denied)


@pytest.mark.parametrize("name", [h.name for h in HARNESS_TABLE])
def test_every_harness_has_a_home_of_its_own_and_never_writes_the_persons(name, tmp_path):
    """Item 6, its siblings: ~/.codex, ~/.gemini, ~/.cursor and ~/.copilot
    stayed writable to a sandboxed run (only Claude Code's state moved). Each
    record names the variable that moves its state; a run with it writes its
    own folder alone, the person's is never read, and afk's hooks are the
    only hooks in the folder's hooks file however it was left."""
    from watchdog.agents.harnesses import BY_NAME, give_home_hooks, read_settings

    harness = BY_NAME[name]
    assert harness.home_variable, f"{name}: its state cannot move"
    own = str(tmp_path / "homes" / "one" / name)
    env = {"HOME": "/h", harness.home_variable: own}
    got = reach.of_run(
        harness, env, work="/w", tmp="/t", own=[], git_dir=None, denied=[], allow=[],
        hook_http=None, denied_hosts=[],
    )  # fmt: skip
    persons = {f"/h/{s}" for s in harness.state}
    assert own in got.writable and own in got.readable and own not in got.denied
    assert persons <= set(got.denied) and not persons & set(got.writable)
    if not harness.home_hooks:
        assert give_home_hooks(harness, Path(own), "/afk") is None
        return
    # an earlier run planted a hook of its own there, beside a key it needs
    planted = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "evil"}]}]},
               "security": {"auth": {"selectedType": "oauth-personal"}}}  # fmt: skip
    path = Path(own) / harness.home_hooks
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(planted))
    assert give_home_hooks(harness, Path(own), "/afk") == path
    written = read_settings(path)
    assert "evil" not in json.dumps(written["hooks"]) and "/afk" in json.dumps(written["hooks"])
    assert written["security"] == planted["security"]
    assert path.stat().st_mode & 0o077 == 0
    path.write_text("{ not json")  # (the run broke it: it is replaced)
    give_home_hooks(harness, Path(own), "/afk")
    assert "/afk" in json.dumps(read_settings(path)["hooks"])
