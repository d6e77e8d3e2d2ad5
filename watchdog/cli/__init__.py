"""The ``afk`` command.

Output is JSON on stdout where a command returns data; messages go to stderr.
Exit status: 0 ok, 2 bad usage or input, 3 nothing to claim, 4 lease lost,
5 the account is parked (a usage limit, or a login that needs a person),
6 an effect is in doubt (started by a call that died unrecorded),
1 anything else (such as an unreachable database).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..agents import credential
from ..agents.harnesses import HARNESSES
from ..agents.hooklink import parse_argv
from ..config import is_utf8
from ..errors import EXIT_CODES, EXIT_ERROR, EXIT_USAGE, AfkError, redact
from ..logs import level_of
from .agents import (
    cmd_hook,
    cmd_hooks,
    cmd_limit,
    cmd_loop,
    cmd_loops,
    cmd_profile,
    configure_hook,
    configure_hooks,
    configure_limit,
    configure_loop,
    configure_loops,
    configure_profile,
)
from .backlog import (
    cmd_enqueue,
    cmd_export,
    cmd_import,
    configure_enqueue,
    configure_export,
    configure_import,
)
from .common import (
    Needs,
    Parser,
    Resources,
    command_word,
    common_options,
    logger,
    package_version,
    resolve_task_args,
    stderr,
    stdout,
)
from .setup import (
    cmd_db,
    cmd_demo,
    cmd_digest,
    cmd_doctor,
    cmd_migrate,
    cmd_watchdog,
    cmd_web,
    configure_db,
    configure_digest,
    configure_doctor,
    configure_watchdog,
    configure_web,
)
from .tasks import (
    cmd_answer,
    cmd_approvals,
    cmd_approve,
    cmd_ask,
    cmd_cancel,
    cmd_checkpoint,
    cmd_claim,
    cmd_dead,
    cmd_deny,
    cmd_done,
    cmd_fail,
    cmd_gc,
    cmd_heartbeat,
    cmd_once,
    cmd_pause,
    cmd_questions,
    cmd_reclaim,
    cmd_restore,
    cmd_resume_brief,
    cmd_retry,
    cmd_review,
    cmd_show,
    cmd_status,
    cmd_trust,
    configure_answer,
    configure_approvals,
    configure_approve,
    configure_ask,
    configure_cancel,
    configure_checkpoint,
    configure_claim,
    configure_dead,
    configure_deny,
    configure_done,
    configure_fail,
    configure_gc,
    configure_heartbeat,
    configure_once,
    configure_pause,
    configure_questions,
    configure_restore,
    configure_resume_brief,
    configure_retry,
    configure_review,
    configure_show,
    configure_status,
    configure_trust,
)


class Command(NamedTuple):
    """A command: its function, its one-line help, what adds its own
    arguments (``configure_<command>``, beside the command), and what it
    needs opened (:class:`~.common.Resources`): the queue (bounded by
    AFK_COMMAND_TIMEOUT, after a look at the schema's version, unless said
    otherwise), the settings and the DSN, or nothing."""

    run: Callable[[argparse.Namespace, Resources], int]
    help: str
    configure: Callable[[Parser], None] | None = None
    needs: Needs = "queue"
    bounded: bool = True
    check_schema: bool = True


#: every command, as the parser lists them
COMMANDS: dict[str, Command] = {
    "migrate": Command(
        cmd_migrate,
        "create or upgrade the schema (safe to repeat)",
        None,
        bounded=False,
        check_schema=False,
    ),
    "enqueue": Command(
        cmd_enqueue,
        "add tasks to an agent's backlog",
        configure_enqueue,
    ),
    "claim": Command(
        cmd_claim,
        "take the agent's next task (exit 3 if none, with next_at; exit 5 if the "
        "account is parked)",
        configure_claim,
    ),
    "loop": Command(
        cmd_loop,
        "drain the agent's backlog: run CMD ARG... PROMPT per task, reading "
        "usage limits, outages and logins from what it says",
        configure_loop,
    ),
    "limit": Command(
        cmd_limit,
        "parked accounts: list them, park one by hand, or clear one",
        configure_limit,
    ),
    "checkpoint": Command(
        cmd_checkpoint,
        "merge a JSON object into the checkpoint",
        configure_checkpoint,
    ),
    "heartbeat": Command(
        cmd_heartbeat,
        "refresh the lease",
        configure_heartbeat,
    ),
    "done": Command(
        cmd_done,
        "finish the task",
        configure_done,
    ),
    "fail": Command(
        cmd_fail,
        "report a failure (retried after a backoff)",
        configure_fail,
    ),
    "pause": Command(
        cmd_pause,
        "pause running tasks (a clean stop spends no attempt)",
        configure_pause,
    ),
    "status": Command(
        cmd_status,
        "task counts per state, and retrying: those waiting to retry after a spent attempt",
        configure_status,
    ),
    "show": Command(
        cmd_show,
        "one task with its history",
        configure_show,
    ),
    "dead": Command(
        cmd_dead,
        "failed tasks",
        configure_dead,
    ),
    "import": Command(
        cmd_import,
        "import a backlog written elsewhere: afk import prd PATH (a Ralph prd.json), "
        "afk import github --repo OWNER/NAME (its open issues)",
        configure_import,
    ),
    "export": Command(
        cmd_export,
        "write what is done back: afk export prd PATH (passes: true per done story)",
        configure_export,
    ),
    "review": Command(
        cmd_review,
        "the done tasks' work to review: branch, commits, what changed, the check, "
        "the pull request, how far behind and what conflicts with the base",
        configure_review,
    ),
    "gc": Command(
        cmd_gc,
        "remove the worktrees of done tasks that are merged and clean; --force saves "
        "the rest first (afk restore brings one back)",
        configure_gc,
    ),
    "restore": Command(
        cmd_restore,
        "bring back a worktree that afk gc --force saved, byte for byte",
        configure_restore,
    ),
    "retry": Command(
        cmd_retry,
        "put failed tasks back to todo",
        configure_retry,
    ),
    "ask": Command(
        cmd_ask,
        "inside the agent: ask a person; the task waits for the answer",
        configure_ask,
    ),
    "answer": Command(
        cmd_answer,
        "answer a task's question: it goes back to todo",
        configure_answer,
    ),
    "cancel": Command(
        cmd_cancel,
        "end tasks a person no longer wants (todo, paused or blocked): failed, with --reason",
        configure_cancel,
    ),
    "trust": Command(
        cmd_trust,
        "let what a task's worktree changed of the agent's own config run (.claude/, "
        ".mcp.json, .git/hooks...): the task goes back to todo",
        configure_trust,
    ),
    "questions": Command(
        cmd_questions,
        "the open questions of the agents",
        configure_questions,
    ),
    "approvals": Command(
        cmd_approvals,
        "the tool calls waiting for a person's approval (afk loop --ask-for)",
        configure_approvals,
    ),
    "approve": Command(
        cmd_approve,
        "approve a waiting tool call: its task's session resumes and runs it, once",
        configure_approve,
    ),
    "deny": Command(
        cmd_deny,
        "deny a waiting tool call: its task's session resumes without it, told your --note",
        configure_deny,
    ),
    "reclaim": Command(
        cmd_reclaim,
        "reclaim expired leases once",
        None,
    ),
    "db": Command(
        cmd_db,
        "the embedded PostgreSQL server",
        configure_db,
        needs="nothing",
    ),
    "demo": Command(
        cmd_demo,
        "a crash and a resume on a small backlog, end to end",
        None,
        needs="settings",
    ),
    "once": Command(
        cmd_once,
        "run a command as a side effect of the task, at most once: "
        "later runs replay its recorded stdout and exit status",
        configure_once,
    ),
    "hooks": Command(
        cmd_hooks,
        "print (or install) agent hook settings",
        configure_hooks,
        needs="settings",
    ),
    "hook": Command(
        cmd_hook,
        "run as an agent hook: reads one hook payload on stdin and "
        "acts on its hook_event_name; always exits 0",
        configure_hook,
        needs="settings",
    ),
    "doctor": Command(
        cmd_doctor,
        "check the setup: the database, the watchdog service, the clock, the settings, "
        "and the agents' hook settings (exit 1 with a line per problem)",
        configure_doctor,
        needs="settings",
    ),
    "resume-brief": Command(
        cmd_resume_brief,
        "a Markdown note for the next session",
        configure_resume_brief,
    ),
    "digest": Command(
        cmd_digest,
        "the morning digest: print it, send it, or show deliveries",
        configure_digest,
    ),
    "watchdog": Command(
        cmd_watchdog,
        "the watchdog service",
        configure_watchdog,
        needs="settings",
    ),
    "loops": Command(
        cmd_loops,
        "the fleet: every afk loop running (alive or lost), its task and profile, and the "
        "accounts parked",
        configure_loops,
    ),
    "profile": Command(
        cmd_profile,
        "the ways to run an agent (afk profile add NAME -- CMD), for afk loop --profile",
        configure_profile,
    ),
    "web": Command(
        cmd_web,
        "the status pages: afk web token --name YOU makes a login for their actions",
        configure_web,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = Parser(
        prog="afk",
        description="A durable task queue on PostgreSQL for unattended coding agents.",
        parents=[common],
        epilog="Exit status: "
        + ", ".join(f"{code} {short}" for code, short, _ in EXIT_CODES)
        + ".",
    )
    parser.add_argument("--version", action="version", version=f"afk {package_version()}")
    sub = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND", parser_class=Parser
    )
    parser.commands = sub.choices  # type: ignore[attr-defined]
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, parents=[common], help=command.help, description=command.help)
        if command.configure is not None:
            command.configure(p)
    return parser


def main(argv: Sequence[str] | None = None, payload: bytes | None = None) -> int:
    """The command line; ``payload`` is a hook's stdin, when the entry point
    (:mod:`watchdog.__main__`) read it already."""

    logging.basicConfig(
        level=level_of(os.environ.get("AFK_LOG_LEVEL"), "WARNING"),
        format="afk: %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(credential.BROKER) and not {"-h", "--help"} & set(argv):
        # inside a run: the run's broker, never a database (the agent has none)
        from ..agents import brokerlink

        return brokerlink.main(argv, payload, os.environ)
    if argv[:1] == ["hook"]:
        fast = hook_args(argv[1:])
        if fast is not None:  # the agent waits for every hook: no full parser
            fast.payload = payload
            return run_command(fast)
    for number, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            print(
                f"afk: argument {number} is not valid UTF-8; nothing was changed", file=sys.stderr
            )
            return EXIT_USAGE
    for name, value in os.environ.items():
        if name.startswith("AFK_") and not value.isascii() and not is_utf8(value):
            print(f"afk: {name} is not valid UTF-8; nothing was changed", file=sys.stderr)
            return EXIT_USAGE
    level = os.environ.get("AFK_LOG_LEVEL")
    if level and not isinstance(logging.getLevelName(level.strip().upper()), int):
        print(
            f"afk: AFK_LOG_LEVEL={level!r} is not a log level (DEBUG, INFO, WARNING, ERROR)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    command: list[str] = []
    if "--" in argv and command_word(argv[: argv.index("--")]) in ("once", "loop", "profile"):
        # afk once|loop|profile add ... -- COMMAND ARGS: everything after -- is the command
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, with its own usage
        commands = getattr(parser, "commands", {})
        where = commands.get(getattr(args, "subcommand", None), parser)
        where.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.subcommand in ("once", "loop", "profile"):
        args.command = command
    for name in ("dsn", "config"):
        if not hasattr(args, name):
            setattr(args, name, None)
    return run_command(args)


def hook_args(argv: list[str]) -> argparse.Namespace | None:
    """`afk hook [stop] [--gate] [--config FILE] [--dsn DSN]`, read without
    building the whole parser (some 20 ms of every tool call of an agent);
    None for anything else, which the full parser then reads."""

    parsed = parse_argv(argv)
    if parsed is None or parsed["harness"] not in HARNESSES:
        return None
    if any(isinstance(v, str) and not is_utf8(v) for v in parsed.values()):
        return None
    return argparse.Namespace(subcommand="hook", payload=None, **parsed)


def run_command(args: argparse.Namespace, res: Resources | None = None) -> int:
    """Run a parsed command, the one bootstrap: what it needs is opened when
    it first asks (:class:`~.common.Resources`) and closed after it, unless
    ``res`` gives it (the run's broker: the loop's); an AfkError is one line
    and its exit status."""
    command = COMMANDS[args.subcommand]
    if res is None:
        res = Resources(
            args, command.needs, bounded=command.bounded, check_schema=command.check_schema
        )
        res.cli = (COMMANDS, run_command)
    try:
        try:
            resolve_task_args(args, res)  # (a short id is its task's whole id)
            code: int = command.run(args, res)
        finally:
            res.close()
        stdout().flush()
    except AfkError as exc:
        print(f"afk: {exc}", file=stderr())
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # whoever read our output stopped (`afk dead | head -1`): not an error
        # worth a traceback; stdout goes nowhere so that the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug of ours: one line, never a traceback or a secret
        logger.debug("internal error", exc_info=True)
        print(
            f"afk: internal error: {type(exc).__name__}: {redact(str(exc))} "
            "(AFK_LOG_LEVEL=DEBUG shows where)",
            file=stderr(),
        )
        return EXIT_ERROR
    return code
