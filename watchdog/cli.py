"""The ``afk`` command.

Output is JSON on stdout where a command returns data; messages go to stderr.
Exit status: 0 ok, 2 bad usage or input, 3 nothing to claim, 4 lease lost,
5 the account is parked (a usage limit, or a login that needs a person),
6 an effect is in doubt (started by a call that died unrecorded),
1 anything else (such as an unreachable database).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .checks import WORKSPACE_FIELDS, check_token
from .config import is_utf8, parse_duration
from .errors import AfkError, BadInput
from .harnesses import HARNESSES, SETTINGS

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_EMPTY, EXIT_LEASE_LOST, EXIT_PARKED = 0, 1, 2, 3, 4, 5
MAX_SINCE = 100 * 365 * 86400

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .db import Database
    from .models import Task
    from .queue import Queue


def duration_arg(value: str) -> float:
    """A DURATION option: seconds, or a number with s, m, h or d; above 0."""
    try:
        seconds = parse_duration(value)
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < seconds <= 30 * 86400:
        raise argparse.ArgumentTypeError(f"{value!r} must be above 0 and at most 30 days")
    return seconds


def token_arg(value: str) -> int:
    """--token as argparse reads it: a lease token, else the usage line."""
    try:
        return check_token(value, "")
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc).strip()) from None


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"afk: error: {message}\n")


# -- options several commands share ---------------------------------------------


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
    p.add_argument("id", nargs="?", help="task id (env AFK_TASK_ID)")
    token_option(p)


NEXT_HELP = (
    "and, in the same statement, claim the same runner's next task of the agent "
    "and print it (exit 3 if there is none)"
)


def _json_default(value: Any) -> Any:
    from datetime import datetime

    if isinstance(value, datetime):
        return value.isoformat()  # ISO 8601 with its offset, as everywhere else
    return str(value)


def emit(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=_json_default) + "\n")


def parse_json(text: str, what: str) -> Any:
    """JSON from an argument, from a file named as ``@PATH`` (for large values),
    or from standard input as ``@-``."""
    if text == "@-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(f"{what}: standard input is not UTF-8") from None
    elif text.startswith("@"):
        try:
            text = Path(text[1:]).read_text("utf-8")
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
        from .checks import json_type

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
    print(f"afk: {line}", file=sys.stderr)


def database_of(args: argparse.Namespace, settings: Any) -> str:
    """The DSN this command talks to (resolve.resolve_dsn), saying on stderr
    when it is the embedded server's."""
    from .resolve import resolve_dsn

    return resolve_dsn(args.dsn, settings=settings, note=say)


def open_queue(
    args: argparse.Namespace, *, timeout: bool = True, check_schema: bool = True
) -> Queue:
    """The queue of a CLI command: one connection, and statements bounded by
    AFK_COMMAND_TIMEOUT (a locked row must not stall a heartbeat for good).
    A schema newer than this afk is said once (its writes may miss what the
    newer one expects)."""
    from .config import load_all
    from .db import Database
    from .queue import Queue

    settings = load_all(args.config)
    dsn = database_of(args, settings)
    limit = settings.queue.command_timeout if timeout else 0
    db = Database(dsn, pool_size=None, statement_timeout=limit or None)
    if check_schema:
        newer_schema(db)
    return Queue(db, settings=settings.queue)


def newer_schema(db: Database) -> None:
    """Say (once) when the database's schema is newer than this afk knows."""
    from . import sql

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
    env_id = os.environ.get("AFK_TASK_ID")
    # AFK_TASK_LEASE: the same token under a name no harness redacts
    env_token = os.environ.get("AFK_TASK_TOKEN") or os.environ.get("AFK_TASK_LEASE")
    task_id = args.id if args.id is not None else env_id
    if task_id is None:
        raise BadInput("a task id is needed: give it, or set AFK_TASK_ID")
    token = args.token
    if token is None and env_token is not None and (args.id is None or args.id == env_id):
        token = check_token(env_token, "AFK_TASK_TOKEN")
    if token is None:
        raise BadInput("a lease token is needed: --token, or AFK_TASK_TOKEN with AFK_TASK_ID")
    return task_id, token


# -- commands ---------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:

    with open_queue(args, timeout=False, check_schema=False) as q:
        applied = q.migrate()
        emit({"applied": applied, "version": q.db.schema_version()})
        newer_schema(q.db)
    return EXIT_OK


#: the longest line of an --file, bytes (a spec is 1 MiB at most by default;
#: a file with no newline, /dev/zero say, is refused here, not read for good)
MAX_LINE = 4 << 20


def read_lines(path: str) -> list[str]:
    lines: list[str] = []
    try:
        source = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        with source:
            while line := source.readline(MAX_LINE + 1):
                if len(line) > MAX_LINE:
                    raise BadInput(
                        f"{path}: line {len(lines) + 1} is longer than {MAX_LINE} bytes; "
                        "nothing was enqueued"
                    )
                lines.append(line.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BadInput(f"cannot read {path}: {reason}") from None
    return lines


def read_jsonl(path: str) -> list[dict[str, Any]]:
    text = "".join(read_lines(path))
    tasks = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = parse_object(line, f"line {number}")
        except BadInput as exc:
            raise BadInput(f"{path}: {exc}; nothing was enqueued") from None
        unknown = (
            set(item)
            - {
                "title",
                "spec",
                "key",
                "max_attempts",
                "budget_usd",
                "not_before",
                "concurrency_key",
                "concurrency_limit",
                "after",
                "on_dep_failure",
            }
            - set(WORKSPACE_FIELDS)
        )
        if unknown:
            raise BadInput(
                f"{path}: line {number}: unknown field(s) {sorted(unknown)}; nothing was enqueued"
            )
        try:
            ws = workspace_request(**{k: item.pop(k) for k in WORKSPACE_FIELDS if k in item})
            if "not_before" in item:
                item.update(not_before_of(item.pop("not_before"), "not_before"))
        except (BadInput, TypeError) as exc:
            raise BadInput(f"{path}: line {number}: {exc}; nothing was enqueued") from None
        if ws is not None:
            item["workspace"] = ws
        tasks.append(item)
    if not tasks:
        raise BadInput(f"{path}: no tasks in the file")
    return tasks


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
    from . import workspaces

    return workspaces.request(
        repo, base=base, branch=branch, verify=verify, require_changes=require_changes
    )


def not_before_of(when: Any, what: str) -> dict[str, Any]:
    """--not-before as a task takes it: an ISO 8601 time (one without an
    offset in this machine's zone), or +DURATION from the database's now."""
    if when is None:
        return {}
    if not isinstance(when, str) or not when.strip():
        raise BadInput(f"{what} must be an ISO 8601 time or +DURATION (+2h, +30m)")
    text = when.strip()
    if text.startswith("+"):
        try:
            return {"not_before": parse_duration(text[1:])}
        except BadInput:
            raise BadInput(f"{what} {text!r} is not +DURATION (+90s, +30m, +2h, +1d)") from None
    try:
        return {"not_before": parse_when(text)}
    except BadInput:
        raise BadInput(
            f"{what} {text!r} is not an ISO 8601 time or +DURATION (+2h, +30m)"
        ) from None


def checked_verify(command: str | None) -> str | None:
    if command is not None and not command.strip():
        raise BadInput("--verify is empty: give the command that checks the work")
    return command


def configure_enqueue(p: Parser) -> None:
    agent_option(p)
    p.add_argument("--title", help="what the task is, as the agent will read it")
    p.add_argument("--spec", help="JSON object, or @FILE")
    p.add_argument("--key", help="idempotency key: enqueueing it again is a no-op")
    p.add_argument(
        "--max-attempts",
        type=int,
        dest="max_attempts",
        help="attempts before the task is failed for good (env AFK_MAX_ATTEMPTS)",
    )
    p.add_argument(
        "--budget-usd",
        type=float,
        dest="budget_usd",
        help="what the task's runs may cost together, US dollars; reached, it waits for a person",
    )
    p.add_argument(
        "--not-before",
        dest="not_before",
        metavar="WHEN",
        help="not claimable before then: an ISO 8601 time, or +DURATION (+2h, +30m)",
    )
    p.add_argument(
        "--after",
        action="append",
        metavar="REF",
        help="wait until that task is done: a task id or a key (one enqueued later, too); "
        "give it again for more",
    )
    p.add_argument(
        "--on-dep-failure",
        dest="on_dep_failure",
        choices=["cancel", "run", "hold"],
        help="when a task it waits for fails: cancel (fail too; the default), run (run "
        "anyway), hold (wait until a person retries it)",
    )
    p.add_argument(
        "--concurrency-key",
        dest="concurrency_key",
        metavar="KEY",
        help="a shared thing it uses (repo:app): one task of a key runs at a time, "
        "across agents and runners",
    )
    p.add_argument(
        "--concurrency-limit",
        dest="concurrency_limit",
        metavar="N",
        type=int,
        help="how many tasks of its key may run at once (default 1; the key's first "
        "enqueued limit stands)",
    )
    workspace_options(p, branch=True)
    p.add_argument(
        "--file",
        help='JSON Lines, each {"title", "spec", "key", "max_attempts", "budget_usd", "repo", '
        '"base", "branch", "verify", "require_changes"}; - for stdin',
    )


def check_branches(
    q: Any, requests: list[Mapping[str, Any] | None], where: Callable[[int], str]
) -> None:
    """No two new tasks, nor a new one and an old one, on one branch (git
    checks a branch out in one worktree only); ``where`` names the line."""
    from . import workspaces

    named: set[tuple[str, str]] = set()
    for n, ws in enumerate(requests, 1):
        if ws is None or not ws.get("branch"):
            continue
        if (ws["repo"], ws["branch"]) in named or workspaces.branch_taken(q.db, ws):
            raise BadInput(
                f"{where(n)}--branch {ws['branch']} is another task's workspace; "
                "nothing was enqueued"
            )
        named.add((ws["repo"], ws["branch"]))


def cmd_enqueue(args: argparse.Namespace) -> int:
    agent = agent_of(args)
    if args.file is not None:
        if args.title is not None or args.spec is not None or args.key is not None:
            raise BadInput("--file cannot be combined with --title, --spec or --key")
        if args.budget_usd is not None:
            raise BadInput("--file takes a budget_usd key per line, not --budget-usd")
        given = [args.repo, args.base, args.branch, args.verify]
        if any(v is not None for v in given) or args.require_changes:
            raise BadInput("--file takes repo, base, branch and verify keys per line")
        if args.not_before is not None:
            raise BadInput("--file takes a not_before key per line, not --not-before")
        if args.after is not None or args.on_dep_failure is not None:
            raise BadInput("--file takes after and on_dep_failure keys per line, not --after")
        if args.concurrency_key is not None or args.concurrency_limit is not None:
            raise BadInput(
                "--file takes concurrency_key and concurrency_limit keys per line, "
                "not --concurrency-key"
            )
        tasks = read_jsonl(args.file)
    else:
        if args.title is None:
            raise BadInput("--title (or --file) is required")
        spec = parse_object(args.spec, "--spec") if args.spec is not None else {}
        ws = workspace_request(args.repo, args.base, args.branch, args.verify, args.require_changes)
        tasks = [
            {
                "title": args.title,
                "spec": spec,
                "key": args.key,
                "max_attempts": args.max_attempts,
                "budget_usd": args.budget_usd,
                **({"workspace": ws} if ws is not None else {}),
                **not_before_of(args.not_before, "--not-before"),
                "concurrency_key": args.concurrency_key,
                "concurrency_limit": args.concurrency_limit,
                "after": args.after,
                "on_dep_failure": args.on_dep_failure,
            }
        ]
    if args.max_attempts is not None:
        for task in tasks:
            task.setdefault("max_attempts", args.max_attempts)
    assert agent is not None
    with open_queue(args) as q:
        check_branches(
            q,
            [task.get("workspace") for task in tasks],
            lambda n: f"{args.file}: line {n}: " if args.file is not None else "",
        )
        try:
            result = q.enqueue(agent, tasks)
        except BadInput as exc:
            if args.file is not None:
                tail = "" if "nothing was enqueued" in str(exc) else "; nothing was enqueued"
                raise BadInput(f"{args.file}: {exc}{tail}") from None
            raise
        emit(result.to_json())
    return EXIT_OK


def read_prd_file(path: str) -> tuple[str, str]:
    """A prd.json's text and file name (bounded: a backlog, not a dump)."""
    from .backlogs import MAX_PRD_BYTES

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PRD_BYTES + 1)
        if len(data) > MAX_PRD_BYTES:
            raise BadInput(f"{path} is larger than {MAX_PRD_BYTES} bytes: not a prd.json")
        return data.decode("utf-8"), os.path.basename(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BadInput(f"cannot read {path}: {reason}") from None


def configure_import(p: Parser) -> None:
    p.description = "Import a backlog written elsewhere as tasks (a re-import adds nothing new)."
    isub = p.add_subparsers(dest="source", required=True, metavar="SOURCE", parser_class=Parser)
    prd = isub.add_parser(
        "prd",
        parents=[common_options()],
        help="a Ralph prd.json: a task per user story not passing yet, in priority order",
    )
    prd.add_argument("path", metavar="PATH", help="the prd.json")
    agent_option(prd)
    prd.add_argument(
        "--dry-run", action="store_true", help="print the tasks it would enqueue; change nothing"
    )
    workspace_options(prd, branch=False)
    prd.add_argument(
        "--base", help="the ref the stories' branches start from (default: HEAD at each claim)"
    )
    gh = isub.add_parser(
        "github",
        parents=[common_options()],
        help="a repository's open issues with a label, through the gh CLI (its login)",
    )
    gh.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the repository")
    gh.add_argument(
        "--label", default="ready-for-agent", help="the issues' label (default ready-for-agent)"
    )
    agent_option(gh)
    gh.add_argument(
        "--dry-run", action="store_true", help="print the tasks it would enqueue; change nothing"
    )


def run_gh(args: list[str]) -> Any:
    """``gh`` with ``args``, its JSON output read; AfkError (exit 1) when gh
    is missing, not logged in, or fails, in one line."""
    import subprocess

    from .text import one_line

    gh = shutil.which("gh")
    if gh is None:
        raise AfkError("gh is not installed: afk import github reads issues through it")
    try:
        proc = subprocess.run(
            [gh, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AfkError(f"gh {args[0]} did not run: {exc}") from None
    if proc.returncode != 0:
        said = one_line(proc.stderr or proc.stdout or "")[:300]
        if args[:2] == ["auth", "status"]:
            raise AfkError(f"gh is not logged in (gh auth login): {said}")
        raise AfkError(f"gh {' '.join(args[:2])} failed: {said}")
    if args[:2] == ["auth", "status"]:
        return None
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AfkError(f"gh {' '.join(args[:2])} printed no JSON") from None


def github_backlog(repo: str, label: str) -> Any:
    """The open issues of ``repo`` with ``label`` as tasks, read through gh."""
    import re as _re

    from .backlogs import github_tasks, issue_refs

    if not _re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
        raise BadInput(f"--repo {repo!r} is not OWNER/NAME")
    run_gh(["auth", "status"])
    fields = "number,title,body,labels,url,state,closedByPullRequestsReferences"
    issues = run_gh(
        [
            "issue",
            "list",
            "--repo",
            repo,
            "--label",
            label,
            "--state",
            "open",
            "--json",
            fields,
            "--limit",
            "1000",
        ]
    )
    prs = run_gh(
        [
            "pr",
            "list",
            "--repo",
            repo,
            "--state",
            "all",
            "--json",
            "number,headRefName,state,url",
            "--limit",
            "1000",
        ]
    )
    mine = {int(i["number"]) for i in issues}
    outside = {n for i in issues for n in issue_refs(i.get("body")) if n not in mine}
    closed = []
    for n in sorted(outside):  # a blocker not in the list: closed ones are done
        seen = run_gh(["issue", "view", str(n), "--repo", repo, "--json", "state"])
        if str(seen.get("state", "")).upper() != "OPEN":
            closed.append(n)
    return github_tasks(repo, issues, prs, closed)


def cmd_import(args: argparse.Namespace) -> int:
    if args.source == "github":
        return import_github(args)
    return import_prd(args)


def import_github(args: argparse.Namespace) -> int:
    agent = agent_of(args)
    assert agent is not None
    found = github_backlog(args.repo, args.label)
    if args.dry_run:
        emit(
            {
                "dry_run": True,
                "tasks": [
                    {"key": t.key, "title": t.title, "after": list(t.after or [])}
                    for t in found.tasks
                ],
                "skipped": found.skipped,
            }
        )
        return EXIT_OK
    with open_queue(args) as q:
        result = q.enqueue(agent, found.tasks)
    if not result.enqueued and found.tasks:
        print(
            f"afk: nothing new in {args.repo}: its {len(found.tasks)} issues are enqueued already",
            file=sys.stderr,
        )
    emit({**result.to_json(), "skipped": found.skipped})
    return EXIT_OK


def import_prd(args: argparse.Namespace) -> int:
    from .backlogs import prd_tasks
    from .models import NewTask

    agent = agent_of(args)
    assert agent is not None
    text, name = read_prd_file(args.path)
    prd = prd_tasks(text, name)
    tasks = [
        NewTask(
            title=t.title,
            spec=t.spec,
            key=t.key,
            workspace=workspace_request(
                args.repo,
                args.base,
                prd.story_branch(t) if args.repo is not None else None,
                args.verify,
                args.require_changes,
            ),
        )
        for t in prd.tasks
    ]
    if args.dry_run:
        emit(
            {
                "dry_run": True,
                "tasks": [
                    {"key": t.key, "title": t.title, "spec": t.spec, "workspace": t.workspace}
                    for t in tasks
                ],
                "passing": prd.passing,
            }
        )
        return EXIT_OK
    with open_queue(args) as q:
        known = q.states_by_key(str(t.key) for t in tasks)
        check_branches(q, [t.workspace for t in tasks if t.key not in known], lambda n: "")
        result = q.enqueue(agent, tasks)
    out = {**result.to_json(), "passing": prd.passing}
    if not result.enqueued and tasks:
        print(
            f"afk: nothing new in {args.path}: its {len(tasks)} stories not passing "
            "are enqueued already",
            file=sys.stderr,
        )
    emit(out)
    return EXIT_OK


def configure_export(p: Parser) -> None:
    p.description = "Write what is done back where the backlog came from."
    esub = p.add_subparsers(dest="source", required=True, metavar="SOURCE", parser_class=Parser)
    prd = esub.add_parser(
        "prd",
        parents=[common_options()],
        help='a Ralph prd.json: "passes": true for each story whose task is done '
        "(nothing else in the file changes)",
    )
    prd.add_argument("path", metavar="PATH", help="the prd.json it was imported from")
    prd.add_argument(
        "--dry-run", action="store_true", help="print the stories it would mark; write nothing"
    )


def cmd_export(args: argparse.Namespace) -> int:
    from .backlogs import prd_key, prd_with_passes, read_prd, story_ids

    text, name = read_prd_file(args.path)
    doc, prd_name = read_prd(text, name)
    ids = story_ids(doc, name)
    with open_queue(args) as q:
        states = q.states_by_key(prd_key(prd_name, sid) for sid in ids)
    done = [sid for sid in ids if states.get(prd_key(prd_name, sid)) == "done"]
    new_text, flipped = prd_with_passes(text, name, done)
    if flipped and not args.dry_run:
        tmp = f"{args.path}.afk-{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(new_text)
            shutil.copymode(args.path, tmp)
            os.replace(tmp, args.path)  # whole or not at all
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise BadInput(f"cannot write {args.path}: {exc.strerror or exc}") from None
    emit({"passes": flipped, "written": bool(flipped) and not args.dry_run})
    return EXIT_OK


def account_of(args: argparse.Namespace) -> str | None:
    """--account, else AFK_ACCOUNT (unset or empty: none). A flag given but
    blank is refused, not read as "no account"."""
    from .checks import check_id

    if args.account is not None:
        return check_id("--account", args.account)
    return os.environ.get("AFK_ACCOUNT") or None


def configure_claim(p: Parser) -> None:
    agent_option(p)
    runner_option(p)
    lease_option(p)
    account_option(p)


def cmd_claim(args: argparse.Namespace) -> int:
    from .errors import AccountParked

    agent = agent_of(args)
    assert agent is not None
    with open_queue(args) as q:
        try:
            claimed = q.take(
                agent, runner=runner_of(args), lease_seconds=args.lease, account=account_of(args)
            )
        except AccountParked as parked:
            emit(parked.to_json())
            print(f"afk: {parked}", file=sys.stderr)
            return EXIT_PARKED
        if claimed.task is None:
            emit({"next_at": claimed.next_at})
            print(f"afk: nothing to claim for agent {agent!r}", file=sys.stderr)
            return EXIT_EMPTY
        emit({**claimed.task.to_json(), **claim_workspace(q, claimed.task, args.config)})
    return EXIT_OK


def claim_workspace(q: Queue, task: Task, config: str | None) -> dict[str, Any]:
    """A claimed task's worktree (made at its first claim), as `afk claim`
    prints it; a worktree that cannot be made gives the task back, paused."""
    if task.workspace is None:
        return {}
    from . import workspaces
    from .config import load_all
    from .outcome import Outcome

    settings = load_all(config)
    try:
        ws = workspaces.prepare(q.db, task.id, task.title, settings.loop.ports_per_task)
    except workspaces.WorkspaceError as exc:
        q.release(task, f"paused: {exc}", outcome=Outcome.CANNOT_START)
        raise
    return {} if ws is None else {"workspace": {**ws.to_json(), "env": ws.env()}}


def configure_checkpoint(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--patch", required=True, help="JSON object, or @FILE")


def cmd_checkpoint(args: argparse.Namespace) -> int:
    patch = parse_object(args.patch, "--patch")
    task_id, token = task_of(args)
    with open_queue(args) as q:
        emit(q.checkpoint(task_id, patch, token=token).to_json())
    return EXIT_OK


def configure_heartbeat(p: Parser) -> None:
    fenced_options(p)


def cmd_heartbeat(args: argparse.Namespace) -> int:
    task_id, token = task_of(args)
    with open_queue(args) as q:
        emit(q.heartbeat(task_id, token=token).to_json())
    return EXIT_OK


def configure_done(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--result", help="JSON, or @FILE")
    p.add_argument("--next", action="store_true", help=NEXT_HELP)


def cmd_done(args: argparse.Namespace) -> int:
    result = parse_json(args.result, "--result") if args.result is not None else None
    task_id, token = task_of(args)
    with open_queue(args) as q:
        if args.next:
            return emit_next(q.done(task_id, result, token=token, claim_next=True))
        emit(q.done(task_id, result, token=token).to_json())
    return EXIT_OK


def configure_fail(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--error", required=True, help="what went wrong, as the digest will show it")
    p.add_argument("--next", action="store_true", help=NEXT_HELP)


def cmd_fail(args: argparse.Namespace) -> int:
    task_id, token = task_of(args)
    with open_queue(args) as q:
        if args.next:
            return emit_next(q.fail(task_id, args.error, token=token, claim_next=True))
        emit(q.fail(task_id, args.error, token=token).to_json())
    return EXIT_OK


def emit_next(task: Task | None) -> int:
    """What `done --next` and `fail --next` print: the next task, as `claim`
    prints it, or exit 3."""
    if task is None:
        print("afk: finished; nothing to claim next", file=sys.stderr)
        return EXIT_EMPTY
    emit(task.to_json())
    return EXIT_OK


def configure_pause(p: Parser) -> None:
    agent_option(p)
    runner_option(p)
    p.add_argument(
        "id",
        nargs="?",
        help="pause only this task (needs --token; with no "
        "id, --agent or --runner: AFK_TASK_ID and AFK_TASK_TOKEN)",
    )
    token_option(p)


def cmd_pause(args: argparse.Namespace) -> int:
    one_task = args.id is not None or (
        args.runner is None and args.agent is None and "AFK_TASK_ID" in os.environ
    )
    if not one_task and runner_of(args) is None and agent_of(args, required=False) is None:
        raise BadInput(
            "pause needs what to pause: a task (ID --token T, or AFK_TASK_ID), --agent, or --runner"
        )
    with open_queue(args) as q:
        if one_task:
            task_id, token = task_of(args)
            q.pause_task(task_id, token=token)
            emit({"paused": 1})
            return EXIT_OK
        runner = runner_of(args)
        agent = agent_of(args, required=runner is None)
        emit({"paused": len(q.pause(agent, runner=runner))})
    return EXIT_OK


def configure_status(p: Parser) -> None:
    agent_option(p)


def cmd_status(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        emit(q.status(agent_of(args, required=False)))
    return EXIT_OK


def configure_show(p: Parser) -> None:
    p.add_argument("id")


def cmd_show(args: argparse.Namespace) -> int:
    from . import workspaces

    with open_queue(args) as q:
        task, history = q.show(args.id)
        runs = q.runs(task)
        costs = [r["cost_usd"] for r in runs if r["cost_usd"] is not None]
        emit(
            {
                **task.to_json(),
                "workspace": workspaces.view(q.db, task.id, task.workspace),
                "cost_usd": round(sum(costs), 6) if costs else None,
                "history": history,
                "runs": runs,
                "questions": q.task_questions(task),
                "after": q.waits_for(task),
            }
        )
    return EXIT_OK


def configure_review(p: Parser) -> None:
    agent_option(p)
    p.add_argument("--since", help="done in the last DURATION (e.g. 12h, 7d; default 24h)")
    p.add_argument("--json", action="store_true", help="one JSON list instead of text")


def cmd_review(args: argparse.Namespace) -> int:
    from . import workspaces

    since = parse_duration(args.since) if args.since is not None else 86400.0
    if since > MAX_SINCE:
        raise BadInput(f"--since {args.since} is longer than 100 years")
    with open_queue(args) as q:
        items = workspaces.to_review(
            q.db, agent=agent_of(args, required=False), since_seconds=since
        )
    if args.json:
        emit(items)
        return EXIT_OK
    for item in items:
        print(review_text(item))
    if not items:
        print("nothing to review: no done task with a workspace in that time", file=sys.stderr)
    return EXIT_OK


def review_text(item: dict[str, Any]) -> str:
    """One task to review, as a person reads it in a terminal."""
    head = f"{item['title']} ({item['agent_id']}, {item['id'][:8]})"
    if item.get("error"):
        return f"{head}\n  {item['error']}\n"
    d = item["diffstat"]
    lines = [
        head,
        f"  branch {item['branch']}: {item['commits']} commit(s), {d['files']} file(s) "
        f"+{d['insertions']} -{d['deletions']}" + ("" if item["changes"] else " (no changes)"),
    ]
    if item.get("check"):
        check = item["check"]
        lines.append(f"  check: {'passed' if check.get('status') == 0 else 'failed'}")
    if item.get("pr"):
        pr = item["pr"]
        draft = ", draft" if pr.get("isDraft") else ""
        state = f"{str(pr.get('state')).lower()}{draft}"
        lines.append(f"  pull request #{pr.get('number')} ({state}): {pr.get('url')}")
    if item.get("behind_by"):
        lines.append(f"  {item['base']} has {item['behind_by']} commit(s) since its base")
    if item.get("conflicts"):
        lines.append(f"  conflicts with {item['base']}: {', '.join(item['conflicts'])}")
    if item.get("cost_usd") is not None:
        lines.append(f"  cost ${item['cost_usd']:.2f}")
    return "\n".join(lines) + "\n"


def configure_gc(p: Parser) -> None:
    p.add_argument("--dry-run", action="store_true", dest="dry_run", help="say, do nothing")
    p.add_argument(
        "--older-than",
        dest="older_than",
        metavar="DURATION",
        help="only tasks done longer ago than this (seconds, or 30m, 12h, 7d)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="save and remove the dirty and unmerged ones too (refs/afk/trash/<task>/)",
    )
    p.add_argument("--json", action="store_true", help="the report as JSON")


def cmd_gc(args: argparse.Namespace) -> int:
    from . import workspaces

    older = parse_duration(args.older_than) if args.older_than is not None else 0.0
    with open_queue(args) as q:
        report = workspaces.gc(q.db, older_than=older, force=args.force, dry_run=args.dry_run)
    if args.json:
        emit(report)
        return EXIT_OK
    verb = "would be " if args.dry_run else ""
    for item in report["worktrees"]:
        size = f", {item['bytes'] / 1e6:.1f} MB" if "bytes" in item else ""
        print(f"{item['path']}: {verb}{item['action']} ({item['why']}{size})")
    print(f"{report['bytes'] / 1e6:.1f} MB in {len(report['worktrees'])} worktree(s)")
    return EXIT_OK


def configure_restore(p: Parser) -> None:
    p.add_argument("id", help="the task whose saved worktree comes back")


def cmd_restore(args: argparse.Namespace) -> int:
    from . import workspaces
    from .checks import parse_task_id

    with open_queue(args) as q:
        emit(workspaces.restore(q.db, parse_task_id(args.id)))
    return EXIT_OK


def configure_dead(p: Parser) -> None:
    agent_option(p)
    p.add_argument("--since", help="e.g. 1h, 30m, 7d")


def cmd_dead(args: argparse.Namespace) -> int:
    since = parse_duration(args.since) if args.since is not None else None
    if since is not None and since > MAX_SINCE:
        raise BadInput(f"--since {args.since} is longer than 100 years")
    with open_queue(args) as q:
        emit([t.to_json() for t in q.dead(agent_of(args, required=False), since_seconds=since)])
    return EXIT_OK


def configure_retry(p: Parser) -> None:
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument(
        "--budget-usd",
        type=float,
        dest="budget_usd",
        help="a new budget: also puts back tasks held because they reached theirs",
    )


def cmd_retry(args: argparse.Namespace) -> int:
    who = os.environ.get("USER") or None
    with open_queue(args) as q:
        if args.budget_usd is not None:
            ids = q.rebudget(args.ids, args.budget_usd, who=who)
        else:
            ids = q.retry(args.ids, who=who)
        emit({"retried": [str(i) for i in ids]})
    return EXIT_OK


def configure_ask(p: Parser) -> None:
    p.add_argument("question", help="the question, as a person will read it")
    p.add_argument("id", nargs="?", help="task id (env AFK_TASK_ID)")
    token_option(p)


def cmd_ask(args: argparse.Namespace) -> int:
    """Inside the agent: a question for a person; the task waits for the answer."""
    task_id, token = task_of(args)
    with open_queue(args) as q:
        question_id = q.ask(task_id, args.question, token=token)
        emit({"asked": question_id, "id": task_id})
    print(
        "afk: your task now waits for a person's answer: stop working on it and exit; "
        "the answer comes with the next run's brief",
        file=sys.stderr,
    )
    return EXIT_OK


def configure_answer(p: Parser) -> None:
    p.add_argument("id", help="the task id")
    p.add_argument("answer", help="the answer, as the agent will read it")


def cmd_answer(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        task = q.answer(args.id, args.answer, who=os.environ.get("USER") or None)
        emit({"answered": str(task.id), "state": task.state})
    return EXIT_OK


def configure_questions(p: Parser) -> None:
    agent_option(p)


def cmd_questions(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        emit(q.questions(agent_of(args, required=False)))
    return EXIT_OK


def cmd_reclaim(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        r = q.reclaim()
        emit({"paused": r.paused, "failed": r.failed})
    return EXIT_OK


def configure_db(p: Parser) -> None:
    p.add_argument("action", choices=["status", "start", "stop"])


def cmd_db(args: argparse.Namespace) -> int:
    from . import embedded

    afk_home = embedded.home()
    if args.action == "stop":
        emit({"stopped": embedded.stop(afk_home)})
        return EXIT_OK
    info: embedded.ServerInfo | None
    if args.action == "start":
        info = embedded.ensure_running(afk_home)
    else:
        info = embedded.running(afk_home / "pgdata")
    emit(
        {
            "running": info is not None,
            "pgdata": str(afk_home / "pgdata"),
            "dsn": info.dsn() if info else None,
            "pid": info.pid if info else None,
        }
    )
    return EXIT_OK


def configure_watchdog(p: Parser) -> None:
    p.description = (
        "The watchdog service: reclaim, gauges, poison pills, prune, and Prometheus metrics."
    )
    p.epilog = settings_help()
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    wsub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    wsub.add_parser(
        "run",
        parents=[common_options()],
        help="run the service (until SIGTERM)",
        epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tick = wsub.add_parser(
        "tick",
        parents=[common_options()],
        help="run one job once and exit (non-zero if it failed)",
    )
    from .jobs import JOBS

    tick.add_argument("job", choices=[job.name for job in JOBS if job.tick])


def settings_help() -> str:
    """Every setting with its variable and default, for `afk watchdog --help`."""
    from .config import DigestSettings, LoopSettings, QueueSettings, ServiceSettings, describe

    lines = ["settings (env var, default):"]
    for cls in (ServiceSettings, QueueSettings, LoopSettings, DigestSettings):
        for env, default, text in describe(cls):
            lines.append(f"  {env:<28} {default!s:<16} {text}")
    lines += [
        "  AFK_CONFIG                   -                a TOML file of the same settings "
        "(lower-case names; env vars win)",
        "  AFK_DSN                      embedded         PostgreSQL connection string",
        "  AFK_LOG_LEVEL                INFO/WARNING     log level (the service: INFO; "
        "other commands: WARNING)",
    ]
    return "\n".join(lines)


def cmd_watchdog(args: argparse.Namespace) -> int:
    from . import logs
    from .config import load_all
    from .service import Watchdog

    settings = load_all(args.config)
    settings.check_service()
    dsn = database_of(args, settings)
    logs.configure(os.environ.get("AFK_LOG_LEVEL", "INFO"), settings.service.log_format, dsn)
    watchdog = Watchdog(dsn, settings)
    if args.action == "tick":
        outcome = watchdog.run_job(args.job)
        watchdog.close()
        emit(outcome.to_json())
        return EXIT_OK if outcome.ok else EXIT_ERROR

    import threading

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    clean = watchdog.run(stop)
    if not clean:
        # a job thread is stuck in a statement: do not wait for it at exit
        sys.stderr.flush()
        os._exit(EXIT_OK)
    return EXIT_OK


def configure_once(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--name", required=True, help="the effect's name, unique within the task")
    p.set_defaults(command=[])
    p.usage = "afk once [ID] [--token T] --name NAME -- COMMAND [ARG...]"


def cmd_once(args: argparse.Namespace) -> int:
    from .agent import run_once
    from .errors import LeaseLost

    command = list(args.command)
    task_id, token = task_of(args)
    with open_queue(args) as q:
        try:
            status, out, note = run_once(q, task_id, token, args.name, command, dict(os.environ))
        except LeaseLost as lost:
            if lost.stdout:
                sys.stdout.buffer.write(lost.stdout)
                sys.stdout.flush()
            raise
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if note:
        print(f"afk: {note}", file=sys.stderr)
    return status


def configure_hooks(p: Parser) -> None:
    p.add_argument("agent_kind", choices=list(SETTINGS), help="the agent")
    p.add_argument(
        "--install",
        metavar="PATH",
        help="merge into this settings file (e.g. .claude/settings.json, .codex/hooks.json, "
        ".gemini/settings.json, .cursor/hooks.json, .github/hooks/afk.json)",
    )
    p.add_argument(
        "--gate",
        action="store_true",
        help="Stop blocks (a few times at most) a "
        "session that still holds a task it claimed itself",
    )
    p.add_argument(
        "--transport",
        choices=["command", "http"],
        default="command",
        help="claude only: http posts each hook to the watchdog service (AFK_HOOK_HTTP) "
        "instead of starting a process; SessionStart stays a command",
    )
    p.add_argument(
        "--fail-closed",
        action="store_true",
        dest="fail_closed",
        help="with --transport http: a PreToolUse the service does not answer blocks the "
        "tool call (Claude Code 2.1.295 and later)",
    )


def cmd_hooks(args: argparse.Namespace) -> int:

    from . import harnesses

    # the hooks run afk's entry point by the interpreter this afk runs in
    afk = os.path.abspath(sys.executable)
    if args.transport == "http" or args.fail_closed:
        ours = http_hook_settings(args, afk)
    else:
        ours = harnesses.SETTINGS[args.agent_kind](afk, args.gate, hook_database_args(args))
    if args.install is None:
        emit(ours)
        return EXIT_OK
    written = harnesses.install(Path(args.install), ours)
    print(f"afk: installed the {', '.join(ours['hooks'])} hooks in {written}", file=sys.stderr)
    return EXIT_OK


def hook_token_of(settings: Any) -> dict[str, str]:
    """AFK_HOOK_TOKEN for the agents of a loop, when its settings hold one
    (their HTTP hooks send it): an environment's own wins."""
    token = settings.service.hook_token
    return {"AFK_HOOK_TOKEN": token} if token and "AFK_HOOK_TOKEN" not in os.environ else {}


def http_hook_settings(args: argparse.Namespace, afk: str) -> dict[str, Any]:
    """`afk hooks claude --transport http`: the service's address from the
    settings (AFK_HOOK_HTTP), the token by name only."""
    from . import harnesses
    from .config import load_all

    if args.agent_kind != "claude":
        raise BadInput("--transport http is for claude (Claude Code's HTTP hooks)")
    if args.transport != "http":
        raise BadInput("--fail-closed goes with --transport http")
    service = load_all(args.config).service
    if not service.hook_http:
        raise BadInput(
            "--transport http needs the watchdog service's hook address: set AFK_HOOK_HTTP "
            "(e.g. 127.0.0.1:18735) and AFK_HOOK_TOKEN, for the service and here"
        )
    host, port = service.hook_http_host_port()
    shown = f"[{host}]" if ":" in host else host
    return harnesses.claude_http_settings(
        afk,
        args.gate,
        hook_database_args(args),
        f"http://{shown}:{port}",
        fail_closed=args.fail_closed,
    )


def hook_database_args(args: argparse.Namespace) -> tuple[str, ...]:
    """What the installed hooks need to reach the database this command was
    told of: ``--config`` as an absolute path, ``--dsn`` unless it holds a
    password (a settings file is no place for one)."""
    from .errors import dsn_secrets

    out: tuple[str, ...] = ()
    if args.config is not None:
        path = Path(args.config)
        if not path.is_file():
            raise BadInput(f"--config {args.config}: no such file")
        out += ("--config", str(path.resolve()))
    if args.dsn is not None:
        if not args.dsn.strip():
            raise BadInput("--dsn is empty")
        if dsn_secrets(args.dsn):
            raise BadInput(
                "--dsn holds a password, which would be written into the settings file: "
                "put the DSN in a config file and pass --config instead"
            )
        out += ("--dsn", args.dsn)
    return out


def configure_hook(p: Parser) -> None:
    p.add_argument(
        "event", nargs="?", choices=["stop"], help="accepted for settings written by older versions"
    )
    p.add_argument("--gate", action="store_true", help="the Stop completion gate")
    p.add_argument(
        "--harness",
        choices=HARNESSES,
        default="claude",
        help="whose payloads (claude: Claude Code and Codex CLI; gemini: Gemini CLI; "
        "cursor: Cursor; copilot: GitHub Copilot CLI)",
    )


def cmd_hook(args: argparse.Namespace) -> int:
    """An agent hook: one payload on stdin, acted on by its hook_event_name.
    Always exits 0, within the hook's timeout: a hook must never wedge the
    agent. The only refusals are a deliberate deny (PreToolUse) or block
    (the Stop gate), written as JSON on stdout."""
    from . import hooklink, hooks
    from .errors import redact

    signal.signal(signal.SIGALRM, hooklink.give_up)
    # the deadline counts from the process's start (`afk hook` may have asked
    # the watchdog service first)
    signal.alarm(signal.alarm(0) or hooklink.HOOK_DEADLINE)
    hooklink.touch_alive(os.environ)
    try:
        raw = getattr(args, "payload", None)
        raw = raw if raw is not None else hooklink.read_stdin()
        ctx = hooks.context(hooks.parse_payload(raw), args.gate, args.event, args.harness)
        if ctx is None:
            print("afk hook: ignored: not an event afk handles", file=sys.stderr)
            return EXIT_OK
        if hooks.detached(ctx) and _detach():
            return EXIT_OK  # the agent does not wait: the work goes on in the child
        from .config import load_all

        settings = load_all(args.config)
        from .resolve import running_dsn

        dsn = running_dsn(args.dsn, settings=settings, note=say)
        if dsn is None:
            print(
                "afk hook: warning: no database: the embedded server is not running "
                "(`afk db start`) and no DSN is set; nothing was recorded",
                file=sys.stderr,
            )
            return EXIT_OK
        said, notes = hooks.respond(ctx, dsn, settings)
        for line in notes:
            print(line, file=sys.stderr)
        if said:  # (nothing at all where the harness would not read it)
            emit(said)
    except AfkError as exc:
        print(f"afk hook: warning: {exc}; nothing was changed", file=sys.stderr)
    except Exception as exc:  # never fail the agent's hook, never print a secret
        print(
            f"afk hook: warning: {type(exc).__name__}: {redact(str(exc))}; nothing was changed",
            file=sys.stderr,
        )
    finally:
        signal.alarm(0)
    return EXIT_OK


def parse_when(text: str) -> Any:
    """An ISO 8601 time; one without an offset is read in this machine's zone
    (TZ first), never in whichever zone the database happens to have."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"--until {text!r} is not an ISO 8601 time (e.g. 2026-12-01T05:00+01:00)"
        ) from None
    if when.tzinfo is None:  # a wall-clock time of this machine's zone (TZ first)
        when = when.replace(tzinfo=local_zone())
    return when


def configure_limit(p: Parser) -> None:
    p.add_argument("--account", help="the account (an agent login, an API key)")
    p.add_argument("--until", help="park until this ISO 8601 time")
    p.add_argument("--reason", help="why, with --until")
    p.add_argument("--clear", action="store_true", help="unpark the account")


def cmd_limit(args: argparse.Namespace) -> int:
    from .accounts import Accounts

    if args.clear and (args.until is not None or args.reason is not None):
        raise BadInput("--clear cannot be combined with --until or --reason")
    if (args.clear or args.until is not None) and args.account is None:
        raise BadInput("--account is needed with --until or --clear")
    if args.reason is not None and args.until is None:
        raise BadInput("--reason goes with --until")
    until = parse_when(args.until) if args.until is not None else None
    with open_queue(args) as q:
        accounts = Accounts(q.db)
        if args.clear:
            cleared = accounts.clear(args.account, who=os.environ.get("USER"))
            emit({"cleared": [p.to_json() for p in cleared]})
            if not cleared:
                print(f"afk: account {args.account!r} was not parked", file=sys.stderr)
            return EXIT_OK
        if until is not None:
            reason = args.reason or f"parked by hand by {os.environ.get('USER') or 'a person'}"
            emit(accounts.park_by_hand(args.account, reason, until).to_json())
            return EXIT_OK
        emit([p.to_json() for p in accounts.parked(args.account)])
    return EXIT_OK


def configure_loop(p: Parser) -> None:
    agent_option(p)
    runner_option(p)
    account_option(p)
    lease_option(p)
    p.add_argument("--wait", action="store_true", help="keep running, waiting for new tasks")
    p.add_argument("--max-tasks", type=int, dest="max_tasks", help="stop after this many runs")
    p.add_argument(
        "--stall-after",
        type=duration_arg,
        dest="stall_after",
        metavar="DURATION",
        help="stop a run whose agent printed no line and fired no hook for this long "
        "(90s, 15m, 2h; env AFK_STALL_SECONDS, default 15m)",
    )
    p.add_argument(
        "--max-run",
        type=duration_arg,
        dest="max_run",
        metavar="DURATION",
        help="stop a run still going after this long, an attempt spent "
        "(env AFK_MAX_RUN_SECONDS; default: no cap)",
    )
    workspace_options(p, branch=False)
    p.set_defaults(command=[])
    p.usage = (
        "afk loop --agent A [--account NAME] [--lease S] [--wait] [--max-tasks N] "
        "[--stall-after DURATION] [--max-run DURATION] [--repo PATH] [--verify CMD] "
        "[--require-changes] -- CMD [ARG...]"
    )
    p.epilog = (
        "exit 0 when nothing is left, 5 when the account needs a person, 130/143 when stopped"
    )


def cmd_loop(args: argparse.Namespace) -> int:
    from .accounts import DEFAULT_ACCOUNT, Accounts
    from .config import load_all
    from .db import Database
    from .errors import scrub
    from .loop import Loop, LoopOptions, agent_variables

    if not args.command:
        raise BadInput("no agent command given: afk loop --agent A -- CMD [ARG...]")
    if args.max_tasks is not None and args.max_tasks < 1:
        raise BadInput("--max-tasks must be at least 1")
    agent = agent_of(args)
    assert agent is not None
    settings = load_all(args.config)
    dsn = database_of(args, settings)
    from .delivery import timezone_of

    zone = timezone_of(settings.digest)
    options = LoopOptions(
        agent=agent,
        command=list(args.command),
        account=account_of(args) or DEFAULT_ACCOUNT,
        lease=args.lease,
        wait=args.wait,
        max_tasks=args.max_tasks,
        runner=runner_of(args),
        env={**agent_variables(args.dsn, args.config), **hook_token_of(settings)},
        day_zone=getattr(zone, "key", None) or str(zone),
        stall_after=args.stall_after,
        max_run=args.max_run,
        workspace=workspace_request(args.repo),
        verify=checked_verify(args.verify),
        require_changes=args.require_changes,
    )
    from .checks import check_id
    from .queue import Queue

    check_id("account", options.account)
    queue = Queue(Database(dsn, pool_size=2), settings=settings.queue)
    accounts = Accounts(queue.db)
    loop = Loop(
        queue,
        accounts,
        settings.loop,
        options,
        tz=local_zone(),
        scrub=lambda text: scrub(text, dsn),
        alert=account_alert(queue.db, settings),
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, loop.request_stop)
    try:
        return loop.run()
    finally:
        queue.close()


def local_zone() -> Any:
    """The zone a clock time in an agent's message is read in: the host's
    (TZ first)."""
    import tzlocal

    return tzlocal.get_localzone()


def account_alert(db: Any, settings: Any) -> Any:
    """Sends a parking that needs a person through the alert destinations."""
    if not settings.digest.destinations():
        return None

    def send(parking: Any) -> None:
        from .delivery import alert_account

        alert_account(db, settings.digest, parking)

    return send


def _detach() -> bool:
    """Fork: True in the parent, which exits at once; False in the child,
    which goes on in a session of its own with no terminal and no pipes. For a
    hook whose output is ignored and which the agent does not wait for:
    Claude Code (2.1.332, ``-p``) ends a StopFailure hook with SIGTERM as it
    exits, within milliseconds."""
    if os.fork():
        return True
    os.setsid()
    from .hooklink import HOOK_DEADLINE

    signal.alarm(HOOK_DEADLINE)  # (an alarm is not inherited across a fork)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    return False


def configure_doctor(p: Parser) -> None:
    p.add_argument("--json", action="store_true", help="the checks as a JSON list")
    p.add_argument("--project", help="the project folder to look in (default: here)")
    p.add_argument(
        "--live",
        action="store_true",
        help="fire each installed hook as its agent would, for a task that does not exist: "
        "each must answer in its shape, in time, through the service",
    )


def cmd_doctor(args: argparse.Namespace) -> int:
    from . import doctor
    from .config import load_all

    settings = load_all(args.config)
    checks = doctor.run(
        database_of(args, settings),
        settings,
        Path(args.project or os.getcwd()),
        Path.home(),
        # as a hook of this command's database asks the service
        hook_argv=[
            *(["--config", str(Path(args.config).resolve())] if args.config else []),
            *(["--dsn", args.dsn] if args.dsn else []),
        ],
        live=args.live,
    )
    if args.json:
        emit([c.to_json() for c in checks])
    else:
        for check in checks:
            print(check.line())
    return EXIT_OK if all(c.ok for c in checks) else EXIT_ERROR


def configure_resume_brief(p: Parser) -> None:
    p.add_argument("id", nargs="?", help="task id (env AFK_TASK_ID)")


def cmd_resume_brief(args: argparse.Namespace) -> int:
    from .agent import resume_brief

    task_id = args.id if args.id is not None else os.environ.get("AFK_TASK_ID")
    if task_id is None:
        raise BadInput("a task id is needed: give it, or set AFK_TASK_ID")
    with open_queue(args) as q:
        sys.stdout.write(resume_brief(q, task_id))
    return EXIT_OK


def configure_digest(p: Parser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=["send", "status"],
        help="send: deliver the due digest now; status: recent deliveries",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be sent now")
    p.add_argument(
        "--format",
        choices=["slack", "html", "text", "webhook"],
        help="of the printed digest (default text)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with send: send even if this period's digest was delivered",
    )


def cmd_digest(args: argparse.Namespace) -> int:
    from . import delivery
    from .config import load_all
    from .db import Database

    # every check of the arguments first: bad input reaches no database
    if args.force and args.action != "send":
        raise BadInput("--force goes with `afk digest send`")
    if args.dry_run and args.action is not None:
        raise BadInput(
            "--dry-run prints a digest; it cannot be combined with send, status or --force"
        )
    if args.format is not None and args.action is not None:
        raise BadInput("--format goes with --dry-run (or no action): what is printed")
    settings = load_all(args.config)
    db = Database(database_of(args, settings))
    try:
        if args.dry_run or args.action is None:
            sys.stdout.write(delivery.dry_run(db, settings.digest, args.format or "text"))
            return EXIT_OK
        if args.action == "status":
            emit(delivery.status(db))
            return EXIT_OK
        if not settings.digest.destinations():
            from .config import no_destination

            raise BadInput(no_destination())
        outcomes = delivery.run_once(db, settings.digest, force=args.force)
        emit({"deliveries": [o.to_json() for o in outcomes]})
        if not outcomes:
            print(
                "afk: nothing to send: this period's digest was delivered already, is "
                "waiting for a retry, or is being sent (--force sends anyway)",
                file=sys.stderr,
            )
        return EXIT_OK if all(o.state == "delivered" for o in outcomes) else EXIT_ERROR
    finally:
        db.close()


def cmd_demo(args: argparse.Namespace) -> int:
    from .config import load_all
    from .demo import run

    settings = load_all(args.config)
    return run(database_of(args, settings))


# -- parser -----------------------------------------------------------------


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


#: every command: its function, its one-line help, and what adds its own
#: arguments (``configure_<command>``, beside the command)
COMMANDS: dict[
    str,
    tuple[Callable[[argparse.Namespace], int], str, Callable[[Parser], None] | None],
] = {
    "migrate": (
        cmd_migrate,
        "create or upgrade the schema (safe to repeat)",
        None,
    ),
    "enqueue": (
        cmd_enqueue,
        "add tasks to an agent's backlog",
        configure_enqueue,
    ),
    "claim": (
        cmd_claim,
        "take the agent's next task (exit 3 if none, with next_at; exit 5 if the "
        "account is parked)",
        configure_claim,
    ),
    "loop": (
        cmd_loop,
        "drain the agent's backlog: run CMD ARG... PROMPT per task, reading "
        "usage limits, outages and logins from what it says",
        configure_loop,
    ),
    "limit": (
        cmd_limit,
        "parked accounts: list them, park one by hand, or clear one",
        configure_limit,
    ),
    "checkpoint": (
        cmd_checkpoint,
        "merge a JSON object into the checkpoint",
        configure_checkpoint,
    ),
    "heartbeat": (
        cmd_heartbeat,
        "refresh the lease",
        configure_heartbeat,
    ),
    "done": (
        cmd_done,
        "finish the task",
        configure_done,
    ),
    "fail": (
        cmd_fail,
        "report a failure (retried after a backoff)",
        configure_fail,
    ),
    "pause": (
        cmd_pause,
        "pause running tasks (a clean stop spends no attempt)",
        configure_pause,
    ),
    "status": (
        cmd_status,
        "task counts per state",
        configure_status,
    ),
    "show": (
        cmd_show,
        "one task with its history",
        configure_show,
    ),
    "dead": (
        cmd_dead,
        "failed tasks",
        configure_dead,
    ),
    "import": (
        cmd_import,
        "import a backlog written elsewhere: afk import prd PATH (a Ralph prd.json)",
        configure_import,
    ),
    "export": (
        cmd_export,
        "write what is done back: afk export prd PATH (passes: true per done story)",
        configure_export,
    ),
    "review": (
        cmd_review,
        "the done tasks' work to review: branch, commits, what changed, the check, "
        "the pull request, how far behind and what conflicts with the base",
        configure_review,
    ),
    "gc": (
        cmd_gc,
        "remove the worktrees of done tasks that are merged and clean; --force saves "
        "the rest first (afk restore brings one back)",
        configure_gc,
    ),
    "restore": (
        cmd_restore,
        "bring back a worktree that afk gc --force saved, byte for byte",
        configure_restore,
    ),
    "retry": (
        cmd_retry,
        "put failed tasks back to todo",
        configure_retry,
    ),
    "ask": (
        cmd_ask,
        "inside the agent: ask a person; the task waits for the answer",
        configure_ask,
    ),
    "answer": (
        cmd_answer,
        "answer a task's question: it goes back to todo",
        configure_answer,
    ),
    "questions": (
        cmd_questions,
        "the open questions of the agents",
        configure_questions,
    ),
    "reclaim": (
        cmd_reclaim,
        "reclaim expired leases once",
        None,
    ),
    "db": (
        cmd_db,
        "the embedded PostgreSQL server",
        configure_db,
    ),
    "demo": (
        cmd_demo,
        "a crash and a resume on a small backlog, end to end",
        None,
    ),
    "once": (
        cmd_once,
        "run a command as a side effect of the task, at most once: "
        "later runs replay its recorded stdout and exit status",
        configure_once,
    ),
    "hooks": (
        cmd_hooks,
        "print (or install) agent hook settings",
        configure_hooks,
    ),
    "hook": (
        cmd_hook,
        "run as an agent hook: reads one hook payload on stdin and "
        "acts on its hook_event_name; always exits 0",
        configure_hook,
    ),
    "doctor": (
        cmd_doctor,
        "check the setup: the database, the watchdog service, the clock, the settings, "
        "and the agents' hook settings (exit 1 with a line per problem)",
        configure_doctor,
    ),
    "resume-brief": (
        cmd_resume_brief,
        "a Markdown note for the next session",
        configure_resume_brief,
    ),
    "digest": (
        cmd_digest,
        "the morning digest: print it, send it, or show deliveries",
        configure_digest,
    ),
    "watchdog": (
        cmd_watchdog,
        "the watchdog service",
        configure_watchdog,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = Parser(
        prog="afk",
        description="A durable task queue on PostgreSQL for unattended coding agents.",
        parents=[common],
        epilog="Exit status: 0 ok, 2 bad usage or input, 3 nothing to claim, "
        "4 lease lost, 5 account parked, 6 effect in doubt, 1 anything else.",
    )
    parser.add_argument("--version", action="version", version=f"afk {package_version()}")
    sub = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND", parser_class=Parser
    )
    parser.commands = sub.choices  # type: ignore[attr-defined]
    for name, (func, help, configure) in COMMANDS.items():
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(func=func)
        if configure is not None:
            configure(p)
    return parser


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


def main(argv: Sequence[str] | None = None, payload: bytes | None = None) -> int:
    """The command line; ``payload`` is a hook's stdin, when the entry point
    (:mod:`watchdog.__main__`) read it already."""
    from .logs import level_of

    logging.basicConfig(
        level=level_of(os.environ.get("AFK_LOG_LEVEL"), "WARNING"),
        format="afk: %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    argv = list(sys.argv[1:] if argv is None else argv)
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
    if "--" in argv and command_word(argv[: argv.index("--")]) in ("once", "loop"):
        # afk once|loop ... -- COMMAND ARGS: everything after -- is the command
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, with its own usage
        commands = getattr(parser, "commands", {})
        where = commands.get(getattr(args, "subcommand", None), parser)
        where.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.func in (cmd_once, cmd_loop):
        args.command = command
    for name in ("dsn", "config"):
        if not hasattr(args, name):
            setattr(args, name, None)
    return run_command(args)


def hook_args(argv: list[str]) -> argparse.Namespace | None:
    """`afk hook [stop] [--gate] [--config FILE] [--dsn DSN]`, read without
    building the whole parser (some 20 ms of every tool call of an agent);
    None for anything else, which the full parser then reads."""
    from .hooklink import parse_argv

    parsed = parse_argv(argv)
    if parsed is None or parsed["harness"] not in HARNESSES:
        return None
    if any(isinstance(v, str) and not is_utf8(v) for v in parsed.values()):
        return None
    return argparse.Namespace(func=cmd_hook, payload=None, **parsed)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command: an AfkError is one line and its exit status."""
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except AfkError as exc:
        print(f"afk: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # whoever read our output stopped (`afk dead | head -1`): not an error
        # worth a traceback; stdout goes nowhere so that the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug of ours: one line, never a traceback or a secret
        from .errors import redact

        logger.debug("internal error", exc_info=True)
        print(
            f"afk: internal error: {type(exc).__name__}: {redact(str(exc))} "
            "(AFK_LOG_LEVEL=DEBUG shows where)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
