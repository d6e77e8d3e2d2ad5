"""The run's broker: the only way an agent's ``afk`` reaches the queue.

An agent is given no DSN, no password and no settings file
(:func:`watchdog.agents.credential.for_agent`); ``afk loop`` serves a Unix
socket in a private folder of its own for its runs (``AFK_BROKER`` in the
agent's environment, and ``AFK_HOOK_SOCKET`` with it), and the ``afk`` an
agent runs sends its arguments there (:mod:`watchdog.agents.brokerlink`):

- a hook is answered here, in the loop's process, with the loop's database
  and settings, exactly as the service answers one;
- a command is one of :data:`AGENT_COMMANDS`, on the run's own task, with the
  run's own token (the only credential: the loop's current run's id and
  token, nothing else), and runs as ``afk`` in a process of the loop's with
  the loop's settings and the run's credential; every other command, another
  task, another token, ``--next`` (a claim of another task), ``--agent``,
  ``--runner``, ``--dsn`` and ``--config`` are refused with one line.

The wire format is the hooks' own (:mod:`watchdog.agents.hooklink`): a JSON
header line, then the payload (a hook's, or the command's stdin); a command's
header says ``"cli"``, and its answer carries its exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..config import Settings
from ..errors import EXIT_LEASE_LOST, EXIT_USAGE
from ..models import Task
from . import credential, hooks
from .harnesses import HARNESSES
from .hooklink import parse_argv
from .hookserver import HookServer
from .sandbox import run_folder

logger = logging.getLogger(__name__)

#: what an agent may ask of afk, on its own task
AGENT_COMMANDS = (
    "done",
    "fail",
    "checkpoint",
    "heartbeat",
    "ask",
    "once",
    "status",
    "show",
    "resume-brief",
    "pause",
)
#: seconds a command through the broker may take (``afk once`` runs the
#: agent's own command: as long as the run may)
COMMAND_WAIT = 300.0
#: exit statuses (as the command line's)


class Broker(HookServer):
    """Serves one loop's runs, one at a time (:meth:`serving`)."""

    def __init__(
        self,
        dsn: str,
        settings: Settings,
        parse: Callable[[list[str]], tuple[str | None, argparse.Namespace | None]],
        afk_env: Mapping[str, str],
    ) -> None:
        """``parse`` reads a command line as ``afk`` would: its command word
        and arguments (None: a usage error, which the command itself says);
        ``afk_env`` is what the loop's own ``afk`` needs besides its
        environment (its ``--dsn`` and ``--config``)."""
        self.folder = run_folder("afk-broker-")  # (mode 0700, seen from a sandbox)
        super().__init__(os.path.join(self.folder, "broker.sock"), dsn)
        self.settings, self.parse, self.afk_env = settings, parse, dict(afk_env)
        self._run: Task | None = None
        self._run_lock = threading.Lock()

    def start(self) -> bool:
        return super().start()

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def serving(self, task: Task | None) -> None:
        """The run the broker answers for now (None: between runs)."""
        with self._run_lock:
            self._run = task

    def given(self) -> dict[str, str]:
        """What an agent is given to reach it."""
        return {credential.BROKER: self.path, "AFK_HOOK_SOCKET": self.path}

    # -- one request --------------------------------------------------------------

    def answer(self, request: Any, payload: bytes) -> dict[str, str]:
        if not isinstance(request, dict):
            return {"fallback": "not a request"}
        env = request.get("env")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            return {"fallback": "no environment"}
        cli = request.get("cli")
        if cli is not None:
            if not isinstance(cli, list) or not all(isinstance(a, str) for a in cli):
                return _said(EXIT_USAGE, "afk: the broker read no command")
            cwd = request.get("cwd")
            return self.command(cli, env, payload, cwd if isinstance(cwd, str) else None)
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return {"fallback": "no arguments"}
        args = parse_argv(argv)
        if args is None or args["harness"] not in HARNESSES:
            return {"fallback": "arguments the command line reads"}
        reply = hooks.run_hook(
            payload,
            gate=bool(args["gate"]),
            alias=args["event"] if isinstance(args["event"], str) else None,
            harness=str(args["harness"]),
            env=env,
            where=lambda ctx: (self.dsn, self.settings, self.db),
        )
        return {"stdout": reply.stdout(), "stderr": reply.stderr()}

    def command(
        self, argv: list[str], env: Mapping[str, str], stdin: bytes, cwd: str | None
    ) -> dict[str, str]:
        """One ``afk`` command of the agent's: refused (one line), or run."""
        with self._run_lock:
            run = self._run
        if run is None:
            return _said(EXIT_LEASE_LOST, "afk: no run of this loop holds a task now")
        task_id, token = credential.read(env)
        if task_id != str(run.id) or token != str(run.token):
            return _said(
                EXIT_LEASE_LOST,
                "afk: the broker answers only its run's own task, with its own token",
            )
        refused = refusal(argv, run, self.parse)
        if refused is not None:
            return _said(EXIT_USAGE, f"afk: {refused}")
        return self._run_afk(argv, run, stdin, cwd)

    def _run_afk(self, argv: list[str], run: Task, stdin: bytes, cwd: str | None) -> dict[str, str]:
        given = {
            **os.environ,
            **self.afk_env,
            **credential.written(run.id, run.token),
            "AFK_AGENT_ID": run.agent_id,
            # (what `afk once` gives its command instead of this environment)
            credential.BROKERED: self.path,
        }
        given.pop(credential.BROKER, None)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "watchdog", *argv],
                input=stdin,
                capture_output=True,
                env=given,
                cwd=cwd if cwd is not None and os.path.isdir(cwd) else None,
                timeout=COMMAND_WAIT,
            )
        except subprocess.TimeoutExpired:
            return _said(1, f"afk: the command took longer than {COMMAND_WAIT:g}s; stopped")
        return {
            "stdout": proc.stdout.decode("utf-8", "replace"),
            "stderr": proc.stderr.decode("utf-8", "replace"),
            "exit": str(proc.returncode),
        }


def refusal(
    argv: list[str],
    run: Task,
    parse: Callable[[list[str]], tuple[str | None, argparse.Namespace | None]],
) -> str | None:
    """Why the agent of ``run`` may not run ``afk ARGV`` (None: it may)."""
    word, args = parse(argv[: argv.index("--")] if "--" in argv else argv)
    if word not in AGENT_COMMANDS:
        return (
            f"afk {word or '(no command)'} is not for an agent: inside a run, afk takes only "
            f"its own task's commands ({', '.join(AGENT_COMMANDS)})"
        )
    if args is None:
        return None  # a usage error: the command says it, changing nothing
    checks: list[tuple[Callable[[], bool], str]] = [
        (lambda: bool(getattr(args, "dsn", None) or getattr(args, "config", None)),
         "--dsn and --config are not for an agent: the run's broker knows its database"),
        (lambda: bool(getattr(args, "next", False)),
         "--next would claim another task: the loop gives the next one"),
        (lambda: getattr(args, "runner", None) is not None,
         "--runner is not for an agent: it acts on its own task only"),
        (lambda: getattr(args, "agent", None) not in (None, run.agent_id),
         "--agent names another agent: an agent acts on its own task only"),
        (lambda: getattr(args, "id", None) not in (None, str(run.id)),
         "that is another task: an agent acts on its own task only"),
        (lambda: getattr(args, "token", None) not in (None, run.token),
         "that is not the run's token"),
    ]  # fmt: skip
    for failed, why in checks:
        if failed():
            return why
    if word == "status" and getattr(args, "agent", None) is None:
        argv.extend(["--agent", run.agent_id])  # (its own agent's counts only)
    return None


def _said(status: int, line: str) -> dict[str, str]:
    return {"stdout": "", "stderr": line + "\n", "exit": str(status)}


def agent_variables(dsn: str | None, config: str | None) -> Mapping[str, str]:
    """What the agent needs to reach the loop's database with ``afk``."""
    out = {}
    if dsn:
        out["AFK_DSN"] = dsn
    if config:
        out["AFK_CONFIG"] = os.path.abspath(config)
    return out
