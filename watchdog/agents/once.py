"""``afk once --name NAME -- COMMAND``: a shell side effect of a task run at
most once (its exit status and output recorded in the task's effects), as
a person's afk runs it. Inside a run the agent's afk runs it on its own
side of the boundary, through its broker (:mod:`watchdog.agents.brokerlink`)."""

from __future__ import annotations

import base64
import subprocess
from typing import TYPE_CHECKING, Any

from ..errors import BadInput, LeaseLost
from .brokerlink import cannot_run

if TYPE_CHECKING:
    from ..queue import Queue


def run_command(
    queue: Queue, task_id: str, token: int, name: str, command: list[str], env: dict[str, str]
) -> tuple[int, bytes, str | None]:
    """``afk once``: run ``command`` unless effect ``name`` is recorded; record
    its exit status and stdout when it exits 0. Returns (status, stdout, note).

    Once the command has run and exited 0 its effect is recorded whatever it
    printed: output over a quarter of the JSON cap is recorded as a prefix,
    and a replay says it was cut. A program that cannot be found is refused
    before anything is recorded."""
    cannot = cannot_run(command, env.get("PATH"))
    if cannot is not None:
        raise BadInput(f"{cannot} (nothing was recorded)")
    program = command[0]
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
