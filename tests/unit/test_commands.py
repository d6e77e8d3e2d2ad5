"""The command table: every `cmd_*` of the CLI is reachable through
`cli.COMMANDS`, and each command's arguments are added by its own
`configure_<command>`, beside it."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from watchdog import cli
from watchdog.cli.common import Resources


def test_every_command_function_is_in_the_table():
    functions = {name for name in dir(cli) if name.startswith("cmd_")}
    assert functions == {command.run.__name__ for command in cli.COMMANDS.values()}


def test_each_command_is_configured_by_its_own_function():
    for name, command in cli.COMMANDS.items():
        assert command.run.__name__ == "cmd_" + name.replace("-", "_")
        assert command.help and command.help == command.help.strip()
        if command.configure is not None:
            assert command.configure.__name__ == "configure_" + name.replace("-", "_")
    parser = cli.build_parser()
    assert list(parser.commands) == list(cli.COMMANDS)  # type: ignore[attr-defined]


def _reached(path: str) -> dict[str, set[str]]:
    """What each `cmd_*` of a CLI module asks its Resources for, through the
    module's own functions it calls."""
    tree = ast.parse(Path(path).read_text())
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

    def reach(f: ast.FunctionDef, seen: set[str]) -> set[str]:
        out: set[str] = set()
        for node in ast.walk(f):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "res"
            ):
                out.add(node.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = functions.get(node.func.id)
                if callee is not None and callee.name not in seen:
                    seen.add(callee.name)
                    out |= reach(callee, seen)
        return out

    return {n: reach(f, {n}) for n, f in functions.items() if n.startswith("cmd_")}


def test_each_command_declares_what_it_opens():
    """The table's `needs` is what the command asks the bootstrap for, no
    more and no less: a command that needs nothing opens nothing (`afk db`),
    one that reads the settings opens no queue."""
    reached: dict[str, set[str]] = {}
    for module in ("agents", "backlog", "setup", "tasks"):
        reached.update(_reached(str(Path(cli.__file__).parent / f"{module}.py")))
    level = {"settings": "settings", "dsn": "settings", "queue": "queue", "database": "queue"}
    opens_nothing = {"cli"}  # (the CLI's own table, given by the bootstrap)
    for name, command in cli.COMMANDS.items():
        used = {level[attr] for attr in reached[command.run.__name__] - opens_nothing}
        needs = "queue" if "queue" in used else "settings" if used else "nothing"
        assert command.needs == needs, (name, sorted(reached[command.run.__name__]))


def test_a_command_cannot_reach_past_what_it_declared():
    args = argparse.Namespace(config=None, dsn="postgresql://127.0.0.1:1/none")
    with pytest.raises(RuntimeError, match="needs nothing asked for the settings"):
        _ = Resources(args, "nothing").settings
    with pytest.raises(RuntimeError, match="needs settings asked for the queue"):
        _ = Resources(args, "settings").queue
    with pytest.raises(RuntimeError, match="needs settings asked for a database"):
        Resources(args, "settings").database()


UNREACHABLE = "postgresql://afk@127.0.0.1:1/none?connect_timeout=1"

#: input every command checks before it opens anything: with a database that
#: cannot be reached (and no socket allowed in this tier), each is still
#: exit 2 and one line, not a connection error
CHECKED_FIRST = [
    ["done", "00000000-0000-0000-0000-000000000001", "--token", "1", "--result", "{x"],
    ["checkpoint", "00000000-0000-0000-0000-000000000001", "--token", "1", "--patch", "[1]"],
    ["done", "--token", "1"],
    ["done", "00000000-0000-0000-0000-000000000001"],
    ["enqueue", "--agent", "A", "--title", "t", "--spec", "{nope"],
    ["enqueue", "--title", "t"],
    ["pause"],
    ["limit", "--clear", "--until", "2030-01-01T00:00Z", "--account", "a"],
    ["digest", "send", "--dry-run"],
    ["review", "--since", "yesterday"],
    ["loop", "--agent", "A", "--max-tasks", "0", "--", "true"],
    ["loop", "--agent", "A"],
]


@pytest.mark.parametrize("argv", CHECKED_FIRST, ids=lambda a: " ".join(a)[:40])
def test_bad_input_is_refused_before_anything_is_opened(argv, capsys, monkeypatch):
    for name in ("AFK_TASK_ID", "AFK_TASK_TOKEN", "AFK_AGENT_ID", "AFK_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["--dsn", UNREACHABLE, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("afk: "), err
