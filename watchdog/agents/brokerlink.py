"""The ``afk`` an agent runs inside a run: everything goes to the run's broker
(:mod:`watchdog.agents.broker`), never to a database. ``AFK_BROKER`` in the
environment says so; the agent has no DSN to go anywhere else.

A file an option names (``--patch @FILE``, ``--result @FILE``) is read here,
by the agent, and sent as its content: the broker reads no file for it. The
command's stdin is sent when an argument asks for it (``-``, ``@-``).
"""

from __future__ import annotations

import _socket
import json
import os
import sys
import time
from collections.abc import Mapping

from . import hooklink

#: the options whose value may be ``@FILE``, read on the agent's side
FILE_OPTIONS = ("--patch", "--result", "--spec")
#: seconds to wait for a command's answer (``afk once`` runs a command)
ANSWER_WAIT = 330.0


def main(argv: list[str], payload: bytes | None, env: Mapping[str, str]) -> int:
    path = env["AFK_BROKER"]
    if argv[:1] == ["hook"]:
        return _hook(argv, payload, {**env, "AFK_HOOK_SOCKET": path})
    try:
        argv, stdin = _inlined(argv)
    except OSError as exc:
        return _say(2, f"afk: cannot read {exc.filename}: {exc.strerror}; nothing was changed")
    request = {"cli": argv, "env": hooklink.forwarded(env), "cwd": os.getcwd()}
    header = json.dumps(request).encode()
    try:
        conn = hooklink.connect(path)
        try:
            conn.settimeout(ANSWER_WAIT)
            conn.sendall(header + b"\n" + stdin)
            conn.shutdown(_socket.SHUT_WR)
            answer = hooklink.receive(conn, time.monotonic() + ANSWER_WAIT)
        finally:
            conn.close()
    except (OSError, hooklink.Untrusted, hooklink.Wedged) as exc:
        return _say(1, f"afk: the run's broker did not answer ({exc}); nothing was changed")
    said = hooklink.decode_answer(answer) if answer is not None else None
    if said is None:
        return _say(1, "afk: the run's broker did not answer in time; nothing was changed")
    sys.stdout.write(said.get("stdout") or "")
    sys.stdout.flush()
    sys.stderr.write(said.get("stderr") or "")
    try:
        return int(said.get("exit") or 1)
    except ValueError:
        return 1


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


def _inlined(argv: list[str]) -> tuple[list[str], bytes]:
    """``argv`` with each ``@FILE`` of :data:`FILE_OPTIONS` replaced by the
    file's content, and the stdin to send (when ``-`` or ``@-`` asks for it)."""
    out: list[str] = []
    wants_stdin = False
    expect_file = False
    for arg in argv:
        if arg == "--":
            out.extend(argv[len(out) :])
            break
        name, eq, value = arg.partition("=")
        if expect_file or (eq and name in FILE_OPTIONS):
            given = arg if expect_file else value
            if given.startswith("@") and given != "@-":
                with open(given[1:], encoding="utf-8") as f:
                    given = f.read(hooklink.MAX_PAYLOAD)
            wants_stdin = wants_stdin or given == "@-"
            arg = given if expect_file else f"{name}={given}"
            expect_file = False
        elif arg in FILE_OPTIONS:
            expect_file = True
        elif arg == "-":
            wants_stdin = True
        out.append(arg)
    stdin = sys.stdin.buffer.read(hooklink.MAX_PAYLOAD) if wants_stdin else b""
    return out, stdin


def _say(status: int, line: str) -> int:
    print(line, file=sys.stderr)
    return status
