"""What the commands share: the exit statuses, the options several take,
JSON out, and what a command uses, opened for it (:class:`Resources`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, Literal, NoReturn

from ..agents import credential
from ..checks import check_name, check_token, json_type, parse_task_id
from ..config import load_all, parse_duration
from ..errors import EXIT_USAGE, AfkError, BadInput
from ..ids import task_id_prefix
from ..text import json_visible

if TYPE_CHECKING:
    from ..config import Settings
    from ..db import Database
    from ..queue import Queue

logger = logging.getLogger("watchdog.cli")


MAX_SINCE = 100 * 365 * 86400

logger = logging.getLogger(__name__)


def duration_arg(value: str) -> float:
    """A DURATION option: seconds, or a number with s, m, h or d; above 0."""
    seconds = _seconds(value)
    if not 0 < seconds <= 30 * 86400:
        raise argparse.ArgumentTypeError(f"{value!r} must be above 0 and at most 30 days")
    return seconds


def cap_arg(value: str) -> float:
    """A DURATION option whose 0 means no cap, as its setting's does."""
    seconds = _seconds(value)
    if seconds > 30 * 86400:
        raise argparse.ArgumentTypeError(f"{value!r} must be at most 30 days (0: no cap)")
    return seconds


def _seconds(value: str) -> float:
    try:
        return parse_duration(value)
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def token_arg(value: str) -> int:
    """--token as argparse reads it: a lease token, else the usage line."""
    try:
        return check_token(value, "")
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc).strip()) from None


#: where a command writes, when not to this process's stdout and stderr: a
#: command the run's broker runs for an agent, in a thread of its own
_STREAMS: ContextVar[tuple[IO[str], IO[str]] | None] = ContextVar("afk_streams", default=None)


def stdout() -> IO[str]:
    """Where the running command writes its output."""
    given = _STREAMS.get()
    return sys.stdout if given is None else given[0]


def stderr() -> IO[str]:
    """Where the running command writes its messages."""
    given = _STREAMS.get()
    return sys.stderr if given is None else given[1]


@contextlib.contextmanager
def streams(out: IO[str], err: IO[str]) -> Iterator[None]:
    """The commands run within write to ``out`` and ``err`` (this thread's)."""
    token = _STREAMS.set((out, err))
    try:
        yield
    finally:
        _STREAMS.reset(token)


#: what argparse takes for a value, not an option, though it starts with a
#: dash: a negative number or duration (`--stall-after -5m` is refused as a
#: negative duration, not read as an unknown option)
NEGATIVE = re.compile(r"^-(\d+(\.\d*)?|\.\d+)\s*[a-zA-Z]{0,3}$")


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE

    def error(self, message: str) -> NoReturn:
        self.print_usage(stderr())
        self.exit(EXIT_USAGE, f"afk: error: {message}\n")

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:  # (help on stdout, the rest on stderr: the command's own)
            (stdout() if file is None or file is sys.stdout else stderr()).write(message)


class TaskArg(str):
    """A task id as typed on a command line: the whole id, or a short one (a
    prefix of at least 8 digits, what afk prints). The bootstrap resolves
    each to the whole id before the command runs (:func:`resolve_task_args`),
    so every command that takes a task id takes both."""


def task_arg(value: str) -> TaskArg:
    """The type of every argument that names a task."""
    return TaskArg(value)


def resolve_task_args(args: argparse.Namespace, res: Resources) -> None:
    """Each :class:`TaskArg` of ``args`` as its task's whole id: a whole id
    as it is (checked, with no query), a short one looked up (BadInput: no
    task, several, or not an id at all)."""

    def whole(value: TaskArg) -> str:
        if task_id_prefix(value) is None:
            return str(parse_task_id(value))
        return res.queue.resolve_id(value)

    for name, value in vars(args).items():
        if isinstance(value, TaskArg):
            setattr(args, name, whole(value))
        elif isinstance(value, list) and any(isinstance(v, TaskArg) for v in value):
            setattr(args, name, [whole(v) if isinstance(v, TaskArg) else v for v in value])


def agent_option(p: Parser, help: str = "agent id (env AFK_AGENT_ID)") -> None:
    p.add_argument("--agent", help=help)


def runner_option(p: Parser) -> None:
    p.add_argument(
        "--runner",
        help="runner id (env AFK_RUNNER_ID): names one concurrent "
        "worker, since a claim first resumes that runner's own in-flight task. "
        "Two workers must never share one. Default: host:pid of this command",
    )


def account_option(p: Parser) -> None:
    p.add_argument(
        "--account",
        help="the account a usage limit applies to (env AFK_ACCOUNT; default: default)",
    )


def token_option(p: Parser) -> None:
    p.add_argument(
        "--token", type=token_arg, help="the lease token of the claim (env AFK_TASK_TOKEN)"
    )


def lease_option(p: Parser) -> None:
    p.add_argument("--lease", type=float, help="lease length in seconds (env AFK_LEASE_SECONDS)")


def fenced_options(p: Parser) -> None:
    """The task and the token of a fenced write."""
    p.add_argument("id", nargs="?", type=task_arg, help="task id (env AFK_TASK_ID)")
    token_option(p)


NEXT_HELP = (
    "and, in the same statement, claim the same runner's next task of the agent "
    "and print it (exit 3 if there is none)"
)


def _json_default(value: Any) -> Any:

    if isinstance(value, datetime):
        return value.isoformat()  # ISO 8601 with its offset, as everywhere else
    return str(value)


def emit(data: Any) -> None:
    """One JSON document on standard output, UTF-8 as it is but for what a
    terminal would act on: written as ``\\uXXXX`` (text.json_visible: the
    same value to a JSON reader)."""
    text = json.dumps(data, ensure_ascii=False, default=_json_default)
    stdout().write(json_visible(text) + "\n")


#: bytes of JSON an option reads from a file or standard input, at most (a
#: spec, a patch, a result: the database keeps a megabyte of each)
MAX_JSON_INPUT = 16 << 20


def parse_json(text: str, what: str) -> Any:
    """JSON from an argument, from a file named as ``@PATH`` (for large values),
    or from standard input as ``@-``."""
    if text == "@-":
        data = sys.stdin.buffer.read(MAX_JSON_INPUT + 1)
        if len(data) > MAX_JSON_INPUT:  # (/dev/zero: a bounded read, not a MemoryError)
            raise BadInput(f"{what}: standard input is larger than {MAX_JSON_INPUT} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(f"{what}: standard input is not UTF-8") from None
    elif text.startswith("@"):
        try:
            with open(text[1:], "rb") as f:
                data = f.read(MAX_JSON_INPUT + 1)
            if len(data) > MAX_JSON_INPUT:
                raise BadInput(f"{what}: {text[1:]} is larger than {MAX_JSON_INPUT} bytes")
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"{what}: cannot read {text[1:]}: {exc}") from None

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise BadInput(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadInput(f"{what} is nested too deeply") from None


def parse_object(text: str, what: str) -> dict[str, Any]:
    value = parse_json(text, what)
    if not isinstance(value, dict):
        raise BadInput(f"{what} must be a JSON object, not {json_type(value)}")
    return value


def agent_of(args: argparse.Namespace, required: bool = True) -> str | None:
    agent = args.agent if args.agent is not None else os.environ.get("AFK_AGENT_ID")
    if required and agent is None:
        raise BadInput("an agent id is needed: --agent or AFK_AGENT_ID")
    return agent


def runner_of(args: argparse.Namespace) -> str | None:
    return args.runner if args.runner is not None else os.environ.get("AFK_RUNNER_ID") or None


def say(line: str) -> None:
    print(f"afk: {line}", file=stderr())


def database_of(args: argparse.Namespace, settings: Any) -> str:
    """The DSN this command talks to (resolve.resolve_dsn), saying on stderr
    when it is the embedded server's."""
    from ..resolve import resolve_dsn

    return resolve_dsn(args.dsn, settings=settings, note=say)


#: what a command uses, which the bootstrap opens for it (in this order of
#: reach: a command that needs the queue has the settings and the DSN too)
Needs = Literal["nothing", "settings", "queue"]
_REACH: dict[str, int] = {"nothing": 0, "settings": 1, "queue": 2}


class Resources:
    """What a command uses, opened by the one bootstrap (``run_command``)
    when the command first asks for it and closed after the command: the
    settings, the database it talks to (the DSN), the queue, a database of
    its own. Nothing is opened before the command asks, so a command checks
    its input first and bad input reaches no database. A command declares
    what it needs in the command table, and cannot reach past it."""

    def __init__(
        self,
        args: argparse.Namespace,
        needs: Needs = "queue",
        *,
        bounded: bool = True,
        check_schema: bool = True,
    ) -> None:
        self.args, self.needs = args, needs
        self.bounded, self.check_schema = bounded, check_schema
        self._settings: Settings | None = None
        self._dsn: str | None = None
        self._queue: Queue | None = None
        self._databases: list[Database] = []
        self._given = False
        #: the CLI's table of commands and its bootstrap, given by the
        #: bootstrap itself: what a command that serves others' commands (the
        #: loop's broker) runs them with
        self.cli: tuple[Mapping[str, Any], Callable[..., int]] | None = None

    @classmethod
    def given(cls, args: argparse.Namespace, settings: Settings, queue: Queue) -> Resources:
        """What a command the run's broker runs uses: the loop's settings and
        a queue on the broker's connections, which the command does not close."""
        res = cls(args, "queue")
        res._settings, res._queue, res._given = settings, queue, True
        return res

    def _reach(self, what: str, needs: Needs) -> None:
        if _REACH[self.needs] < _REACH[needs]:
            raise RuntimeError(f"a command that needs {self.needs} asked for {what}")

    @property
    def settings(self) -> Settings:
        """The settings (--config, AFK_CONFIG, AFK_*), loaded once."""
        self._reach("the settings", "settings")
        if self._settings is None:
            self._settings = load_all(self.args.config)
        return self._settings

    @property
    def dsn(self) -> str:
        """The DSN this command talks to (resolve.resolve_dsn), saying on
        stderr when it is the embedded server's (started if need be)."""
        self._reach("the database", "settings")
        if self._dsn is None:
            self._dsn = database_of(self.args, self.settings)
        return self._dsn

    @property
    def queue(self) -> Queue:
        """The queue: one connection, and statements bounded by
        AFK_COMMAND_TIMEOUT (a locked row must not stall a heartbeat for
        good) unless the command is declared unbounded. A schema newer than
        this afk is said once (its writes may miss what the newer one expects)."""
        self._reach("the queue", "queue")
        if self._queue is None:
            from ..db import Database
            from ..queue import Queue

            limit = self.settings.queue.command_timeout if self.bounded else 0
            db = Database(self.dsn, pool_size=None, statement_timeout=limit or None)
            if self.check_schema:
                newer_schema(db)
            self._queue = Queue(db, settings=self.settings.queue)
        return self._queue

    def database(self, pool_size: int | None = None) -> Database:
        """A database of the command's own (a pool for ``afk loop``'s
        heartbeat beside its statements), closed after the command."""
        self._reach("a database", "queue")
        from ..db import Database

        db = Database(self.dsn, pool_size=pool_size)
        self._databases.append(db)
        return db

    def close(self) -> None:
        if self._queue is not None and not self._given:
            self._queue.close()
        for db in self._databases:
            db.close()


def newer_schema(db: Database) -> None:
    """Say (once) when the database's schema is newer than this afk knows."""
    from .. import sql

    try:
        version = db.schema_version()
    except AfkError:
        return  # the command itself says what is wrong with the database
    known = max(v for v, _, _ in sql.migrations())
    if version > known:
        say(
            f"the database's schema (version {version}) is newer than this afk knows "
            f"(up to {known}): upgrade afk-watchdog"
        )


def task_of(args: argparse.Namespace) -> tuple[str, int]:
    """The task id and token: from the arguments, else from AFK_TASK_ID and
    AFK_TASK_TOKEN (which a supervisor gives the agent it runs)."""
    env_id, env_token = credential.read(os.environ)
    task_id = args.id if args.id is not None else env_id
    if task_id is None:
        raise BadInput("a task id is needed: give it, or set AFK_TASK_ID")
    token = args.token
    if token is None and env_token is not None and (args.id is None or args.id == env_id):
        token = check_token(env_token, "AFK_TASK_TOKEN")
    if token is None:
        raise BadInput("a lease token is needed: --token, or AFK_TASK_TOKEN with AFK_TASK_ID")
    return task_id, token


def boundary_options(p: Parser, *, probed: bool = False) -> None:
    """--allow-host and --deny-read: what `afk loop --sandbox` allows and
    denies besides its own list (``probed``: as `afk doctor --sandbox`
    proves them)."""
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        dest="allow_host",
        metavar="HOST[:PORT]",
        help="with --sandbox: a host the loop allows (probed instead of the model API's)"
        if probed
        else "a host a sandboxed run may reach besides its model API (repeatable; "
        "env AFK_ALLOW_HOSTS, comma-separated)",
    )
    p.add_argument(
        "--deny-read",
        action="append",
        default=[],
        dest="deny_read",
        metavar="PATH",
        help="with --sandbox: a path the loop denies (probed as well)"
        if probed
        else "a path a sandboxed run may not read (repeatable)",
    )


def workspace_options(p: Parser, *, branch: bool) -> None:
    """A git worktree per task (watchdog.workspaces)."""
    p.add_argument(
        "--repo",
        help="a git repository: each task runs in a worktree of it, on a branch of its own",
    )
    if branch:
        p.add_argument("--base", help="the ref its branch starts from (default: HEAD at its claim)")
        p.add_argument("--branch", help="its branch (default: afk/<id>-<title>)")
    p.add_argument(
        "--verify",
        metavar="CMD",
        help="a check run in the worktree (through the shell) before done: exit 0 or a failure",
    )
    p.add_argument(
        "--require-changes",
        action="store_true",
        dest="require_changes",
        help="a run that leaves no new commit and a clean worktree is a failure",
    )


def workspace_request(
    repo: str | None = None,
    base: str | None = None,
    branch: str | None = None,
    verify: str | None = None,
    require_changes: bool = False,
) -> dict[str, Any] | None:
    """A workspace request checked with git (None: no --repo)."""
    if repo is None:
        if base is not None or branch is not None:
            raise BadInput("--base and --branch go with --repo")
        if verify is not None or require_changes:
            raise BadInput("--verify and --require-changes go with --repo")
        return None

    from .. import workspaces

    return workspaces.request(
        repo, base=base, branch=branch, verify=verify, require_changes=require_changes
    )


def checked_verify(command: str | None) -> str | None:
    if command is not None and not command.strip():
        raise BadInput("--verify is empty: give the command that checks the work")
    return command


def account_of(args: argparse.Namespace) -> str | None:
    """--account, else AFK_ACCOUNT (unset or empty: none). A flag given but
    blank is refused, not read as "no account"."""

    if args.account is not None:
        return check_name("--account", args.account)
    given = os.environ.get("AFK_ACCOUNT") or None
    return None if given is None else check_name("AFK_ACCOUNT", given)


def parse_when(text: str) -> Any:
    """An ISO 8601 time; one without an offset is read in this machine's zone
    (TZ first), never in whichever zone the database happens to have."""

    from ..agents.outcome import reading_zone

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"--until {text!r} is not an ISO 8601 time (e.g. 2026-12-01T05:00+01:00)"
        ) from None
    if when.tzinfo is None:  # a wall-clock time of this machine's zone (TZ first)
        when = when.replace(tzinfo=reading_zone())
    return when


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("afk-watchdog")
    except PackageNotFoundError:
        return "unknown"


def common_options() -> Parser:
    """--dsn and --config, which every command takes."""
    common = Parser(add_help=False)
    common.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help="PostgreSQL connection string (env AFK_DSN; default: the "
        "embedded server under AFK_HOME)",
    )
    common.add_argument(
        "--config", default=argparse.SUPPRESS, help="TOML file of settings (env AFK_CONFIG)"
    )
    return common


def command_word(argv: Sequence[str]) -> str | None:
    """The subcommand of an argument list: its first word that is neither an
    option nor the value of --dsn or --config."""
    words = iter(argv)
    for word in words:
        if word in ("--dsn", "--config"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None
