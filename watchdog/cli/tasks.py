"""The commands of a task's life after it is enqueued: claim, checkpoint,
heartbeat, done, fail, pause, ask and answer, and an operator's status,
show, review, dead, retry, reclaim, gc and restore."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..agents import credential
from ..agents.brief import resume_brief
from ..checks import parse_task_id
from ..config import parse_duration
from ..errors import EXIT_EMPTY, EXIT_OK, EXIT_PARKED, AccountParked, BadInput, LeaseLost
from ..ids import short_id
from ..text import terminal

if TYPE_CHECKING:
    from ..config import Settings
    from ..models import Task
    from ..queue import Queue

from .common import (
    MAX_SINCE,
    NEXT_HELP,
    Parser,
    Resources,
    account_of,
    account_option,
    agent_of,
    agent_option,
    emit,
    fenced_options,
    lease_option,
    parse_json,
    parse_object,
    runner_of,
    runner_option,
    stderr,
    stdout,
    task_arg,
    task_of,
    token_option,
)


def configure_claim(p: Parser) -> None:
    agent_option(p)
    runner_option(p)
    lease_option(p)
    account_option(p)


def cmd_claim(args: argparse.Namespace, res: Resources) -> int:

    agent = agent_of(args)
    assert agent is not None
    q = res.queue
    try:
        claimed = q.take(
            agent, runner=runner_of(args), lease_seconds=args.lease, account=account_of(args)
        )
    except AccountParked as parked:
        emit(parked.to_json())
        print(f"afk: {parked}", file=stderr())
        return EXIT_PARKED
    if claimed.task is None:
        from ..agents.outcome import reading_zone
        from ..agents.words import nothing_to_claim

        held = {"held_until": claimed.held_until} if claimed.held_until is not None else {}
        emit({"next_at": claimed.next_at, **held})
        due = None
        if claimed.next_at is not None:
            due = claimed.next_at.astimezone(reading_zone()).isoformat(timespec="seconds")
        why = nothing_to_claim(agent, due, claimed.held_until is not None)
        print(f"afk: nothing to claim now: {why}", file=stderr())
        return EXIT_EMPTY
    emit({**claimed.task.to_json(), **claim_workspace(q, claimed.task, res.settings)})
    return EXIT_OK


def claim_workspace(q: Queue, task: Task, settings: Settings) -> dict[str, Any]:
    """A claimed task's worktree (made at its first claim), as `afk claim`
    prints it; a worktree that cannot be made gives the task back, paused."""
    if task.workspace is None:
        return {}

    ws = q.worktree(task, settings.loop.ports_per_task)  # (one it cannot make: paused)
    return {} if ws is None else {"workspace": {**ws.to_json(), "env": ws.env()}}


def configure_checkpoint(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--patch", required=True, help="JSON object, or @FILE")


def cmd_checkpoint(args: argparse.Namespace, res: Resources) -> int:
    patch = parse_object(args.patch, "--patch")
    task_id, token = task_of(args)
    emit(res.queue.checkpoint(task_id, patch, token=token).to_json())
    return EXIT_OK


def configure_heartbeat(p: Parser) -> None:
    fenced_options(p)


def cmd_heartbeat(args: argparse.Namespace, res: Resources) -> int:
    task_id, token = task_of(args)
    emit(res.queue.heartbeat(task_id, token=token).to_json())
    return EXIT_OK


def configure_done(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--result", help="JSON, or @FILE")
    p.add_argument("--next", action="store_true", help=NEXT_HELP)


def cmd_done(args: argparse.Namespace, res: Resources) -> int:
    result = parse_json(args.result, "--result") if args.result is not None else None
    task_id, token = task_of(args)
    q = res.queue
    if args.next:
        return emit_next(q.done(task_id, result, token=token, claim_next=True))
    emit(q.done(task_id, result, token=token).to_json())
    return EXIT_OK


def configure_fail(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--error", required=True, help="what went wrong, as the digest will show it")
    p.add_argument("--next", action="store_true", help=NEXT_HELP)


def cmd_fail(args: argparse.Namespace, res: Resources) -> int:
    task_id, token = task_of(args)
    q = res.queue
    if args.next:
        return emit_next(q.fail(task_id, args.error, token=token, claim_next=True))
    emit(q.fail(task_id, args.error, token=token).to_json())
    return EXIT_OK


def emit_next(task: Task | None) -> int:
    """What `done --next` and `fail --next` print: the next task, as `claim`
    prints it, or exit 3."""
    if task is None:
        print("afk: finished; nothing to claim next", file=stderr())
        return EXIT_EMPTY
    emit(task.to_json())
    return EXIT_OK


def configure_pause(p: Parser) -> None:
    agent_option(p)
    runner_option(p)
    p.add_argument(
        "id",
        nargs="?",
        type=task_arg,
        help="pause only this task (needs --token; with no "
        "id, --agent or --runner: AFK_TASK_ID and AFK_TASK_TOKEN)",
    )
    token_option(p)


def cmd_pause(args: argparse.Namespace, res: Resources) -> int:
    one_task = args.id is not None or (
        args.runner is None and args.agent is None and "AFK_TASK_ID" in os.environ
    )
    if not one_task and runner_of(args) is None and agent_of(args, required=False) is None:
        raise BadInput(
            "pause needs what to pause: a task (ID --token T, or AFK_TASK_ID), --agent, or --runner"
        )
    if one_task:
        task_id, token = task_of(args)
        res.queue.pause_task(task_id, token=token)
        emit({"paused": 1})
        return EXIT_OK
    runner = runner_of(args)
    agent = agent_of(args, required=runner is None)
    emit({"paused": len(res.queue.pause(agent, runner=runner))})
    return EXIT_OK


def configure_status(p: Parser) -> None:
    agent_option(p)


def cmd_status(args: argparse.Namespace, res: Resources) -> int:
    from ..agents.fleet import Fleet

    agent = agent_of(args, required=False)
    counts: dict[str, Any] = dict(res.queue.overview(agent))
    stuck = Fleet(res.queue.db, res.settings.loop.fleet_lost_seconds).waiting_for_a_loop(agent)
    if stuck:  # (no live loop has the labels they require: they wait in silence)
        counts["waiting_for_a_loop"] = stuck
    emit(counts)
    return EXIT_OK


def configure_show(p: Parser) -> None:
    p.add_argument("id", type=task_arg, help="the task id, or its first 8 digits")


def cmd_show(args: argparse.Namespace, res: Resources) -> int:
    from .. import workspaces

    q = res.queue
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


def cmd_review(args: argparse.Namespace, res: Resources) -> int:
    from .. import workspaces

    since = parse_duration(args.since) if args.since is not None else 86400.0
    if since > MAX_SINCE:
        raise BadInput(f"--since {args.since} is longer than 100 years")
    items = workspaces.to_review(
        res.queue.db, agent=agent_of(args, required=False), since_seconds=since
    )
    if args.json:
        emit(items)
        return EXIT_OK
    for item in items:
        print(terminal(review_text(item)))
    if not items:
        print("nothing to review: no done task with a workspace in that time", file=stderr())
    return EXIT_OK


def review_text(item: dict[str, Any]) -> str:
    """One task to review, as a person reads it in a terminal."""
    head = f"{item['title']} ({item['agent_id']}, {short_id(item['id'])})"
    if item.get("error"):
        return f"{head}\n  {item['error']}\n"
    d = item["diffstat"]
    lines = [
        head,
        f"  branch {item['branch']}: {item['commits']} commit(s), {d['files']} file(s) "
        f"+{d['insertions']} -{d['deletions']}" + ("" if item["changes"] else " (no changes)"),
    ]
    if item.get("dirty"):
        lines.append(f"  uncommitted changes in {item['path']}")
    if item.get("check"):
        check = item["check"]
        lines.append(f"  check: {'passed' if check.get('status') == 0 else 'failed'}")
    if item.get("pr"):
        pr = item["pr"]
        draft = ", draft" if pr.get("isDraft") else ""
        state = f"{str(pr.get('state')).lower()}{draft}"
        lines.append(f"  pull request #{pr.get('number')} ({state}): {pr.get('url')}")
    if item.get("stacked_on"):
        lines.append(f"  stacked on {item['stacked_on']} (the branch of a task it depends on)")
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


def cmd_gc(args: argparse.Namespace, res: Resources) -> int:
    from .. import workspaces
    from ..agents.words import task_name

    older = parse_duration(args.older_than) if args.older_than is not None else 0.0
    report = workspaces.gc(res.queue.db, older_than=older, force=args.force, dry_run=args.dry_run)
    if args.json:
        emit(report)
        return EXIT_OK
    verb = "would be " if args.dry_run else ""
    for item in report["worktrees"]:
        size = f", {item['bytes'] / 1e6:.1f} MB" if "bytes" in item else ""
        name = task_name(item["id"], item["title"])
        print(terminal(f"{name} {item['path']}: {verb}{item['action']} ({item['why']}{size})"))
    print(f"{report['bytes'] / 1e6:.1f} MB in {len(report['worktrees'])} worktree(s)")
    return EXIT_OK


def configure_restore(p: Parser) -> None:
    p.add_argument("id", type=task_arg, help="the task whose saved worktree comes back")


def cmd_restore(args: argparse.Namespace, res: Resources) -> int:
    from .. import workspaces

    emit(workspaces.restore(res.queue.db, parse_task_id(args.id)))
    return EXIT_OK


def configure_dead(p: Parser) -> None:
    agent_option(p)
    p.add_argument("--since", help="e.g. 1h, 30m, 7d")


def cmd_dead(args: argparse.Namespace, res: Resources) -> int:
    since = parse_duration(args.since) if args.since is not None else None
    if since is not None and since > MAX_SINCE:
        raise BadInput(f"--since {args.since} is longer than 100 years")
    emit([t.to_json() for t in res.queue.dead(agent_of(args, required=False), since_seconds=since)])
    return EXIT_OK


def configure_retry(p: Parser) -> None:
    p.add_argument("ids", nargs="+", metavar="ID", type=task_arg)
    p.add_argument(
        "--budget-usd",
        type=float,
        dest="budget_usd",
        help="a new budget: also puts back tasks held because they reached theirs",
    )


def cmd_retry(args: argparse.Namespace, res: Resources) -> int:
    who = os.environ.get("USER") or None
    q = res.queue
    if args.budget_usd is not None:
        ids = q.rebudget(args.ids, args.budget_usd, who=who)
    else:
        ids = q.retry(args.ids, who=who)
    emit({"retried": [str(i) for i in ids]})
    return EXIT_OK


def configure_cancel(p: Parser) -> None:
    p.add_argument("ids", nargs="+", metavar="ID", type=task_arg)
    p.add_argument("--reason", help="why, as the digest and the task's history will say")


def cmd_cancel(args: argparse.Namespace, res: Resources) -> int:
    """`afk cancel ID... [--reason TEXT]`: tasks a person no longer wants
    (a repository gone, say) end failed, all or nothing."""
    ids = res.queue.cancel(args.ids, reason=args.reason, who=os.environ.get("USER") or None)
    emit({"cancelled": [str(i) for i in ids]})
    return EXIT_OK


def configure_ask(p: Parser) -> None:
    p.add_argument("question", help="the question, as a person will read it")
    p.add_argument("id", nargs="?", type=task_arg, help="task id (env AFK_TASK_ID)")
    token_option(p)


def cmd_ask(args: argparse.Namespace, res: Resources) -> int:
    """Inside the agent: a question for a person; the task waits for the answer."""
    task_id, token = task_of(args)
    question_id = res.queue.ask(task_id, args.question, token=token)
    emit({"asked": question_id, "id": task_id})
    print(
        "afk: your task now waits for a person's answer: stop working on it and exit; "
        "the answer comes with the next run's brief",
        file=stderr(),
    )
    return EXIT_OK


def configure_answer(p: Parser) -> None:
    p.add_argument("id", type=task_arg, help="the task id")
    p.add_argument("answer", help="the answer, as the agent will read it")


def cmd_answer(args: argparse.Namespace, res: Resources) -> int:
    task = res.queue.answer(args.id, args.answer, who=os.environ.get("USER") or None)
    emit({"answered": str(task.id), "state": task.state})
    return EXIT_OK


def configure_trust(p: Parser) -> None:
    p.add_argument("id", type=task_arg, help="the task id")


def cmd_trust(args: argparse.Namespace, res: Resources) -> int:
    """`afk trust ID`: a person read what the task's worktree changed of the
    agent's own configuration, and lets that exact content run; the task's
    open question is answered and it goes back to todo (a later change is
    held again)."""
    from .. import workspaces

    task_id = parse_task_id(args.id)
    changed = workspaces.trust(res.queue.db, task_id)
    who = os.environ.get("USER") or None
    said = "trusted by a person: " + (
        ", ".join(changed) if changed else "the configuration as it is"
    )
    state = None
    if any(q["answered_at"] is None for q in res.queue.task_questions(task_id)):
        state = res.queue.answer(task_id, said, who=who).state
    emit({"trusted": str(task_id), "changed": changed, "state": state})
    return EXIT_OK


def configure_questions(p: Parser) -> None:
    agent_option(p)


def cmd_questions(args: argparse.Namespace, res: Resources) -> int:
    emit(res.queue.questions(agent_of(args, required=False)))
    return EXIT_OK


def configure_approvals(p: Parser) -> None:
    agent_option(p)
    p.add_argument("--all", action="store_true", help="the decided requests too")


def cmd_approvals(args: argparse.Namespace, res: Resources) -> int:
    """The tool calls waiting for a person (issue 43): the task, the tool and
    its whole input (scrubbed), the session that asked, when, until when."""
    rows = res.queue.approvals(agent_of(args, required=False), everything=args.all)
    emit([{**r, "task_id": str(r["task_id"])} for r in rows])
    return EXIT_OK


def configure_approve(p: Parser) -> None:
    p.add_argument("id", type=approval_id, help="the request's id (afk approvals)")
    p.add_argument("--note", help="a word for the agent (it reads it when the call is denied)")


def approval_id(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 2**63:
        raise argparse.ArgumentTypeError(f"{text!r} is not a request id (afk approvals)")
    return int(text)


def configure_deny(p: Parser) -> None:
    configure_approve(p)


def cmd_approve(args: argparse.Namespace, res: Resources) -> int:
    return _decide(args, res, approve=True)


def cmd_deny(args: argparse.Namespace, res: Resources) -> int:
    return _decide(args, res, approve=False)


def _decide(args: argparse.Namespace, res: Resources, *, approve: bool) -> int:
    row = res.queue.decide(
        args.id, approve, who=os.environ.get("USER") or None, via="cli", note=args.note
    )
    emit(
        {
            "approval": row["id"],
            "decision": "approved" if approve else "denied",
            "task_id": str(row["task_id"]),
            "due_again": bool(row["released"]),
        }
    )
    return EXIT_OK


def cmd_reclaim(args: argparse.Namespace, res: Resources) -> int:
    r = res.queue.reclaim()
    emit({"paused": r.paused, "failed": r.failed})
    return EXIT_OK


def configure_once(p: Parser) -> None:
    fenced_options(p)
    p.add_argument("--name", required=True, help="the effect's name, unique within the task")
    p.set_defaults(command=[])
    p.usage = "afk once [ID] [--token T] --name NAME -- COMMAND [ARG...]"


def cmd_once(args: argparse.Namespace, res: Resources) -> int:
    from ..agents.once import run_command

    command = list(args.command)
    task_id, token = task_of(args)
    try:
        status, out, note = run_command(
            res.queue, task_id, token, args.name, command, credential.for_brokered(os.environ)
        )
    except LeaseLost as lost:
        if lost.stdout:
            sys.stdout.buffer.write(lost.stdout)
            sys.stdout.flush()
        raise
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if note:
        print(f"afk: {note}", file=stderr())
    return status


def configure_resume_brief(p: Parser) -> None:
    p.add_argument("id", nargs="?", type=task_arg, help="task id (env AFK_TASK_ID)")


def cmd_resume_brief(args: argparse.Namespace, res: Resources) -> int:

    task_id = args.id if args.id is not None else os.environ.get("AFK_TASK_ID")
    if task_id is None:
        raise BadInput("a task id is needed: give it, or set AFK_TASK_ID")
    stdout().write(resume_brief(res.queue, task_id))
    return EXIT_OK
