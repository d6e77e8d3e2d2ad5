"""The boundary of a run (``afk loop --sandbox``): the agent runs inside
Anthropic's sandbox runtime (the ``srt`` command, ``@anthropic-ai/sandbox-
runtime`` on the npm registry; on Linux it runs the command under bubblewrap
with no network of its own, and its traffic through proxies on the host),
with a settings file afk writes for the run:

what a run reaches is decided in one room, :mod:`watchdog.agents.reach`
(:func:`~watchdog.agents.reach.of_run`); this module says it in the engine's
words, runs the engine, and reads the engine's log. The agent reaches afk
through its broker's Unix socket, in a folder only its run sees (connecting
to a socket needs no write: a read-only folder holds it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import BadInput
from . import reach
from .credential import BROKER
from .harnesses import Harness, harness_of

ENGINE = "srt"


#: what installs the engine and its parts
INSTALL = (
    "npm install -g @anthropic-ai/sandbox-runtime; on Linux it needs bubblewrap, socat and "
    "ripgrep: apt install bubblewrap socat ripgrep"
)


class EngineMissing(BadInput):
    """The sandbox engine is not installed; :data:`INSTALL` says how."""

    def __init__(self, engine: str) -> None:
        super().__init__(
            f"afk loop --sandbox: the sandbox engine {engine!r} is not installed ({INSTALL}); "
            "nothing was claimed"
        )
        self.engine = engine


def locate(configured: str, env: Mapping[str, str]) -> str:
    """The engine's command: the setting (AFK_SRT), else ``srt`` on PATH.
    :class:`EngineMissing` where there is none."""
    found = shutil.which(configured or ENGINE, path=env.get("PATH"))
    if found is None:
        raise EngineMissing(configured or ENGINE)
    return found


def version(engine: str) -> str:
    """The engine's version, as it says it (``?`` when it says nothing)."""
    try:
        said = subprocess.run(
            [engine, "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    return said.splitlines()[0] if said else "?"


def settings(given: reach.Reach) -> dict[str, object]:
    """The engine's settings file for one run's reach."""
    return {
        "filesystem": {
            "denyRead": list(given.denied),
            "allowRead": list(given.readable),
            "allowWrite": list(given.writable),
            "denyWrite": list(given.read_only),
        },
        "network": {
            "allowedDomains": [h for h in given.hosts if h not in given.denied_hosts],
            "deniedDomains": list(given.denied_hosts),
            # (the broker's socket: the engine blocks every Unix socket on Linux
            # otherwise; the others are hidden by their paths, reach.socket_paths)
            "allowAllUnixSockets": True,
        },
    }


#: the line before afk's block in a task's own ``.git/info/exclude``
EXCLUDE_MARK = "# afk: the sandbox engine's placeholders, never a run's work"


def ready_folder(work: str) -> None:
    """The task folder ``work`` ready for the engine (issue 50 item 1): its
    own git ignores the placeholders the engine mounts where what it protects
    is absent (:data:`reach.PLACEHOLDERS`, in ``.git/info/exclude``: not the
    person's shared one), and a placeholder folder inside a folder the
    repository commits and a run may not write (``.claude/commands`` when
    ``.claude/`` is committed) is made, empty, so the engine need not create
    it where it cannot. Never through a link a run could have left."""
    dot = os.path.join(work, ".git")
    info = os.path.join(dot, "info")
    if os.path.isdir(dot) and not os.path.islink(dot) and not os.path.islink(info):
        os.makedirs(info, exist_ok=True)
        path = os.path.join(info, "exclude")
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                said = set(f.read(1 << 20).splitlines())
        except FileNotFoundError:
            said = set()
        lines = [f"/{p}" for p in reach.PLACEHOLDERS]
        missing = [line for line in lines if line not in said]
        if missing:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            with contextlib.suppress(OSError):  # (a link there: left as it is)
                fd = os.open(path, flags, 0o644)
                with os.fdopen(fd, "a", encoding="utf-8") as out:
                    out.write("\n".join(["", EXCLUDE_MARK, *missing, ""]))
    for folder in reach.ENGINE_FOLDERS:
        parent, _ = os.path.split(folder)
        above = os.path.join(work, parent)
        if parent and os.path.isdir(above) and not os.path.islink(above):
            with contextlib.suppress(OSError):
                os.mkdir(os.path.join(work, folder))


def wrap(
    argv: Sequence[str], engine: str, settings_path: str, tmp: str, log: bool = False
) -> list[str]:
    """``argv`` run by the engine under ``settings_path``, with ``tmp`` its
    temporary folder (the engine would name one of its own). The engine tells
    the command to reach loopback hosts directly (NO_PROXY), which inside
    has no network: every host, a local gateway's included, goes through its
    proxy, which lets through only the hosts allowed. ``log``: the engine
    writes its log to the run's stderr (SRT_DEBUG; see :class:`EngineLog`);
    the command inside does not inherit the variable."""
    # (the engine's own TMPDIR as well: it makes its proxies' sockets there)
    debug = ["SRT_DEBUG=1"] if log else []
    return ["env", f"TMPDIR={tmp}", *debug, engine, "--settings", settings_path, "--",
            "env", "-u", "NO_PROXY", "-u", "no_proxy", "-u", "SRT_DEBUG", f"TMPDIR={tmp}",
            *argv]  # fmt: skip


#: how the engine begins each line of its log on the run's stderr
LOG_PREFIX = b"[SandboxDebug] "
#: the engine's proxy's word for each host a run tried: allowed or not
#: (srt 0.0.78 and 0.0.83: "No matching rule" is 0.0.83's, with its
#: per-command rules; its "asking user" has no one to ask in a run: denied)
DECIDED = (
    (b"Allowed by config rule: ", True),
    (b"Allowed by per-command rule: ", True),
    (b"No matching config rule, denying: ", False),
    (b"No matching rule, denying: ", False),
    (b"No matching rule, asking user: ", False),
    (b"Denied by config rule: ", False),
)
#: words of a line of the engine's about a host: one that none of DECIDED
#: reads (another version's wording) is kept, and the loop warns of it
ABOUT_A_HOST = (b"denying", b"Denied by", b"Allowed by")
#: distinct hosts a run's record keeps (the rest are counted as "(others)")
MAX_HOSTS = 100


class EngineLog:
    """The engine's log, taken out of a sandboxed run's stderr as it streams:
    what its proxy decided for each host the run tried (``runs[].sandbox
    .hosts_tried``), and none of its lines passed on as the agent's output.
    (The agent writes to the same stream: it could add lines of its own that
    look like the engine's, which only makes its own record worse.)"""

    def __init__(self) -> None:
        #: (host, allowed) -> how many times
        self.tried: dict[tuple[str, bool], int] = {}
        self._block = False  # inside a multi-line value the engine logged
        #: lines about a host that none of DECIDED read (the first few)
        self.unread: list[str] = []

    def take(self, chunk: bytes) -> bytes:
        """``chunk`` without the engine's lines (read as they go)."""
        if LOG_PREFIX not in chunk and not self._block:
            return chunk
        kept = bytearray()
        for piece in chunk.splitlines(keepends=True):
            if self._block:
                self._block = piece.rstrip() not in (b"}", b"]")
                continue
            at = piece.find(LOG_PREFIX)
            if at < 0:
                kept += piece
                continue
            kept += piece[:at]  # (the agent's unfinished line before it)
            said = piece[at + len(LOG_PREFIX) :].rstrip()
            self._block = said in (b"{", b"[")
            for words, allowed in DECIDED:
                if said.startswith(words):
                    self._count(said[len(words) :].decode("utf-8", "replace"), allowed)
                    break
            else:
                about = not said.startswith(b"[") and any(w in said for w in ABOUT_A_HOST)
                if about and len(self.unread) < 5:
                    self.unread.append(said.decode("utf-8", "replace")[:300])
        return bytes(kept)

    def _count(self, host: str, allowed: bool) -> None:
        host = host.strip()[:300] or "(none)"
        if (host, allowed) not in self.tried and len(self.tried) >= MAX_HOSTS:
            host = "(others)"
        self.tried[(host, allowed)] = self.tried.get((host, allowed), 0) + 1

    def record(self) -> list[dict[str, object]]:
        """Each host tried, allowed or not, and how often: denied first."""
        return [
            {"host": host, "allowed": allowed, "count": n}
            for (host, allowed), n in sorted(self.tried.items(), key=lambda x: (x[0][1], x[0][0]))
        ]


@dataclass(frozen=True)
class Boundary:
    """What a loop's runs are held to; :meth:`wrap` puts one run inside."""

    #: the engine's command, and its version as it says it
    engine: str
    version: str
    #: hosts the person allowed (--allow-host, AFK_ALLOW_HOSTS)
    allow: tuple[str, ...] = ()
    #: never readable: afk's home and settings, the database's sockets, --deny-read
    deny_read: tuple[str, ...] = ()
    #: never reachable: the database's addresses
    denied_hosts: tuple[str, ...] = ()
    #: the service's HTTP hook address (AFK_HOOK_HTTP), reachable when set
    hook_http: str | None = None
    #: where every task's worktree lives: none but the run's own is readable
    worktrees: str | None = None
    #: every profile's harness state folder it knows (a profile's --env
    #: CLAUDE_CONFIG_DIR, say): none but the run's own is read
    homes: tuple[str, ...] = ()
    #: the server said where its own sockets are (False: only the DSN's, the
    #: usual folders and /tmp's are hidden; afk doctor --sandbox says so)
    server_sockets_known: bool = True

    def settings_for(
        self, harness: Harness | None, env: Mapping[str, str], work: str, run_dir: str,
        git_dir: str | None,
    ) -> dict[str, object]:  # fmt: skip
        """The engine's settings for a run of ``harness`` (None: a command of no
        harness, a check) working in ``work`` (its worktree, or its folder),
        with ``run_dir`` its own folder and ``git_dir`` the repository's git
        folder a worktree commits into: its reach (:func:`reach.of_run`). Its
        broker is the one its environment names; every other run's folder and
        broker, in :func:`reach.runs_root`, is hidden."""
        broker = env.get(BROKER)
        own = [os.path.dirname(broker)] if broker else []
        denied = [*self.deny_read, reach.runs_root()]
        if self.worktrees is not None:
            denied.append(self.worktrees)
        return settings(
            reach.of_run(
                harness,
                env,
                work=work,
                tmp=os.path.join(run_dir, "tmp"),
                own=own,
                git_dir=git_dir,
                denied=denied,
                allow=self.allow,
                hook_http=self.hook_http,
                denied_hosts=self.denied_hosts,
                homes=self.homes,
            )
        )

    def wrap(
        self, argv: Sequence[str], harness: Harness | None, env: Mapping[str, str], work: str,
        run_dir: str, git_dir: str | None, log: bool = False,
    ) -> list[str]:  # fmt: skip
        """``argv``, a run of ``harness``, inside the boundary: its settings written in ``run_dir``
        (the run's own folder, whose ``tmp`` is the run's temporary folder).
        ``log``: the engine's log on its stderr (an agent's run, read by an
        :class:`EngineLog`)."""
        path, tmp = os.path.join(run_dir, "srt-settings.json"), os.path.join(run_dir, "tmp")
        ready_folder(work)
        given = self.settings_for(harness, env, work, run_dir, git_dir)
        with open(path, "w", encoding="utf-8") as out:
            json.dump(given, out, indent=1)
        return wrap(argv, self.engine, path, tmp, log)

    def record(self, command: Sequence[str], env: Mapping[str, str]) -> dict[str, object]:
        """What a run records of its boundary (``runs[].sandbox``)."""
        hosts = reach.allowed_hosts(harness_of(command), env, self.allow, self.hook_http)
        return {"engine": ENGINE, "version": self.version, "hosts_allowed": hosts}
