"""The hook's fast path: ``afk hook`` asks the watchdog service over a Unix
socket instead of connecting to the database itself.

An agent runs a hook before and after every tool call, and a hook that
imports the database driver and opens a connection costs some 200 ms a time.
The service already holds connections and the hook's code: the process that
the agent starts only reads its payload, forwards it with its arguments and
the environment the hook reads (:data:`FORWARDED`), and prints the answer.
This module is that client, and the wire format the service's side
(:mod:`watchdog.agents.hookserver`) reads; it imports nothing of the package and
nothing heavy, so that the client costs an interpreter start.

The socket is ``AFK_HOOK_SOCKET``, else ``afk-hooks/service.sock`` in the
user's private runtime folder (``XDG_RUNTIME_DIR``, else systemd's
``/run/user/UID`` where it is this user's), else ``afk-hooks-UID/service.sock``
under ``TMPDIR`` (``/tmp``); ``AFK_HOOK_SOCKET=off`` turns the fast path off.
Trust goes both ways:

- the client opens the socket's folder without following a link and checks,
  on the open folder, that it belongs to its user (or root) and that no one
  else can write to it; it connects through that open folder (no second
  look-up of the path that another user could swap), and before it sends a
  byte it checks who answers (``SO_PEERCRED``): only a server of its own
  user hears the payload, the task token and the environment;
- the service answers only a peer of its own user (``SO_PEERCRED``): another
  user cannot forge a heartbeat or a pause; and it makes its socket only in a
  folder of its own, never through a link.

The service answers for one database: a request whose settings resolve to
another DSN (or whose libpq environment differs) is handed back, and so is
anything the client cannot send or read in time. Handed back, the hook runs
as it always did, straight against the database (:func:`watchdog.cli.cmd_hook`),
with the payload it already read.
"""

from __future__ import annotations

# The hook's process imports these only: C modules where the Python ones
# would bring enum and re with them (socket, signal, json each cost more
# than the interpreter's own start); see tests/e2e/test_hook_service.py.
import _json
import _socket
import errno
import os
import select
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
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
#: seconds the hooks go straight to the database after the service did not
#: answer in time (a wedged service must not cost every hook the wait again)
WEDGED_FOR = 10.0
#: the file beside the socket that remembers it (its folder is checked private)
WEDGED_MARK = "service.wedged"
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
    # traces: the session's span (afk loop's), and whether the agent exports its own
    "TRACEPARENT",
    "TRACESTATE",
    "CLAUDE_CODE_ENABLE_TELEMETRY",
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


def runtime_root(env: Mapping[str, str]) -> str | None:
    """The user's private runtime folder: ``XDG_RUNTIME_DIR``, else
    systemd's ``/run/user/UID`` (so that a hook started without the variable,
    by cron say, finds the service that systemd started with it); None where
    neither is a private folder of this user. No other user can predict a
    name in it or plant one there."""
    chosen = env.get("XDG_RUNTIME_DIR", "")
    path = chosen if os.path.isabs(chosen) else f"/run/user/{os.getuid()}"
    try:
        info = os.lstat(path)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return path if private and info.st_uid == os.getuid() else None


def hook_folder(env: Mapping[str, str]) -> str:
    """The folder of the hooks' socket and cache, when nothing else is chosen."""
    runtime = runtime_root(env)
    if runtime is not None:
        return os.path.join(runtime, "afk-hooks")
    return os.path.join(temp_root(env), f"afk-hooks-{os.getuid()}")


def socket_path(env: Mapping[str, str]) -> str | None:
    """Where the service listens for hooks; None when the fast path is off."""
    chosen = env.get("AFK_HOOK_SOCKET", "").strip()
    if chosen.lower() == "off":
        return None
    return chosen or os.path.join(hook_folder(env), "service.sock")


def forwarded(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in FORWARDED or k.startswith(FORWARDED_PREFIXES)}


class Untrusted(Exception):
    """A folder or socket that another user may control; the message says why."""


def owner_name(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def open_private(folder: str, uid: int | None = None) -> int:
    """``folder`` opened without following a link, once checked on the open
    descriptor to belong to this user (or root) and to be writable by no one
    else: what is checked is what is used. Raises :class:`Untrusted` (or
    OSError where it cannot be opened at all)."""
    uid = os.getuid() if uid is None else uid
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(folder):
            raise Untrusted(f"{folder} is a symbolic link, not a folder") from None
        raise
    info = os.fstat(fd)
    why = None
    if info.st_uid not in (uid, 0):
        why = f"{folder} belongs to {owner_name(info.st_uid)}, not to this user"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = f"{folder} is writable by others"
    if why is not None:
        os.close(fd)
        raise Untrusted(why)
    return fd


def through(fd: int, name: str) -> str:
    """A path to ``name`` in the open folder ``fd`` that no rename of the
    folder's own path can redirect."""
    return f"/proc/self/fd/{fd}/{name}"


def peer_uid(conn: _socket.socket) -> int | None:
    """The user of the process at the other end (Linux ``SO_PEERCRED``: pid,
    uid, gid as native ints)."""
    try:
        raw = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        return None
    return int.from_bytes(raw[4:8], sys.byteorder)


def peer_pid(conn: _socket.socket) -> int | None:
    """The process at the other end, by its pid in this process's namespace."""
    try:
        raw = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        return None
    return int.from_bytes(raw[0:4], sys.byteorder) or None


class Wedged(Exception):
    """The service did not answer in time a moment ago: not asked again yet."""


def connect(path: str, wait: float = CONNECT_WAIT) -> _socket.socket:
    """A connection to the service at ``path``, made through its checked
    folder and kept only when the server is this user's. Raises
    :class:`Untrusted`, :class:`Wedged`, or OSError where there is nothing
    to connect to."""
    uid = os.getuid()
    folder, name = os.path.split(os.path.abspath(path))
    fd = open_private(folder, uid)
    try:
        if _wedged(fd):
            raise Wedged(path)
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != uid:
            raise Untrusted(f"{path} is not a socket of this user")
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(wait)
            try:
                conn.connect(through(fd, name))
            except FileNotFoundError:
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    raise
                conn.connect(path)  # no /proc: the peer's check below still holds
            answering = peer_uid(conn)
            if answering != uid:
                raise Untrusted(f"{path} is answered by {owner_name(answering or -1)}")
        except BaseException:
            conn.close()
            raise
        return conn
    finally:
        os.close(fd)


def _wedged(fd: int) -> bool:
    """Whether the mark in the open folder ``fd`` says the service did not
    answer less than :data:`WEDGED_FOR` seconds ago."""
    try:
        mark = os.open(WEDGED_MARK, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        return False
    try:
        until = float(os.read(mark, 32))
    except (OSError, ValueError):
        return False
    finally:
        os.close(mark)
    now = time.time()
    return now < until <= now + WEDGED_FOR


def remember_wedged(path: str) -> None:
    """Mark the service at ``path`` as not answering, for :data:`WEDGED_FOR`
    seconds (best effort: a folder the hook cannot write is left as it is)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd = open_private(folder)
    except (OSError, Untrusted):
        return
    temp = f".{WEDGED_MARK}.{os.getpid()}"
    try:
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        try:
            os.write(out, str(time.time() + WEDGED_FOR).encode())
        finally:
            os.close(out)
        os.replace(temp, WEDGED_MARK, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def trusted(path: str) -> bool:
    """Whether ``path`` is a socket of this user in a folder no one else
    can write to (owned by this user or root)."""
    return untrusted_why(path) is None


def untrusted_why(path: str) -> str | None:
    """Why ``path`` is not a socket the hooks may use; None when it is."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        fd = open_private(folder)
    except Untrusted as exc:
        return str(exc)
    except OSError as exc:
        return f"{folder} cannot be opened ({exc.strerror})"
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
        return f"{path} is not a socket of this user"
    return None


#: the name of a run's sign-of-life file starts so (``process._alive_file``):
#: a hook touches no other file, whatever its variable names
ALIVE_PREFIX = "afk-alive-"


def touch_alive(env: Mapping[str, str]) -> None:
    """A hook fired: a sign of life for the supervisor that watches its agent
    for a stall (``afk loop`` gives the agent ``AFK_ALIVE_FILE``). No
    database, no service: a file's time."""
    path = env.get("AFK_ALIVE_FILE")
    if path and os.path.isabs(path) and os.path.basename(path).startswith(ALIVE_PREFIX):
        try:  # noqa: SIM105 - the fast path imports no more than it must
            os.utime(path, follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass


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
    import json  # (rare: the bytes said StopFailure)

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
    global why_not
    path = socket_path(env)
    if path is None:
        why_not = "AFK_HOOK_SOCKET is off"
        return None
    header = encode_request(argv, forwarded(env)) + b"\n"
    if len(header) > MAX_HEADER:
        why_not = "its environment is too large to send"
        return None
    try:
        conn = connect(path)  # nothing is sent before the peer is checked
        try:
            conn.settimeout(ANSWER_WAIT)
            conn.sendall(header + payload)
            conn.shutdown(_socket.SHUT_WR)
            answer = receive(conn, time.monotonic() + ANSWER_WAIT)
        finally:
            conn.close()
    except TimeoutError:  # connected or not, no answer in time: a wedged service
        remember_wedged(path)
        why_not = f"the service on {path} did not answer in time"
        return None
    except Wedged:
        why_not = f"the service on {path} did not answer a moment ago"
        return None
    except Untrusted as exc:
        why_not = str(exc)
        return None
    except OSError as exc:
        why_not = f"no service answers on {path} ({exc.strerror or exc})"
        return None
    if answer is None:
        remember_wedged(path)
        why_not = f"the service on {path} did not answer in time"
        return None
    said = decode_answer(answer)
    if said is None:
        why_not = "the service's answer is not JSON"
        return None
    if said.get("fallback") is not None:
        why_not = f"the service handed it back: {said['fallback']}"
    return dict(said)


def encode_request(argv: list[str], env: Mapping[str, str]) -> bytes:
    """``{"argv": [...], "env": {...}}`` in JSON, by the C encoder of
    strings (the json package costs the hook a few milliseconds)."""
    quote = _json.encode_basestring_ascii
    args = ",".join(quote(a) for a in argv)
    pairs = ",".join(f"{quote(k)}:{quote(v)}" for k, v in env.items())
    return f'{{"argv":[{args}],"env":{{{pairs}}}}}'.encode("ascii")


def decode_answer(raw: bytes) -> dict[str, str | None] | None:
    """The service's answer, a JSON object of strings (or null), read by the
    C scanner of strings; None for anything else."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    out: dict[str, str | None] = {}
    i, n = _skip(text, 0), len(text)
    if i >= n or text[i] != "{":
        return None
    i = _skip(text, i + 1)
    if i < n and text[i] == "}":
        return out
    while i < n:
        if text[i] != '"':
            return None
        try:
            key, i = _json.scanstring(text, i + 1)
        except ValueError:
            return None
        i = _skip(text, i)
        if i >= n or text[i] != ":":
            return None
        i = _skip(text, i + 1)
        if text.startswith("null", i):
            value, i = None, i + 4
        elif i < n and text[i] == '"':
            try:
                value, i = _json.scanstring(text, i + 1)
            except ValueError:
                return None
        else:
            return None
        out[key] = value
        i = _skip(text, i)
        if i < n and text[i] == ",":
            i = _skip(text, i + 1)
            continue
        return out if i < n and text[i] == "}" and _skip(text, i + 1) == n else None
    return None


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


#: why the last :func:`exchange` got no answer to use (``AFK_HOOK_EXPLAIN=1``
#: has `afk hook` say it: `afk doctor --live` reads it)
why_not: str | None = None


def receive(conn: _socket.socket, deadline: float, limit: int = MAX_PAYLOAD) -> bytes | None:
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
