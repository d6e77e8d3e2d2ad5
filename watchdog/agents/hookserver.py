"""The watchdog service's side of the hooks' fast path (:mod:`watchdog.agents.hooklink`):
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
import select
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..config import Settings, known_env, load_all
from ..db import Database
from ..errors import AfkError, redact
from ..links import CHALLENGE_HEADER, PROOF_HEADER, hook_proof, verify_run
from ..resolve import running_dsn
from . import credential, hooklink, hooks
from .harnesses import HARNESSES, HTTP_ENV

logger = logging.getLogger(__name__)

#: connections kept for hooks, beside the jobs' own
POOL_SIZE = 4
#: configurations whose settings are kept (the sessions of one user share a few)
SETTINGS_KEPT = 32


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
        #: the settings of the configurations hooks came with (:meth:`_settings`)
        self._seen: dict[tuple[Any, ...], Settings] = {}
        self._lock = threading.Lock()

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
            said = self.answer(json.loads(header), payload, conn)
        except Exception as exc:  # a bug of ours: the hook goes on by itself
            logger.exception("a hook request failed", extra={"action": "hook"})
            said = {"fallback": f"{type(exc).__name__}: {redact(str(exc))}"}
        with suppress(OSError):  # the hook gave up waiting, or its agent ended it
            conn.sendall(json.dumps(said, ensure_ascii=False).encode())

    def _settings(self, config: str | None, env: dict[str, str]) -> Settings:
        """:func:`load_all` for one hook's configuration, kept for the next
        hooks of the same configuration (a session's hooks all share one): a
        hook is answered in the time of its own work. The file's time is in
        the key, so an edited config file is read again."""
        stamp = None
        if config is not None:
            with suppress(OSError):
                stamp = os.stat(config).st_mtime_ns
        same = {k: v for k, v in env.items() if k not in ("TRACEPARENT", "TRACESTATE")}
        key = (config, stamp, tuple(sorted(same.items())))
        with self._lock:
            found = self._seen.get(key)
        if found is None:
            found = load_all(config, env)
            with self._lock:
                if len(self._seen) >= SETTINGS_KEPT:
                    self._seen.pop(next(iter(self._seen)))
                self._seen[key] = found
        return found

    def answer_local(self, payload: bytes, harness: str, gate: bool, env: dict[str, str]) -> str:
        """An HTTP hook's answer: the same hook code, for this service's own
        database and settings (an HTTP hook names no other)."""
        settings = self._settings(None, dict(os.environ))
        reply = hooks.run_hook(
            payload,
            gate=gate,
            alias=None,
            harness=harness,
            env=env,
            where=lambda ctx: (self.dsn, settings, self.db),
        )
        for line in reply.lines:
            logger.debug("%s", line, extra={"action": "hook"})
        return reply.json()

    def answer(
        self, request: Any, payload: bytes, conn: socket.socket | None = None
    ) -> dict[str, str]:
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
        try:
            settings = self._settings(
                _str(args["config"]),
                {k: v for k, v in env.items() if not k.startswith("AFK_") or k in self._known},
            )
            dsn = running_dsn(_str(args["dsn"]), settings=settings, env=env)
        except AfkError:
            return {"fallback": "settings the command line reads"}
        if dsn != self.dsn:
            return {"fallback": "another database"}
        reply = hooks.run_hook(
            payload,
            gate=bool(args["gate"]),
            alias=_str(args["event"]),
            harness=str(args["harness"]),
            env=env,
            where=lambda ctx: (dsn, settings, self.db),
        )
        if reply.event is not None:
            logger.debug(
                "answered %s of session %s",
                reply.event,
                reply.session,
                extra={"action": "hook", "event": reply.event},
            )
        return {"stdout": reply.stdout(), "stderr": reply.stderr()}


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


# -- Claude Code's HTTP hooks ---------------------------------------------------------

#: seconds a connection may take to send its request (a slow one is cut off)
HTTP_READ_WAIT = 5.0
#: connections served at once; one more is closed at once (no thread for it)
HTTP_CONNECTIONS = 64
#: of those, what the connections of one other local user may hold together
#: (P6: the hooks come from the service's own user, whose agents and their
#: sandboxes' proxies connect as it; a user who has no token must not fill
#: every place with slow connections that come back as soon as they are cut)
HTTP_PLACES_PER_PEER = 8


def peer_uid(conn: socket.socket) -> int | None:
    """The user who owns the other end of a loopback TCP connection, read
    from the kernel's table of sockets (/proc/net/tcp, /proc/net/tcp6): the
    row whose local address is the peer's and remote address is ours. None:
    not found (it is gone already, or not on this machine)."""
    try:
        theirs, ours = conn.getpeername(), conn.getsockname()
    except OSError:
        return None
    six = conn.family == socket.AF_INET6

    def hexed(address: tuple[Any, ...]) -> str:
        raw = socket.inet_pton(conn.family, address[0])
        # the kernel prints each 32-bit word of the address in the machine's order
        words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
        return "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words) + (
            f":{address[1]:04X}"
        )

    want = (hexed(theirs), hexed(ours))
    # the kernel writes the table a page at a time, and a row can be skipped
    # while other sockets open and close between two pages (a flood of them
    # is when it matters): a row not found is looked for again
    for _ in range(3):
        try:
            with open("/proc/net/tcp6" if six else "/proc/net/tcp", encoding="ascii") as table:
                next(table, None)  # (its header)
                for row in table:
                    fields = row.split()
                    if len(fields) > 7 and (fields[1], fields[2]) == want:
                        return int(fields[7])
        except (OSError, ValueError):
            return None
    return None


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, :data:`HTTP_CONNECTIONS` at most: many idle
    or slow connections cannot grow the service's threads without bound."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.places = threading.BoundedSemaphore(HTTP_CONNECTIONS)
        #: the places each other user's connections hold (see peer_uid)
        self._peers: dict[int, int] = {}
        self._own_uid = os.getuid()
        #: each connection's deadline for the request it is sending (P6: a
        #: socket's timeout is per read, and a header line every 2 s never
        #: trips it); a reaper cuts off the ones past it
        self._deadlines: dict[socket.socket, float] = {}
        #: kept connections waiting for their client's next hook, and since
        #: when: the first to go when every place is taken (R2: idle ones
        #: held the places, and a 65th session's first hook got none)
        self._idle: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        super().__init__(address, handler)
        threading.Thread(target=self._reap, name="afk-http-reaper", daemon=True).start()

    def watch(self, conn: socket.socket, seconds: float) -> None:
        """``conn`` must send its whole request within ``seconds`` from now."""
        with self._lock:
            self._deadlines[conn] = time.monotonic() + seconds

    def unwatch(self, conn: socket.socket) -> None:
        """Its request is in: what the service does with it is not the
        client's time."""
        with self._lock:
            self._deadlines.pop(conn, None)

    def wait_for_request(self, conn: socket.socket, seconds: float) -> bool:
        """Wait (idle) up to ``seconds`` for the next request on a kept
        connection: True when something came (or the connection ended)."""
        with self._lock:
            self._idle[conn] = time.monotonic()
        try:
            readable, _, _ = select.select([conn], [], [], seconds)
        except (OSError, ValueError):
            return False
        finally:
            with self._lock:
                self._idle.pop(conn, None)
        return bool(readable)

    def _evict_idle(self) -> bool:
        """End the longest idle kept connection that has nothing on its way
        (its client opens a new one for its next hook); False: none."""
        with self._lock:
            waiting = sorted(self._idle.items(), key=lambda kv: kv[1])
        for conn, _ in waiting:
            try:
                if select.select([conn], [], [], 0)[0]:
                    continue  # (a request is arriving on it: not idle)
            except (OSError, ValueError):
                continue
            with self._lock:
                if self._idle.pop(conn, None) is None:
                    continue  # (it woke meanwhile)
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            return True
        return False

    def _reap(self) -> None:
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            with self._lock:
                late = [c for c, at in self._deadlines.items() if at <= now]
                for conn in late:
                    del self._deadlines[conn]
            for conn in late:
                with suppress(OSError):  # (its handler's read ends, and so does it)
                    conn.shutdown(socket.SHUT_RDWR)

    def process_request(self, request: Any, client_address: Any) -> None:
        uid = peer_uid(request)
        # another user's, or one whose user is not known (-1), is counted
        peer = None if uid == self._own_uid else (-1 if uid is None else uid)
        with self._lock:
            full = peer is not None and self._peers.get(peer, 0) >= HTTP_PLACES_PER_PEER
            room = not full and self.places.acquire(blocking=False)
            if room and peer is not None:
                self._peers[peer] = self._peers.get(peer, 0) + 1
        if not room and not full and self._evict_idle():
            # an idle kept connection gives its place to a new one (its
            # handler ends at once; a moment for it to let go)
            room = self.places.acquire(timeout=2.0)
            if room and peer is not None:
                with self._lock:
                    self._peers[peer] = self._peers.get(peer, 0) + 1
        if not room:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, (client_address, peer))
        except BaseException:
            self._release(peer)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        address, peer = client_address
        try:
            super().process_request_thread(request, address)
        finally:
            self._release(peer)

    def _release(self, peer: int | None) -> None:
        with self._lock:
            if peer is not None:
                left = self._peers.pop(peer, 1) - 1
                if left:
                    self._peers[peer] = left
        self.places.release()


class BoundedHTTPServer6(BoundedHTTPServer):
    """The same on an IPv6 loopback address (``[::1]:PORT``)."""

    address_family = socket.AF_INET6


class HttpHooks:
    """Claude Code's HTTP hooks (``"type": "http"``), answered on a loopback
    port with the same code as the socket: the bearer token is checked before
    the body is read (401 and nothing changed without it), a request is bounded
    in size and time, and a fixed pool of threads answers them."""

    def __init__(
        self,
        host: str,
        port: int,
        token: str,
        hooks: HookServer,
        runs_secret: str = "",
        proof_secret: str = "",
    ) -> None:
        """``token``: a person's own sessions' (their headers say their task);
        ``runs_secret``: what signs each run's own credential (its task is the
        credential's, whatever its headers say); ``proof_secret``: what it
        proves itself with to `afk doctor --live` (:data:`HOOK_PROOF`)."""
        self.token, self.hooks, self.runs_secret = token, hooks, runs_secret
        self.proof_secret = proof_secret
        self._server: ThreadingHTTPServer | None = None
        self.address = (host, port)

    def start(self) -> str | None:
        """Listen; None, or why it cannot (the port is taken, say)."""
        handler = self._handler()
        kind = BoundedHTTPServer6 if ":" in self.address[0] else BoundedHTTPServer  # (P25)
        try:
            server = kind(self.address, handler)
        except OSError as exc:
            return str(exc.strerror or exc)
        self._server = server
        threading.Thread(target=server.serve_forever, name="afk-http-hooks", daemon=True).start()
        host = f"[{self.address[0]}]" if ":" in self.address[0] else self.address[0]
        logger.info(
            "answering HTTP hooks on http://%s:%d/hooks/",
            host,
            server.server_address[1],
            extra={"action": "listen"},
        )
        return None

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            # A connection is kept for the client's next hook (a new one for
            # each costs Claude Code 1-2 ms a hook, in sessions of
            # the real client) until it is idle HTTP_READ_WAIT: an idle or slow
            # connection is cut off, as Keep-Alive says.
            protocol_version = "HTTP/1.1"
            timeout = HTTP_READ_WAIT
            # A reply goes out in one write when the request is answered (a
            # second small write, the body, would wait for the client's
            # delayed ack on a connection kept alive).
            wbufsize = 1 << 16

            def handle_one_request(self) -> None:
                # a kept connection waits idle for its next request up to
                # HTTP_READ_WAIT (ended sooner when its place is needed); then
                # the whole request (its headers, its body) within
                # HTTP_READ_WAIT: a deadline, not a timeout per read
                server = self.server
                assert isinstance(server, BoundedHTTPServer)
                waited = getattr(self, "kept", False) and not self._arrived()
                if waited and not server.wait_for_request(self.connection, HTTP_READ_WAIT):
                    self.close_connection = True
                    return
                self.kept = True
                server.watch(self.connection, HTTP_READ_WAIT)
                try:
                    super().handle_one_request()
                finally:
                    server.unwatch(self.connection)

            def _arrived(self) -> bool:
                """Whether the next request's bytes are read already (buffered)."""
                self.connection.settimeout(0)
                try:
                    return bool(self.rfile.peek(1))  # type: ignore[attr-defined]
                except OSError:
                    return False
                finally:
                    self.connection.settimeout(self.timeout)

            def do_POST(self) -> None:
                status, body = hooks.handle(self)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                challenge = self.headers.get(CHALLENGE_HEADER, "")
                if hooks.proof_secret and 0 < len(challenge) <= 128:
                    self.send_header(PROOF_HEADER, hook_proof(hooks.proof_secret, challenge))
                if status == 200:
                    self.send_header("Keep-Alive", f"timeout={HTTP_READ_WAIT:g}")
                else:  # (its body may be unread: the connection ends with it)
                    self.send_header("Connection", "close")
                self.end_headers()
                with suppress(OSError):
                    self.wfile.write(body)

            def handle_expect_100(self) -> bool:
                super().handle_expect_100()
                self.wfile.flush()  # (the client waits for it before its body)
                return True

            def log_message(self, format: str, *args: object) -> None:
                pass  # (the service's own log says what matters)

        return Handler

    def handle(self, request: Any) -> tuple[int, bytes]:
        """One HTTP hook: (status, body). The body is the hook's answer as its
        harness reads it (empty: nothing to say)."""
        import hmac
        from urllib.parse import parse_qs, urlsplit

        given = request.headers.get("Authorization", "")
        run = (
            verify_run(self.runs_secret, given.removeprefix("Bearer "))
            if self.runs_secret
            else None
        )
        person = bool(self.token) and hmac.compare_digest(
            given.encode(), f"Bearer {self.token}".encode()
        )
        if run is None and not person:
            return 401, b'{"error": "no or wrong bearer token"}'
        where = urlsplit(request.path)
        harness = where.path.removeprefix("/hooks/").strip("/") or "claude"
        if not where.path.startswith("/hooks/") or harness not in HARNESSES:
            return 404, b'{"error": "no such hook"}'
        try:
            size = int(request.headers.get("Content-Length", ""))
        except ValueError:
            return 411, b'{"error": "a Content-Length is needed"}'
        if not 0 <= size <= hooklink.MAX_PAYLOAD:
            return 413, b'{"error": "too large"}'
        try:
            payload = request.rfile.read(size)
        except OSError:  # (too slow: the handler's timeout)
            return 408, b'{"error": "too slow"}'
        if len(payload) < size:  # (cut off at its deadline)
            return 408, b'{"error": "too slow"}'
        if isinstance(request.server, BoundedHTTPServer):
            request.server.unwatch(request.connection)
        query = parse_qs(where.query)
        env = {k: v for k, v in os.environ.items() if k in HTTP_BASE_ENV}
        for header, name in HTTP_ENV.items():
            value = request.headers.get(header, "")
            if value.strip():
                env[name] = value.strip()
        if run is not None:  # a run's: its credential says its task, whatever the headers do
            for name in (*credential.NAMES, "AFK_ACCOUNT"):
                env.pop(name, None)
            env.update(credential.written(run.task_id, run.token))
            env["AFK_ACCOUNT"] = run.account
        try:
            said = self.hooks.answer_local(payload, harness, "1" in query.get("gate", []), env)
        except Exception as exc:  # (P19) as the command hook: one line, and the agent goes on
            logger.warning(
                "an HTTP hook could not be answered: %s: %s",
                type(exc).__name__,
                redact(str(exc))[:200],
                extra={"action": "hook"},
            )
            said = "{}"
        hooklink.touch_alive(env)  # a hook answered: its run's sign of life
        return 200, said.encode()


#: what a hook over HTTP reads from the service's own environment (the cache
#: folder, the zone): the rest comes in its headers
HTTP_BASE_ENV = ("HOME", "TMPDIR", "XDG_RUNTIME_DIR", "TZ", "PATH", "USER")
