"""The run's broker: the only way an agent's ``afk`` reaches the queue.

An agent is given no DSN, no password and no settings file
(:func:`watchdog.agents.credential.for_agent`); ``afk loop`` serves a Unix
socket in a private folder of its own for its runs (``AFK_BROKER`` in the
agent's environment, and ``AFK_HOOK_SOCKET`` with it), which only the run it
serves can see inside the boundary (:func:`~watchdog.agents.reach.runs_root`),
and the ``afk`` an agent runs sends its arguments there
(:mod:`watchdog.agents.brokerlink`):

- a hook is answered here, in the loop's process, with the loop's database
  and settings, for the run's own task, token and account whatever the
  request's environment says (:meth:`Broker.answer`);
- a command is parsed once by the agent's own parser (the room's commands,
  :data:`~watchdog.agents.reach.AGENT_COMMANDS`; no abbreviation, no global
  option), checked against the run (its own task, token and agent), and run
  here with the run's credential by the command's own function, writing to
  the request's streams; whatever does not parse is refused with one line;
- ``afk once`` runs its program on the agent's side, inside the boundary:
  the broker only begins its effect in the ledger (or replays what an
  earlier attempt recorded) and records how it ended.

The wire format is the hooks' own (:mod:`watchdog.agents.hooklink`): a JSON
header line, then the payload (a hook's, or the command's stdin); a command's
header says ``"cli"``, and its answer carries its exit status.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import socket
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Settings
from ..errors import EXIT_LEASE_LOST, EXIT_USAGE, AfkError
from ..models import Task
from ..queue import Queue
from . import credential, hooklink, hooks, reach
from .harnesses import HARNESSES
from .hooklink import parse_argv
from .hookserver import HookServer

if TYPE_CHECKING:
    import argparse

logger = logging.getLogger(__name__)


class AgentCommands(Protocol):
    """The agent's commands (``watchdog.cli.agentcli.AgentCli``): parsed and
    checked against a run, then run on a queue. What each says back has
    ``exit``, ``stdout`` and ``stderr``."""

    def check(self, argv: list[str], run: Task) -> argparse.Namespace | Any: ...

    def run(self, args: argparse.Namespace, queue: Queue) -> Any: ...


class Broker(HookServer):
    """Serves one loop's runs, one at a time (:meth:`serving`)."""

    def __init__(self, dsn: str, settings: Settings, commands: AgentCommands) -> None:
        self.folder = reach.run_folder("afk-broker-")  # (mode 0700, seen by its run only)
        super().__init__(os.path.join(self.folder, "broker.sock"), dsn)
        self.settings, self.commands = settings, commands
        self.queue = Queue(self.db, settings=settings.queue)
        self._run: tuple[Task, str] | None = None
        self._refused: list[str] = []
        self._run_lock = threading.Lock()

    def start(self) -> bool:
        return super().start()

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def serving(self, task: Task | None, account: str | None = None) -> None:
        """The run the broker answers for now, under ``account`` (None:
        between runs)."""
        with self._run_lock:
            self._run = (task, account or "") if task is not None else None
            if task is not None:
                self._refused = []

    def refused(self) -> list[str]:
        """What the broker refused the run it serves (kept on the run)."""
        with self._run_lock:
            return list(self._refused)

    def _note(self, line: str) -> None:
        with self._run_lock:
            if self._run is not None and len(self._refused) < MAX_REFUSED:
                self._refused.append(line.strip()[:300])

    def given(self) -> dict[str, str]:
        """What an agent is given to reach it."""
        return {credential.BROKER: self.path, "AFK_HOOK_SOCKET": self.path}

    def _serving(self) -> tuple[Task, str] | None:
        with self._run_lock:
            return self._run

    # -- one request --------------------------------------------------------------

    def answer(
        self, request: Any, payload: bytes, conn: socket.socket | None = None
    ) -> dict[str, str]:
        if not isinstance(request, dict):
            return {"fallback": "not a request"}
        env = request.get("env")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            return {"fallback": "no environment"}
        cli = request.get("cli")
        if cli is not None:
            if not isinstance(cli, list) or not all(isinstance(a, str) for a in cli):
                return _said(EXIT_USAGE, "afk: the broker read no command")
            return self.command(cli, request, conn)
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
            env=self.run_env(env),
            where=lambda ctx: (self.dsn, self.settings, self.db),
        )
        return {"stdout": reply.stdout(), "stderr": reply.stderr()}

    def run_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """A hook's environment as the run's: the run's own task, agent and
        account, whatever the request said (none between runs). A request
        that names its task with an older token (a session of an earlier run)
        keeps that token, and is a zombie to the hook; one that names another
        task gets a credential no hook accepts: it is denied, and nothing of
        any task is read or changed."""
        own = {k: v for k, v in env.items() if k not in RUN_NAMES}
        serving = self._serving()
        if serving is None:
            return own
        run, account = serving
        named, token = credential.read(env)
        own.update({"AFK_AGENT_ID": run.agent_id, "AFK_ACCOUNT": account})
        if named and named != str(run.id):
            self._note(f"a hook named task {named}: not its run's, refused")
            return {**own, credential.TASK_ID: str(run.id), credential.TASK_TOKEN: "refused"}
        own.update(
            credential.written(run.id, int(token) if token and token.isdigit() else run.token)
        )
        return own

    def command(
        self, argv: list[str], request: dict[str, Any], conn: socket.socket | None
    ) -> dict[str, str]:
        """One ``afk`` command of the agent's: refused (one line), or run. A
        file or standard input it names was read by the agent's afk and sent
        as its content (the broker reads nothing of the host for it)."""
        serving = self._serving()
        if serving is None:
            return _said(EXIT_LEASE_LOST, "afk: no run of this loop holds a task now")
        run = serving[0]
        task_id, token = credential.read(request["env"])
        if task_id != str(run.id) or token != str(run.token):
            self._note(f"afk {' '.join(argv)[:200]}: with task {task_id}'s credential")
            return _said(
                EXIT_LEASE_LOST,
                "afk: the broker answers only its run's own task, with its own token",
            )
        checked = self.commands.check(argv, run)
        if not hasattr(checked, "subcommand"):  # said instead: a refusal, a help text
            if checked.exit != 0:
                self._note(f"afk {' '.join(argv)[:200]}: {checked.stderr.strip()[:200]}")
            return _from(checked)
        if checked.subcommand == "once":
            return self.once(checked, request, run, conn)
        return _from(self.commands.run(checked, self.queue))

    # -- afk once: the program runs on the agent's side -------------------------

    def once(
        self, args: argparse.Namespace, request: dict[str, Any], run: Task, conn: Any
    ) -> dict[str, str]:
        """``afk once``'s two steps, its program run between them by the
        agent's afk, inside the boundary: ``begin`` (what an earlier attempt
        recorded, or the effect started and its key), then ``end`` (how the
        program ended: recorded when it exited 0; a failure did not happen),
        or ``cannot_start`` (nothing ran)."""
        ledger, step = self.queue.ledger, request.get("once")
        try:
            if step == "begin":
                begun = ledger.begin(run.id, run.token, args.name, by=_starter(conn))
                if isinstance(begun, str):
                    keep = max(self.settings.queue.max_json_bytes // 4, 1)
                    return {"go": begun, "keep": str(keep), "exit": "0"}
                return _replayed(begun.result)
            if step == "cannot_start":
                self.queue.forget_effect(run.id, args.name)
                return {"exit": "0"}
            if step == "end":
                status = str(request.get("status"))
                if status != "0":
                    ledger.abandon(run.id, run.token, args.name)
                    return {"exit": "0"}
                ledger.finish(run.id, run.token, args.name, _record(request))
                return {"exit": "0"}
        except AfkError as exc:
            return _said(exc.exit_code, f"afk: {exc}")
        return _said(EXIT_USAGE, "afk: afk once through the broker takes begin, end, cannot_start")


#: refusals kept on one run (the first ones: an agent that tries endlessly
#: says what it tried in the first)
MAX_REFUSED = 50
#: what a hook's request may not say of its run: the broker's run says it
RUN_NAMES = (*credential.NAMES, "AFK_AGENT_ID", "AFK_ACCOUNT")


def _starter(conn: socket.socket | None) -> str | None:
    """An effect's starter: the agent's afk (its process on this host, as
    the kernel tells its pid), so that a run killed mid-command leaves the
    effect in doubt, never "still running"."""
    pid = hooklink.peer_pid(conn) if conn is not None else None
    return f"{socket.gethostname()}:{pid}" if pid else None


def _record(request: dict[str, Any]) -> dict[str, Any]:
    """What is recorded of a program that exited 0: its output (at most
    what the agent's afk kept of it), and how long the whole was."""
    record: dict[str, Any] = {"exit": 0}
    out = base64.b64decode(str(request.get("stdout_b64") or ""), validate=False)
    whole = request.get("stdout_bytes")
    if isinstance(whole, int) and whole > len(out):
        record["stdout_bytes"] = whole
    try:
        record["stdout"] = out.decode("utf-8")
    except UnicodeDecodeError:
        record["stdout_b64"] = base64.b64encode(out).decode()
    return record


def _replayed(recorded: dict[str, Any]) -> dict[str, str]:
    """What an effect recorded, replayed: its output and exit status."""
    if "stdout_b64" in recorded:
        out = base64.b64decode(recorded["stdout_b64"])
    else:
        out = str(recorded.get("stdout", "")).encode("utf-8")
    said = {"stdout_b64": base64.b64encode(out).decode(), "exit": str(recorded.get("exit", 0))}
    if "stdout_bytes" in recorded:
        said["stderr"] = (
            f"afk: the recorded output was cut to its first {len(out)} of "
            f"{recorded['stdout_bytes']} bytes\n"
        )
    return said


def _from(said: Any) -> dict[str, str]:
    return {"stdout": said.stdout, "stderr": said.stderr, "exit": str(said.exit)}


def _said(status: int, line: str) -> dict[str, str]:
    return {"stdout": "", "stderr": line + "\n", "exit": str(status)}
