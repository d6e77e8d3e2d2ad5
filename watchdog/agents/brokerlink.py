"""The ``afk`` an agent runs inside a run: everything goes to the run's broker
(:mod:`watchdog.agents.broker`), never to a database. ``AFK_BROKER`` in the
environment says so; the agent has no DSN to go anywhere else.

A file an option names (``--patch @FILE``, ``--result @FILE``, or its
standard input, ``@-``) is read here, by the agent, and sent as its content:
the broker reads nothing of the host for it. ``afk once -- COMMAND`` runs
its command here too, inside the run's boundary: the broker only begins the
effect (or replays what an earlier attempt recorded) and records its end.
"""

from __future__ import annotations

import _socket
import base64
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from . import hooklink

#: the options whose value may be ``@FILE``, read on the agent's side
FILE_OPTIONS = ("--patch", "--result", "--spec")
#: seconds to wait for a command's answer (``afk once`` runs a command)
ANSWER_WAIT = 330.0


def main(argv: list[str], payload: bytes | None, env: Mapping[str, str]) -> int:
    path = env["AFK_BROKER"]
    if argv[:1] == ["hook"]:
        return _hook(argv, payload, {**env, "AFK_HOOK_SOCKET": path})
    command: list[str] = []
    if argv[:1] == ["once"] and "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    try:
        argv = _inlined(argv)
    except OSError as exc:
        return _say(2, f"afk: cannot read {exc.filename}: {exc.strerror}; nothing was changed")
    if argv[:1] == ["once"]:
        return _once(path, argv, command, env)
    said = _ask(path, {"cli": argv}, env)
    if said is None:
        return 1
    sys.stdout.write(said.get("stdout") or "")
    sys.stdout.flush()
    sys.stderr.write(said.get("stderr") or "")
    return _status(said)


def _ask(path: str, request: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """The broker's answer to one request (None: it said nothing; said why)."""
    header = json.dumps({**request, "env": hooklink.forwarded(env), "cwd": os.getcwd()})
    try:
        conn = hooklink.connect(path)
        try:
            conn.settimeout(ANSWER_WAIT)
            conn.sendall(header.encode() + b"\n")
            conn.shutdown(_socket.SHUT_WR)
            answer = hooklink.receive(conn, time.monotonic() + ANSWER_WAIT)
        finally:
            conn.close()
    except (OSError, hooklink.Untrusted, hooklink.Wedged) as exc:
        _say(1, f"afk: the run's broker did not answer ({exc}); nothing was changed")
        return None
    said = hooklink.decode_answer(answer) if answer is not None else None
    if said is None:
        _say(1, "afk: the run's broker did not answer in time; nothing was changed")
    return said


def _status(said: Mapping[str, Any]) -> int:
    try:
        return int(said.get("exit") or 1)
    except ValueError:
        return 1


def _once(path: str, argv: list[str], command: list[str], env: Mapping[str, str]) -> int:
    """``afk once --name NAME -- COMMAND``: the effect begun by the broker,
    COMMAND run here (inside the boundary) unless an earlier attempt recorded
    it, its end recorded by the broker."""
    cannot = cannot_run(command, env.get("PATH"))
    if cannot is not None:
        return _say(2, f"afk: {cannot} (nothing was recorded)")
    begun = _ask(path, {"cli": argv, "once": "begin"}, env)
    if begun is None:
        return 1
    sys.stderr.write(begun.get("stderr") or "")
    if begun.get("go") is None:  # a refusal, or what an earlier attempt recorded
        sys.stdout.write(begun.get("stdout") or "")
        sys.stdout.flush()
        sys.stdout.buffer.write(base64.b64decode(begun.get("stdout_b64") or ""))
        sys.stdout.flush()
        return _status(begun)
    given = {**env, "AFK_EFFECT_KEY": str(begun["go"])}
    try:
        proc = subprocess.run(command, stdout=subprocess.PIPE, env=given)
    except OSError as exc:  # an exec format error, a missing #! interpreter
        _ask(path, {"cli": argv, "once": "cannot_start"}, env)
        return _say(
            2, f"afk: cannot run {command[0]!r}: {exc.strerror or exc} (nothing was recorded)"
        )
    status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    keep = int(begun.get("keep") or 0)
    ended = _ask(
        path,
        {
            "cli": argv,
            "once": "end",
            "status": status,
            "stdout_b64": base64.b64encode(proc.stdout[:keep]).decode(),
            "stdout_bytes": len(proc.stdout),
        },
        env,
    )
    sys.stdout.buffer.write(proc.stdout)
    sys.stdout.flush()
    if ended is None:
        return 1
    sys.stderr.write(ended.get("stderr") or "")
    return status if _status(ended) == 0 else _status(ended)


def cannot_run(command: list[str], path: str | None) -> str | None:
    """Why ``command`` cannot be run at all (None: it can be tried)."""
    if not command:
        return "no command given after --"
    program = command[0]
    if "/" in program:
        if not os.path.isfile(program):
            return f"cannot run {program!r}: no such program"
        if not os.access(program, os.X_OK):
            return f"cannot run {program!r}: it is not executable"
    elif not shutil.which(program, path=path):
        return f"cannot run {program!r}: no such program"
    return None


def _hook(argv: list[str], payload: bytes | None, env: Mapping[str, str]) -> int:
    """A hook, answered by the broker as the service would; never by a
    database (the agent has none)."""
    if payload is None:
        payload = hooklink.read_stdin()
    answer = hooklink.ask(argv[1:], payload, env)
    if answer is None:
        return _say(0, f"afk hook: warning: {hooklink.why_not}; nothing was changed")
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    sys.stdout.flush()
    return 0


def _inlined(argv: list[str]) -> list[str]:
    """``argv`` with each ``@FILE`` of :data:`FILE_OPTIONS` replaced by the
    file's content, and ``@-`` by standard input's."""
    out: list[str] = []
    expect_file = False
    for arg in argv:
        name, eq, value = arg.partition("=")
        if expect_file or (eq and name in FILE_OPTIONS):
            given = arg if expect_file else value
            if given == "@-":
                given = sys.stdin.buffer.read(hooklink.MAX_PAYLOAD).decode("utf-8", "replace")
            elif given.startswith("@"):
                with open(given[1:], encoding="utf-8") as f:
                    given = f.read(hooklink.MAX_PAYLOAD)
            arg = given if expect_file else f"{name}={given}"
            expect_file = False
        elif arg in FILE_OPTIONS:
            expect_file = True
        out.append(arg)
    return out


def _say(status: int, line: str) -> int:
    print(line, file=sys.stderr)
    return status
