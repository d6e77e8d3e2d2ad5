"""The reference pages of the documentation site, written from the code:
the ``afk`` commands from its parser (the ``COMMANDS`` table and argparse),
the settings from their table, the exit statuses from their one definition,
and what ``afk loop`` gives an agent from ``credential.GIVEN``.

``python docs/generate.py`` writes them; ``--check`` writes nothing and
exits 1 naming each page that differs from the code (a test runs it)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the width argparse wraps usage lines to, whatever the terminal
WIDTH = "100"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser, common: set[str]) -> Iterator[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.dest in common or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += f" {action.metavar or action.dest.upper()}"
            name = f"`{name}`"
        else:
            name = f"`{action.metavar or action.dest}`"
        rows.append(f"| {name} | {_cell(action.help or '')} |")
    if rows:
        yield "| argument | meaning |"
        yield "|---|---|"
        yield from rows
        yield ""


def _command(
    name: str, parser: argparse.ArgumentParser, level: int, common: set[str]
) -> Iterator[str]:
    yield f"{'#' * level} afk {name}"
    yield ""
    if parser.description:
        yield parser.description.strip()
        yield ""
    yield "```"
    yield parser.format_usage().strip()
    yield "```"
    yield ""
    yield from _options(parser, common)
    if parser.epilog:
        yield parser.epilog.strip()
        yield ""
    for sub, child in _subparsers(parser).items():
        yield from _command(f"{name} {sub}", child, level + 1, common)


def cli_page() -> str:
    from watchdog.cli import COMMANDS, build_parser

    parser = build_parser()
    common = {a.dest for a in parser._actions if a.option_strings and a.dest != "help"}
    commands = _subparsers(parser)
    lines = [
        "# The afk command",
        "",
        "Written from the parser itself (`docs/generate.py`): every command of",
        "the `COMMANDS` table, its usage and its arguments. Every command also",
        "takes `--dsn DSN` (the database; env `AFK_DSN`, default the embedded",
        "server) and `--config FILE` (a TOML file of settings; env `AFK_CONFIG`).",
        "",
        "| command | what it does |",
        "|---|---|",
        *(f"| [`afk {n}`](#afk-{n}) | {_cell(c.help)} |" for n, c in COMMANDS.items()),
        "",
        parser.epilog or "",
        "",
    ]
    for name in COMMANDS:
        lines += list(_command(name, commands[name], 2, common))
    return "\n".join(lines).rstrip() + "\n"


def settings_page() -> str:
    from watchdog.config import (
        READ_ELSEWHERE,
        DigestSettings,
        LoopSettings,
        QueueSettings,
        ServiceSettings,
        describe,
    )

    lines = [
        "# Settings",
        "",
        "Written from the settings' own table (`watchdog/config.py`). Each",
        "setting is an environment variable, or the same name in lower case",
        "without `AFK_` in a TOML file (`--config` or `AFK_CONFIG`:",
        '`reclaim_interval = "30s"`); the environment wins over the file. A',
        "duration is seconds or a number with `s`, `m`, `h` or `d`. Settings",
        "are checked together; a bad value, or an unknown `AFK_` name, is one",
        "line and exit 2.",
        "",
        "## Read outside the tables",
        "",
        "| variable | meaning |",
        "|---|---|",
        *(f"| `{name}` | {_cell(text)} |" for name, text in READ_ELSEWHERE.items()),
        "",
    ]
    sections = (
        ("The queue", QueueSettings),
        ("The watchdog service", ServiceSettings),
        ("afk loop", LoopSettings),
        ("The digest and alerts", DigestSettings),
    )
    for title, cls in sections:
        lines += [f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        for env, default, text in describe(cls):
            shown = "—" if default is None or default == "-" else f"`{default}`"
            lines.append(f"| `{env}` | {_cell(shown)} | {_cell(text)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def exit_codes_page() -> str:
    from watchdog.errors import EXIT_CODES, SIGNALLED

    lines = [
        "# Exit statuses",
        "",
        "Written from their one definition (`watchdog/errors.py`).",
        "",
        "| status | short | meaning |",
        "|---|---|---|",
        *(f"| {code} | {short} | {_cell(text)} |" for code, short, text in sorted(EXIT_CODES)),
        f"| {SIGNALLED} + N | stopped by signal N | `afk loop`: 130 on SIGINT, 143 on SIGTERM |",
        "",
    ]
    return "\n".join(lines)


def agent_environment_page() -> str:
    from watchdog.agents import credential
    from watchdog.config import GIVEN_NOT_SETTINGS

    also = " (also a setting of afk's: inside the run, the agent's afk reads it as the run's)"
    lines = [
        "# What an agent is given",
        "",
        "Written from `credential.GIVEN`, the one table of what `afk loop`",
        "gives an agent's run. Nothing else of afk's (no `AFK_DSN`, no other",
        "setting), no `PG*` variable, no `DATABASE_URL` and no",
        "`CREDENTIALS_DIRECTORY` reaches it, whatever the loop's own",
        "environment holds.",
        "",
        "| variable | why |",
        "|---|---|",
        *(
            f"| `{name}` | {_cell(why)}{also if name in GIVEN_NOT_SETTINGS else ''} |"
            for name, why in credential.GIVEN.items()
        ),
        "",
    ]
    return "\n".join(lines)


def reach_page() -> str:
    """What a run can reach, from the one room (watchdog/agents/reach.py)."""
    from watchdog.agents import reach
    from watchdog.agents.harnesses import HARNESS_TABLE

    def inside(command: reach.Command) -> str:
        return _cell(command.reaches) if command.reaches else "refused"

    def zombie(rule: object) -> str:
        if rule is None:
            return "no"
        return "its own task, its own token" if getattr(rule, "own_task", False) else "to read"

    lines = [
        "# What a run can reach",
        "",
        "Written from `watchdog/agents/reach.py`, the one room that owns a run's",
        "boundary: the run's broker, the zombie guard, the sandbox's settings and",
        "`afk doctor --sandbox` all read it, and no other module keeps a list of its",
        "own (a test fails when one does).",
        "",
        "<!-- --8<-- [start:table] -->",
        "| | what a run reaches |",
        "|---|---|",
        "| its `afk` | "
        + ", ".join(f"`{c}`" for c in reach.AGENT_COMMANDS)
        + ", on its own task only, parsed by a parser of their own (no abbreviation, "
        "no `--dsn` or `--config` in any spelling), through its run's broker; every "
        "other command is refused with one line, exit 2 |",
        "| `afk once` | its program runs on the agent's side, inside the boundary; the "
        "broker only begins and records the effect |",
        "| its hooks | its run's own task, token and account, whatever the request "
        "names: through its broker (command hooks), or with its run's own signed "
        "credential (HTTP hooks) |",
        "| writes | its task folder and the git folder of its own there, less "
        + ", ".join(f"`.git/{p}`" for p in reach.GIT_READ_ONLY)
        + " (nothing of the person's repository, whose objects it borrows read-only), "
        "its temporary folder, and its harness's state: its profile's own folder where "
        "the harness's state moves ("
        + ", ".join(f"`${h.home_variable}`" for h in HARNESS_TABLE if h.home_variable)
        + ")"
        + "".join(
            f", else under the home (`~/{s}`)"
            for h in HARNESS_TABLE
            if not h.home_variable
            for s in h.state
        )
        + " (the person's own is never written); an older task's linked worktree "
        "commits into the repository's git folder, "
        "less the same and its " + ", ".join(f"`{p}`" for p in reach.WORKTREE_READ_ONLY) + " |",
        "| read-only | everything else; in its worktree, the agent's own configuration: "
        + ", ".join(f"`{p}`" for p in reach.PINNED)
        + " |",
        "| never read | afk's home (its settings, the embedded server, every other "
        "task's folder, every other profile's harness state), afk's settings file, "
        "every other run's folder and broker, the service's hook socket, "
        "`--deny-read`, the person's own harness state where a profile's moves ("
        + ", ".join(f"`~/{s}`" for h in HARNESS_TABLE if h.home_variable for s in h.state)
        + "), and under the home: "
        + ", ".join(f"`~/{p}`" for p in reach.DENIED_HOME)
        + " |",
        "| database sockets | hidden: the DSN's and `PGHOST`'s folders, the server's own "
        "(`SHOW unix_socket_directories`, where the loop's role may read it), "
        + ", ".join(f"`{p}`" for p in reach.SOCKET_FOLDERS)
        + f" and `{reach.SOCKET_FILES}` |",
        "| hosts | its harness's model API ("
        + ", ".join(
            f"{h.name}: `{h.api[0]}`" + (f" or `${h.api[1]}`'s" if h.api[1] else "")
            for h in HARNESS_TABLE
        )
        + "), the service's HTTP hooks (`AFK_HOOK_HTTP`), `--allow-host`; never the "
        "database's addresses |",
        "<!-- --8<-- [end:table] -->",
        "",
        "## Every command, and who runs it",
        "",
        "| command | who | inside a run | a session whose task is lost |",
        "|---|---|---|---|",
        *(
            f"| `{name}` | {c.who} | {inside(c)} | {zombie(c.zombie)} |"
            for name, c in sorted(reach.COMMANDS.items())
        ),
        "",
    ]
    return "\n".join(lines)


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/settings.md": settings_page,
    "reference/exit-codes.md": exit_codes_page,
    "reference/agent-environment.md": agent_environment_page,
    "reference/reach.md": reach_page,
}


def main(argv: list[str], root: Path = HERE) -> int:
    os.environ["COLUMNS"] = WIDTH  # (argparse's usage lines, as wide everywhere)
    check = argv[1:] == ["--check"]
    differ = []
    for name, page in PAGES.items():
        path = root / name
        text = page()
        if check:
            if not path.exists() or path.read_text() != text:
                differ.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for name in differ:
        print(
            f"docs/{name} differs from the code: python docs/generate.py writes it", file=sys.stderr
        )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
