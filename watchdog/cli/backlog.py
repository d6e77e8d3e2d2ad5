"""The commands that fill a backlog and read it back: enqueue, import
(a Ralph prd.json, GitHub issues) and export."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re

#: the longest line of an --file, bytes (a spec is 1 MiB at most by default;
#: a file with no newline, /dev/zero say, is refused here, not read for good)
import shutil
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..checks import WORKSPACE_FIELDS
from ..config import parse_duration
from ..errors import EXIT_OK, AfkError, BadInput
from ..text import one_line
from .common import (
    Parser,
    Resources,
    agent_of,
    agent_option,
    common_options,
    emit,
    parse_object,
    parse_when,
    workspace_options,
    workspace_request,
)

MAX_LINE = 4 << 20
#: a --file at most: bytes and lines (an endless input is refused in
#: bounded time and memory)
MAX_FILE = 64 << 20
MAX_LINES = 1_000_000


def read_lines(path: str) -> list[str]:
    lines: list[str] = []
    try:
        source = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        with source:
            total = 0
            while line := source.readline(MAX_LINE + 1):
                if len(line) > MAX_LINE:
                    raise BadInput(
                        f"{path}: line {len(lines) + 1} is longer than {MAX_LINE} bytes; "
                        "nothing was enqueued"
                    )
                total += len(line)
                if total > MAX_FILE or len(lines) >= MAX_LINES:  # (an endless input)
                    raise BadInput(
                        f"{path} is longer than {MAX_FILE} bytes or {MAX_LINES} lines; "
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
                "ask_for",
                "requires",
                "profiles",
                "harness",
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
            seconds = parse_duration(text[1:])
        except BadInput:
            raise BadInput(f"{what} {text!r} is not +DURATION (+90s, +30m, +2h, +1d)") from None
        from ..models import MAX_START

        if seconds > MAX_START:  # (said with the flag's name, P30)
            days = MAX_START // 86400
            raise BadInput(f"{what} {text!r} is more than a year ahead (+{days}d at most)")
        return {"not_before": seconds}
    try:
        return {"not_before": parse_when(text)}
    except BadInput:
        raise BadInput(
            f"{what} {text!r} is not an ISO 8601 time or +DURATION (+2h, +30m)"
        ) from None


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
    p.add_argument(
        "--ask-for",
        action="append",
        dest="ask_for",
        metavar="RULE",
        help="a call of its runs that a person must approve, as Claude Code writes a "
        "permission rule (Bash(git push:*), WebFetch, mcp__deploy__*); give it again for more",
    )
    p.add_argument(
        "--requires",
        action="append",
        metavar="LABEL",
        help="taken only by a loop that advertises this label (afk loop --label gpu); "
        "give it again for more",
    )
    p.add_argument(
        "--profiles",
        metavar="NAME,NAME",
        help="run only under one of these profiles (afk profile list): a loop takes it "
        "when one of them is among its --profile and not parked",
    )
    p.add_argument(
        "--harness",
        metavar="HARNESS",
        help="run only under a profile of this harness (claude, codex, gemini, cursor, "
        "copilot): the required label harness:NAME, which a loop offers for its profiles",
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
    from .. import workspaces

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


def cmd_enqueue(args: argparse.Namespace, res: Resources) -> int:
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
        if args.ask_for is not None:
            raise BadInput("--file takes an ask_for key per line, not --ask-for")
        if args.requires is not None:
            raise BadInput("--file takes a requires key per line, not --requires")
        if args.profiles is not None or args.harness is not None:
            raise BadInput("--file takes profiles and harness keys per line, not --profiles")
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
                "ask_for": args.ask_for,
                "requires": args.requires,
                "profiles": None if args.profiles is None else args.profiles.split(","),
                "harness": args.harness,
            }
        ]
    if args.max_attempts is not None:
        for task in tasks:
            task.setdefault("max_attempts", args.max_attempts)
    assert agent is not None
    q = res.queue
    named = sorted({n for t in tasks if isinstance(t.get("profiles"), list) for n in t["profiles"]})
    if named and all(isinstance(n, str) for n in named):
        from ..agents.profiles import Profiles

        Profiles(q.db).named(named)  # (an unknown one: one line, nothing enqueued)
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
    from ..backlogs import MAX_PRD_BYTES

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


def github_backlog(repo: str, label: str, max_spec_bytes: int | None = None) -> Any:
    """The open issues of ``repo`` with ``label`` as tasks, read through gh."""

    from ..backlogs import gh_shaped, github_tasks, issue_refs

    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
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
    gh_shaped(issues, prs)
    mine = {int(i["number"]) for i in issues}
    outside = {n for i in issues for n in issue_refs(i.get("body")) if n not in mine}
    closed: list[int] = []
    if outside:  # a blocker not in the list: closed ones are done (one call, P24)
        listed = run_gh(
            ["issue", "list", "--repo", repo, "--state", "closed", "--json", "number",
             "--limit", "1000"]
        )  # fmt: skip
        gh_shaped([], listed)  # (numbered objects, as pull requests are)
        closed = sorted(int(i["number"]) for i in listed if int(i["number"]) in outside)
    return github_tasks(repo, issues, prs, closed, max_spec_bytes)


def cmd_import(args: argparse.Namespace, res: Resources) -> int:
    if args.source == "github":
        return import_github(args, res)
    return import_prd(args, res)


def import_github(args: argparse.Namespace, res: Resources) -> int:
    agent = agent_of(args)
    assert agent is not None
    found = github_backlog(args.repo, args.label, res.settings.queue.max_json_bytes)
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
    result = res.queue.enqueue(agent, found.tasks)
    if not result.enqueued and found.tasks:
        print(
            f"afk: nothing new in {args.repo}: its {len(found.tasks)} issues are enqueued already",
            file=sys.stderr,
        )
    emit({**result.to_json(), "skipped": found.skipped})
    return EXIT_OK


def import_prd(args: argparse.Namespace, res: Resources) -> int:
    from ..backlogs import prd_tasks
    from ..models import NewTask

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
    q = res.queue
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


def cmd_export(args: argparse.Namespace, res: Resources) -> int:
    from ..backlogs import prd_key, prd_with_passes, read_prd, story_ids

    text, name = read_prd_file(args.path)
    doc, prd_name = read_prd(text, name)
    ids = story_ids(doc, name)
    states = res.queue.states_by_key(prd_key(prd_name, sid) for sid in ids)
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
