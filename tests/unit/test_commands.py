"""The command table: every `cmd_*` of the CLI is reachable through
`cli.COMMANDS`, and each command's arguments are added by its own
`configure_<command>`, beside it."""

from __future__ import annotations

from watchdog import cli


def test_every_command_function_is_in_the_table():
    functions = {name for name in dir(cli) if name.startswith("cmd_")}
    assert functions == {func.__name__ for func, _, _ in cli.COMMANDS.values()}


def test_each_command_is_configured_by_its_own_function():
    for name, (func, help, configure) in cli.COMMANDS.items():
        assert func.__name__ == "cmd_" + name.replace("-", "_")
        assert help and help == help.strip()
        if configure is not None:
            assert configure.__name__ == "configure_" + name.replace("-", "_")
    parser = cli.build_parser()
    assert list(parser.commands) == list(cli.COMMANDS)  # type: ignore[attr-defined]
