"""The resume brief an agent is given at the start of a session, after a
compaction and in a task's page: the task, its spec and what it checkpointed
(the hooks are in ``hooks.py``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..text import one_line, plain
from . import approvals
from .harnesses import prompt_argv
from .outcome import describe_tool

if TYPE_CHECKING:
    from ..models import Task
    from ..queue import Queue


def resume_brief(queue: Queue, task_id: str) -> str:
    """A short Markdown note for the next session working on a task."""
    task, history = queue.show(task_id)
    effects = queue.effects(task.id)
    out = [
        f"# Resume: {task.title}",
        "",
        f"- task `{task.id}` of agent `{task.agent_id}`, item {task.ordinal}",
        f"- state **{task.state}**, attempt {task.attempts} of {task.max_attempts}",
    ]
    if task.last_error:
        out.append(f"- last error: {one_line(task.last_error)}")
    out += ["", "## Spec", "", json_block(task.spec)]
    out += ["", "## Checkpoint (what was done before)", ""]
    out += _checkpoint_lines(task)
    done_effects = [e for e in effects if e["done"]]
    open_effects = [e for e in effects if not e["done"]]
    out += ["", "## Side effects already done (do not redo)", ""]
    if done_effects:
        for e in done_effects:
            out.append(
                f"- `{e['name']}` at {e['recorded_at']:%Y-%m-%d %H:%M:%S %Z}: "
                f"{one_line(json.dumps(e['result'], ensure_ascii=False))}"
            )
    else:
        out.append("- none recorded")
    if open_effects:
        out += [
            "",
            "Started but not recorded (the call may or may not have happened; check "
            "before repeating it):",
            "",
        ]
        out += [f"- `{e['name']}` (started {e['runs']} time(s))" for e in open_effects]
    questions = queue.task_questions(task.id)
    if questions:
        out += ["", "## Questions and answers (a person's decisions: follow them)", ""]
        for q in questions:
            out.append(f"- Q ({q['asked_at']:%Y-%m-%d %H:%M}): {one_line(q['question'], 1000)}")
            if q["answer"] is not None:
                out.append(f"  A: {one_line(q['answer'], 2000)}")
            else:
                out.append("  A: (not answered yet)")
    decided = queue.approval_decisions(task.id)
    if decided:  # (a session that could not be resumed reads them here)
        out += ["", "## Calls a person decided (follow them)", ""]
        for a in decided:
            call = describe_tool(a)
            if a["decision"] == "approved":
                out.append(f"- approved by {a['decided_by'] or 'a person'}: {call}: run it once")
            else:
                out.append(
                    f"- {a['decision']}: {call}: do not run it"
                    + (f"; their note: {one_line(a['note'], 1000)}" if a["note"] else "")
                )
    runs = queue.runs(task.id)
    ended = [r for r in runs if r["ended_at"] is not None]
    if ended and ended[-1].get("check_status") not in (None, 0):
        out += [
            "",
            "## The check failed (it must pass before the task is done)",
            "",
            f"It exited {ended[-1]['check_status']}; it printed:",
            "",
            code_block(ended[-1].get("check_tail") or "(nothing)"),
        ]
    if task.workspace is not None:
        out += ["", "## Workspace", ""]
        out.append(
            "- you work in your own git worktree (`$AFK_WORKTREE`) on your own branch "
            "(`$AFK_BRANCH`): commit your work there; `$AFK_PORT` and the ports after it "
            "are yours for servers"
        )
    sessions = [r for r in runs if r["session_id"]]
    if sessions:
        out += ["", "## Earlier sessions (resume one with `claude --resume ID`)", ""]
        for r in sessions[-5:]:
            cost = f", ${r['cost_usd']:.2f}" if r["cost_usd"] is not None else ""
            out.append(f"- `{r['session_id']}`: {r['outcome'] or 'not ended'}{cost}")
    attempts = [
        h
        for h in history
        if h["reason"]
        in ("claimed", "resumed", "lease expired", "failed with error", "retried by a human")
        or h["reason"].startswith(
            (
                "paused",
                "session ended",
                "stop hook",
                "usage limit",
                "provider outage",
                "needs a human",
                "needs input",
                "answered",
                "over budget",
                "budget raised",
            )
        )
    ]
    out += ["", "## History", ""]
    for h in attempts:
        line = f"- {h['at'][:19].replace('T', ' ')} {h['reason']}"
        if h.get("runner"):
            line += f" (runner `{h['runner']}`)"
        if h.get("error"):
            line += f": {one_line(h['error'])}"
        out.append(line)
    # agent text is printed as it is written: no terminal escape gets through
    return plain("\n".join(out)) + "\n"


def _checkpoint_lines(task: Task) -> list[str]:
    if not task.checkpoint:
        return ["- nothing checkpointed yet: start from the beginning"]
    lines = []
    for key, value in task.checkpoint.items():
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            lines.append(f"- **{key}**: " + (", ".join(f"`{v}`" for v in value) or "(none)"))
        elif isinstance(value, str | int | float | bool) or value is None:
            lines.append(f"- **{key}**: {one_line(json.dumps(value, ensure_ascii=False))}")
        else:
            lines.append(f"- **{key}**:")
            lines.append(json_block(value))
    return lines


def code_block(text: str) -> str:
    """``text`` in a Markdown code block whose fence it cannot close."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text.rstrip()}\n{ticks}"


def json_block(value: Any) -> str:
    """``value`` as JSON in a Markdown code block (see :func:`code_block`)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}json\n{text}\n{ticks}"


def resume_argv(decided: Mapping[str, Any] | None, command: Sequence[str]) -> list[str] | None:
    """The command that resumes the session a person decided a call of
    (issue 43): ``claude --resume SESSION -p``, the call then answered by the
    decision; None when there is none, or when its transcript is not on this
    machine (a fresh session then reads the decision in its brief)."""
    if decided is None or not approvals.resumable(decided.get("session_id")):
        return None  # (none, or not an id: a fresh session reads the decision)
    transcript = decided.get("transcript")
    if transcript and not os.path.isfile(transcript):
        return None
    given = [a for a in command if a != "--"]
    resumed = [given[0], "--resume", str(decided["session_id"]), *given[1:]]
    if decided["rule"] != approvals.ASKED:
        return resumed  # (deferred: the same call fires again, no prompt)
    # a call Claude Code denied after asking: the session ended its turn,
    # and is told what the person decided
    call = describe_tool(dict(decided))
    if decided["decision"] == "approved":
        told = f"A person approved your call {call}: make it again now, then go on."
    else:
        note = f" Their note: {decided['note']}" if decided.get("note") else ""
        told = f"A person denied your call {call}: go on without it.{note}"
    return prompt_argv([*resumed, "--"], told)


#: bytes of the prompt, which is one argument: Linux refuses one over 128 KiB
#: (MAX_ARG_STRLEN), and `enqueue` takes specs and checkpoints of 1 MiB
MAX_PROMPT = 120 * 1024
CUT_NOTE = "\n\n(The brief is cut here: run `afk resume-brief` for the whole of it.)\n"


def fit_prompt(prompt: str, limit: int = MAX_PROMPT) -> str:
    """``prompt`` cut to ``limit`` bytes of UTF-8 with a pointer to the whole
    brief, so that no task is unrunnable for its size."""
    raw = prompt.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return prompt
    keep = limit - len(CUT_NOTE.encode())
    return raw[:keep].decode("utf-8", "ignore") + CUT_NOTE
