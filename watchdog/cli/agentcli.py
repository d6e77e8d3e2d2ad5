"""The agent's ``afk`` inside a run, as its broker reads and runs it: the
commands an agent may run (the room's table,
:data:`~watchdog.agents.reach.AGENT_COMMANDS`), parsed once, by a parser of
their own built from that table: no abbreviation (``--res`` is no
``--result``), no global option (no ``--dsn`` or ``--config`` in any
spelling), no other command. What parses is checked against the run (its own
task, its own token, its own agent), filled in with the run's credential and
run by the same command functions as a person's ``afk``, in the broker's
process, writing to the request's own streams: nothing is parsed twice and
no argv is run again. What does not parse is refused."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents import reach
from ..agents.brokerlink import FILE_OPTIONS
from ..ids import names_task
from .common import Parser, Resources, streams

if TYPE_CHECKING:
    from ..config import Settings
    from ..models import Task
    from ..queue import Queue


@dataclass(frozen=True)
class Said:
    """What the broker answers without running anything: a refusal (one
    line, exit 2) or a help text."""

    exit: int
    stdout: str = ""
    stderr: str = ""


def agent_parser(commands: Mapping[str, Any]) -> Parser:
    """The parser of an agent's commands: each of the room's agent commands,
    with the options its own ``configure`` gives it (``commands``: the CLI's
    table), and nothing else."""
    parser = Parser(prog="afk", allow_abbrev=False, add_help=False)
    sub = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND", parser_class=Parser
    )
    for name in reach.AGENT_COMMANDS:
        command = commands[name]
        p = sub.add_parser(name, allow_abbrev=False, help=command.help, description=command.help)
        if command.configure is not None:
            command.configure(p)
    return parser


class AgentCli:
    """The agent's commands, for one loop's broker: :meth:`check` then
    :meth:`run`, each in the broker's thread of the request. The CLI's table
    of commands and its bootstrap are given (this module is below them)."""

    def __init__(
        self, settings: Settings, commands: Mapping[str, Any], run: Callable[..., int]
    ) -> None:
        self.settings, self._run = settings, run
        self.parser = agent_parser(commands)

    def check(self, argv: list[str], run: Task) -> argparse.Namespace | Said:
        """``afk ARGV`` of the agent of ``run``, parsed and checked: its
        arguments, filled with the run's own task and token; or what to say
        instead (a refusal, exit 2, one line; a help text)."""
        word = argv[0] if argv else None
        if word is None or (word.startswith("-") and word not in ("-h", "--help")):
            return _refused(
                f"{word or 'a command'} before the command: an agent's afk takes no global "
                "option (its run's broker knows its database)"
            )
        if word not in reach.AGENT_COMMANDS and word not in ("-h", "--help"):
            return _refused(reach.not_an_agents(word))
        out, err = io.StringIO(), io.StringIO()
        with streams(out, err):
            try:
                args = self.parser.parse_args(argv)
            except SystemExit as exc:
                if exc.code == 0:  # (--help)
                    return Said(0, out.getvalue())
                said = [line for line in err.getvalue().splitlines() if line.strip()]
                return _refused(said[-1].removeprefix("afk: error: ") if said else "unread")
        why = _reaching(args, run) or _names_a_file(args)
        if why is not None:
            return _refused(why)
        return _filled(args, run)

    def run(self, args: argparse.Namespace, queue: Queue) -> Said:
        """Run a checked command with the loop's settings on ``queue``."""
        out, err = io.StringIO(), io.StringIO()
        with streams(out, err):
            code = self._run(args, Resources.given(args, self.settings, queue))
        return Said(code, out.getvalue(), err.getvalue())


def _reaching(args: argparse.Namespace, run: Task) -> str | None:
    """Why a parsed command reaches past the run's own task (None: it does not)."""
    for option, why in reach.REACHING_OPTIONS.items():
        if getattr(args, option, None) not in (None, False):
            return why
    if getattr(args, "agent", None) not in (None, run.agent_id):
        return "--agent names another agent: an agent acts on its own task only"
    if getattr(args, "id", None) is not None and not names_task(args.id, run.id):
        return "that is another task: an agent acts on its own task only"
    if getattr(args, "token", None) not in (None, run.token):
        return "that is not the run's token"
    return None


def _names_a_file(args: argparse.Namespace) -> str | None:
    """A value the broker would read a file for, on the host: the agent's
    afk reads its own files (``@FILE``, ``@-``) and sends their content."""
    for name in FILE_OPTIONS:
        value = getattr(args, name.removeprefix("--"), None)
        if isinstance(value, str) and value.startswith("@"):
            return f"{name} {value}: the agent's afk reads its own files and sends their content"
    return None


def _filled(args: argparse.Namespace, run: Task) -> argparse.Namespace:
    """The run's own credential in the arguments: a command run for an agent
    reads nothing of any environment."""
    given: dict[str, Any] = {"dsn": None, "config": None}
    if hasattr(args, "id"):
        given.update(id=str(run.id))
    if hasattr(args, "token"):
        given.update(token=run.token)
    if hasattr(args, "agent"):
        given.update(agent=run.agent_id)  # (status: its own agent's counts)
    for name, value in given.items():
        setattr(args, name, value)
    return args


def _refused(why: str) -> Said:
    return Said(2, stderr=f"afk: {why}; nothing was changed\n")
