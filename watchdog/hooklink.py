"""The hook's fast path: ``afk hook`` asks the watchdog service over a Unix
socket instead of connecting to the database itself.

An agent runs a hook before and after every tool call, and a hook that
imports the database driver and opens a connection costs some 200 ms a time.
The service already holds connections and the hook's code: the process that
the agent starts only reads its payload, forwards it with its arguments and
the environment the hook reads (:data:`FORWARDED`), and prints the answer.
This module is that client, and the wire format the service's side
(:mod:`watchdog.hookserver`) reads; it imports nothing of the package and
nothing heavy, so that the client costs an interpreter start.

The socket is ``AFK_HOOK_SOCKET``, else ``afk-hooks-UID/service.sock`` under
``TMPDIR`` (``/tmp``); ``AFK_HOOK_SOCKET=off`` turns the fast path off. Trust
goes both ways:

- the client uses a socket only in a folder that belongs to its user (or to
  root) and that no one else can write to, and only a socket of its own user:
  another user cannot plant a socket there to read payloads and task tokens or
  to let a zombie's tool call through;
- the service answers only a peer of its own user (``SO_PEERCRED``): another
  user cannot forge a heartbeat or a pause.

The service answers for one database: a request whose settings resolve to
another DSN (or whose libpq environment differs) is handed back, and so is
anything the client cannot send or read in time. Handed back, the hook runs
as it always did, straight against the database (:func:`watchdog.cli.cmd_hook`),
with the payload it already read.
"""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import sys
import time
from collections.abc import Mapping

#: seconds after which `afk hook` gives up and exits 0 (its hook timeouts are 10 s)
HOOK_DEADLINE = 8
#: bytes of payload read; a larger one is refused as malformed
MAX_PAYLOAD = 16 * 1024 * 1024
#: bytes of the request's header line (arguments and environment)
MAX_HEADER = 256 * 1024
#: seconds to wait for the payload on stdin
STDIN_WAIT = 5.0
#: seconds to connect to the service, and then to wait for its answer; past
#: them the hook runs straight against the database
CONNECT_WAIT = 0.5
ANSWER_WAIT = 2.0
#: the environment a hook reads, sent along with its payload
FORWARDED = (
    "CLAUDE_ENV_FILE",
    "CREDENTIALS_DIRECTORY",
    "HOME",
    "PATH",
    "TMPDIR",
    "TZ",
    "USER",
    "XDG_DATA_HOME",
)
#: and every variable with these prefixes (ours, and libpq's)
FORWARDED_PREFIXES = ("AFK_", "PG")


def give_up(*_: object) -> None:
    """SIGALRM past :data:`HOOK_DEADLINE`: one line, exit 0, never a wedged agent."""
    sys.stderr.write(
        "afk hook: warning: the database did not answer in time; nothing was changed\n"
    )
    sys.stderr.flush()
    os._exit(0)


def temp_root(env: Mapping[str, str]) -> str:
    """The temporary folder, as the hook's cache and socket see it."""
    return env.get("TMPDIR") or "/tmp"


def socket_path(env: Mapping[str, str]) -> str | None:
    """Where the service listens for hooks; None when the fast path is off."""
    chosen = env.get("AFK_HOOK_SOCKET", "").strip()
    if chosen.lower() == "off":
        return None
    return chosen or os.path.join(temp_root(env), f"afk-hooks-{os.getuid()}", "service.sock")


def forwarded(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in FORWARDED or k.startswith(FORWARDED_PREFIXES)}


def trusted(path: str, uid: int | None = None) -> bool:
    """Whether ``path`` is a socket of this user in a folder no one else
    can write to (owned by this user or root)."""
    uid = os.getuid() if uid is None else uid
    try:
        folder = os.stat(os.path.dirname(path) or ".")
        sock = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(folder.st_mode)
        and folder.st_uid in (uid, 0)
        and not folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        and stat.S_ISSOCK(sock.st_mode)
        and sock.st_uid == uid
    )


def read_stdin(wait: float = STDIN_WAIT) -> bytes:
    """The payload: what arrives on stdin within ``wait`` seconds (an agent
    that never closes stdin must not hang the hook), at most one byte more
    than :data:`MAX_PAYLOAD` (the parser refuses that)."""
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + wait
    fd = sys.stdin.fileno()
    while size <= MAX_PAYLOAD:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def unattended(payload: bytes) -> bool:
    """A StopFailure: its agent reads no answer and kills the hook about 1.5 s
    after starting it (Claude Code 2.1.332, ``-p``), so it does not wait on a
    service that may be slow; the command line parks the account from a
    process of its own. (The bytes are looked at first: a tool call's
    payload is not parsed twice on the hot path.)"""
    if b"StopFailure" not in payload:
        return False
    try:
        said = json.loads(payload)
    except ValueError:
        return False
    return isinstance(said, dict) and said.get("hook_event_name") == "StopFailure"


def ask(argv: list[str], payload: bytes, env: Mapping[str, str]) -> dict[str, str] | None:
    """The service's answer to one hook run: ``{"stdout": ..., "stderr": ...}``;
    None when there is no service to ask, it is not to be trusted, it hands
    the request back, or it does not answer in time."""
    said = exchange(argv, payload, env)
    if said is None or said.get("fallback") is not None:
        return None
    out, err = said.get("stdout"), said.get("stderr")
    if not isinstance(out, str) or not isinstance(err, str):
        return None
    return {"stdout": out, "stderr": err}


def exchange(argv: list[str], payload: bytes, env: Mapping[str, str]) -> dict[str, object] | None:
    """The service's reply as it came (``{"fallback": why}`` included); None
    when there is no trusted service to ask or it does not answer in time."""
    path = socket_path(env)
    if path is None or not trusted(path):
        return None
    header = json.dumps({"argv": argv, "env": forwarded(env)}).encode() + b"\n"
    if len(header) > MAX_HEADER:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CONNECT_WAIT)
            conn.connect(path)
            conn.settimeout(ANSWER_WAIT)
            conn.sendall(header + payload)
            conn.shutdown(socket.SHUT_WR)
            answer = receive(conn, time.monotonic() + ANSWER_WAIT)
    except OSError:
        return None
    if answer is None:
        return None
    try:
        said = json.loads(answer)
    except ValueError:
        return None
    return said if isinstance(said, dict) else None


def receive(conn: socket.socket, deadline: float, limit: int = MAX_PAYLOAD) -> bytes | None:
    """Everything the peer sends until it closes, within ``deadline``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        conn.settimeout(left)
        chunk = conn.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None


def parse_argv(argv: list[str]) -> dict[str, object] | None:
    """`afk hook [stop] [--gate] [--harness H] [--config FILE] [--dsn DSN]`
    as a dict; None for anything else (which the full parser then reads and
    answers)."""
    args: dict[str, object] = {
        "event": None,
        "gate": False,
        "config": None,
        "dsn": None,
        "harness": "claude",
    }
    words = iter(argv)
    for word in words:
        if word == "--gate":
            args["gate"] = True
        elif word == "stop" and args["event"] is None:
            args["event"] = "stop"
        elif word in ("--harness", "--config", "--dsn"):
            value = next(words, None)
            if value is None:
                return None
            args[word[2:]] = value
        else:
            return None
    return args
