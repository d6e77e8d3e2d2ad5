"""The resume brief an agent is given, and ``afk once`` for shell side effects.
(The hooks are in ``hooks.py``.)"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

from .errors import BadInput, LeaseLost
from .text import one_line, plain

if TYPE_CHECKING:
    from .models import Task
    from .queue import Queue


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
    out += ["", "## Spec", "", fence(task.spec)]
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
    runs = queue.runs(task.id)
    ended = [r for r in runs if r["ended_at"] is not None]
    if ended and ended[-1].get("check_status") not in (None, 0):
        out += [
            "",
            "## The check failed (it must pass before the task is done)",
            "",
            f"It exited {ended[-1]['check_status']}; it printed:",
            "",
            text_fence(ended[-1].get("check_tail") or "(nothing)"),
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
            lines.append(fence(value))
    return lines


def text_fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text.rstrip()}\n{ticks}"


def fence(value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}json\n{text}\n{ticks}"


def run_once(
    queue: Queue, task_id: str, token: int, name: str, command: list[str], env: dict[str, str]
) -> tuple[int, bytes, str | None]:
    """``afk once``: run ``command`` unless effect ``name`` is recorded; record
    its exit status and stdout when it exits 0. Returns (status, stdout, note).

    Once the command has run and exited 0 its effect is recorded whatever it
    printed: output over a quarter of the JSON cap is recorded as a prefix,
    and a replay says it was cut. A program that cannot be found is refused
    before anything is recorded."""
    if not command:
        raise BadInput("no command given after --")
    program = command[0]
    if "/" in program:
        if not os.path.isfile(program):
            raise BadInput(f"cannot run {program!r}: no such program (nothing was recorded)")
        if not os.access(program, os.X_OK):
            raise BadInput(f"cannot run {program!r}: it is not executable (nothing was recorded)")
    elif not shutil.which(program, path=env.get("PATH")):
        raise BadInput(f"cannot run {program!r}: no such program (nothing was recorded)")
    budget = max(queue.settings.max_json_bytes // 4, 1)
    ran: dict[str, Any] = {}

    def call(ctx: Any) -> dict[str, Any]:
        try:
            proc = subprocess.run(
                command,
                stdout=subprocess.PIPE,
                env={**env, "AFK_EFFECT_KEY": ctx.key, "AFK_TASK_ID": task_id},
            )
        except OSError as exc:  # an exec format error, a missing #! interpreter
            raise _CannotStart(
                f"cannot run {program!r}: {exc.strerror or exc} (nothing was recorded)"
            ) from None
        status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        ran["status"], ran["stdout"] = status, proc.stdout
        if status != 0:
            raise _CommandFailed(status)
        out = proc.stdout[:budget]
        record: dict[str, Any] = {"exit": 0}
        if len(proc.stdout) > budget:
            record["stdout_bytes"] = len(proc.stdout)
        try:
            record["stdout"] = out.decode("utf-8")
        except UnicodeDecodeError:
            record["stdout_b64"] = base64.b64encode(out).decode()
        return record

    try:
        recorded = queue.effect(task_id, name, call, token=token)
    except _CommandFailed as failed:
        return failed.status, ran["stdout"], None
    except _CannotStart as cannot:
        queue.forget_effect(task_id, name)
        raise BadInput(str(cannot)) from None
    except LeaseLost as lost:
        lost.stdout = ran.get("stdout")
        raise
    if "stdout" in ran:  # it ran just now: pass its whole output through
        return 0, ran["stdout"], None
    out = (
        base64.b64decode(recorded["stdout_b64"])
        if "stdout_b64" in recorded
        else str(recorded["stdout"]).encode("utf-8")
    )
    note = None
    if "stdout_bytes" in recorded:
        note = (
            f"the recorded output was cut to its first {len(out)} of "
            f"{recorded['stdout_bytes']} bytes"
        )
    return int(recorded["exit"]), out, note


class _CannotStart(Exception):
    """The command could not be executed at all: nothing happened."""


class _CommandFailed(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"command exited {status}")
        self.status = status
