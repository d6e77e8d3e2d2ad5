"""The watchdog service's side of the hooks' fast path (:mod:`watchdog.hooklink`):
a Unix socket on which it runs ``afk hook`` for processes of its own user,
with its own connections, exactly as the hook would run it.

A request is one header line (the hook's arguments and the environment it
reads) and the payload; the answer is what the hook prints. The service
answers only for its own database: the request's settings, resolved in the
request's environment as the hook would resolve them, must name the service's
DSN, with the same libpq environment; anything else is handed back
(``{"fallback": why}``) and the hook goes to its database itself.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from . import hooklink, hooks
from .config import known_env, load_all
from .db import Database
from .errors import AfkError, redact
from .harnesses import HARNESSES
from .resolve import running_dsn

logger = logging.getLogger(__name__)

#: connections kept for hooks, beside the jobs' own
POOL_SIZE = 4


def libpq_env(env: Mapping[str, str]) -> dict[str, str]:
    """What else decides where a DSN leads: libpq's variables."""
    return {k: v for k, v in env.items() if k.startswith("PG")}


class HookServer:
    """Serves hooks for the database at ``dsn`` on the socket at ``path``."""

    def __init__(self, path: str, dsn: str) -> None:
        self.path = path
        self.dsn = dsn
        self.env = libpq_env(os.environ)
        self.db = Database(
            dsn,
            pool_size=POOL_SIZE,
            connect_timeout=2,
            statement_timeout=3,
            application_name="afk-hook",
            retry_for=2,
        )
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._known = set(known_env())

    # -- the socket ----------------------------------------------------------

    def start(self) -> bool:
        """Listen, in a thread of its own. False (and a warning) when another
        live service holds the socket or the folder cannot be made private."""
        folder, name = os.path.split(os.path.abspath(self.path))
        try:
            os.makedirs(os.path.dirname(folder), exist_ok=True)
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass  # checked below, on the open folder, as the hooks check it
        except OSError as exc:
            return self._refuse(f"its folder cannot be made ({exc.strerror})")
        try:
            fd = hooklink.open_private(folder)
        except hooklink.Untrusted as exc:
            return self._refuse(
                f"{exc} (remove it, or set AFK_HOOK_SOCKET to a path in a folder of yours)"
            )
        except OSError as exc:
            return self._refuse(f"its folder cannot be opened ({exc.strerror})")
        try:
            return self._listen(fd, name)
        finally:
            os.close(fd)

    def _listen(self, fd: int, name: str) -> bool:
        """Bind ``name`` in the checked, open folder ``fd`` (never through
        a path another user could redirect since the check)."""
        here = hooklink.through(fd, name)
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            here = self.path  # no /proc: the hooks still check who answers
        if os.path.lexists(here):
            if _answers(here):
                return self._refuse("another service answers on it")
            os.unlink(name, dir_fd=fd)  # a dead service's
        handler = self._handler()
        old = os.umask(0o177)
        try:
            server = socketserver.ThreadingUnixStreamServer(here, handler)
        except OSError as exc:
            return self._refuse(exc.strerror or str(exc))
        finally:
            os.umask(old)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, name="afk-hooks", daemon=True).start()
        logger.info(
            "answering hooks on %s", self.path, extra={"action": "listen", "socket": self.path}
        )
        return True

    def _refuse(self, why: str) -> bool:
        logger.warning(
            "not answering hooks on %s: %s (hooks go to the database themselves)",
            self.path,
            why,
            extra={"action": "listen"},
        )
        self.db.close()
        return False

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            with_path = Path(self.path)
            if with_path.is_socket():
                with_path.unlink(missing_ok=True)
            self._server = None
        self.db.close()

    def _handler(self) -> type[socketserver.BaseRequestHandler]:
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server.handle(self.request)

        return Handler

    # -- one request --------------------------------------------------------------

    def handle(self, conn: socket.socket) -> None:
        if hooklink.peer_uid(conn) != os.getuid():
            return  # another user's process: not a word
        try:
            deadline = time.monotonic() + hooklink.STDIN_WAIT
            request = hooklink.receive(conn, deadline, hooklink.MAX_HEADER + hooklink.MAX_PAYLOAD)
        except OSError:
            return
        if request is None or b"\n" not in request:
            return
        header, payload = request.split(b"\n", 1)
        try:
            said = self.answer(json.loads(header), payload)
        except Exception as exc:  # a bug of ours: the hook goes on by itself
            logger.exception("a hook request failed", extra={"action": "hook"})
            said = {"fallback": f"{type(exc).__name__}: {redact(str(exc))}"}
        with suppress(OSError):  # the hook gave up waiting, or its agent ended it
            conn.sendall(json.dumps(said, ensure_ascii=False).encode())

    def answer(self, request: Any, payload: bytes) -> dict[str, str]:
        """What the hook prints; ``{"fallback": why}`` for a request that is
        not this service's to answer."""
        if not isinstance(request, dict):
            return {"fallback": "not a request"}
        argv, env = request.get("argv"), request.get("env")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return {"fallback": "no arguments"}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            return {"fallback": "no environment"}
        args = hooklink.parse_argv(argv)
        if args is None or args["harness"] not in HARNESSES:
            return {"fallback": "arguments the command line reads"}
        if libpq_env(env) != self.env:
            return {"fallback": "another libpq environment"}
        notes: list[str] = []
        try:
            settings = load_all(
                _str(args["config"]),
                {k: v for k, v in env.items() if not k.startswith("AFK_") or k in self._known},
            )
            dsn = running_dsn(_str(args["dsn"]), settings=settings, env=env)
        except AfkError:
            return {"fallback": "settings the command line reads"}
        if dsn != self.dsn:
            return {"fallback": "another database"}
        try:
            ctx = hooks.context(
                hooks.parse_payload(payload),
                bool(args["gate"]),
                _str(args["event"]),
                str(args["harness"]),
                env=env,
            )
        except AfkError as exc:
            return {"stdout": "", "stderr": f"afk hook: warning: {exc}; nothing was changed\n"}
        if ctx is None:
            return {"stdout": "", "stderr": "afk hook: ignored: not an event afk handles\n"}
        said, notes = hooks.respond(ctx, dsn, settings, db=self.db)
        logger.debug(
            "answered %s of session %s",
            ctx.event,
            ctx.session,
            extra={"action": "hook", "event": ctx.event},
        )
        out = json.dumps(said, ensure_ascii=False) + "\n" if said else ""
        return {"stdout": out, "stderr": "".join(f"{line}\n" for line in notes)}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True
