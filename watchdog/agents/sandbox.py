"""The boundary of a run (``afk loop --sandbox``): the agent runs inside
Anthropic's sandbox runtime (the ``srt`` command, ``@anthropic-ai/sandbox-
runtime`` on the npm registry; on Linux it runs the command under bubblewrap
with no network of its own, and its traffic through proxies on the host),
with a settings file afk writes for the run:

- **writes** only in the task's worktree (with the repository's git folder,
  less its config and hooks), the run's private temporary folder, and the
  harness's own state (:data:`STATE`); the agent's own config in the
  worktree (:data:`PINNED`) stays read-only;
- **reads** denied to afk's home (its settings, the embedded server's data
  and socket, the other tasks' worktrees), the database's socket folder,
  :data:`DENIED_HOME` and what ``--deny-read`` adds;
- **the network** only to the harness's model API (:data:`API`, or the host
  of the variable that moves it), the service's HTTP hook address, and what
  ``--allow-host`` adds; the database's address is denied whatever is allowed.

The agent reaches afk through its broker's Unix socket (connecting to a
socket needs no write: a read-only folder holds it). This module decides;
the loop writes the file and runs the command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import BadInput
from .harnesses import Harness, harness_of

ENGINE = "srt"
#: under the home: never readable inside
DENIED_HOME = (
    ".ssh",
    ".aws",
    ".config/gh",
    ".netrc",
    ".docker",
    ".gnupg",
    ".kube",
    ".pgpass",
    ".pg_service.conf",
    ".config/gcloud",
    ".config/afk",
)
#: the agent's own configuration in its worktree: read-only inside (what a
#: branch changes there would otherwise run on the host at the next run)
PINNED = (".claude", ".mcp.json", ".codex", ".gemini", ".cursor", ".github/hooks")


def locate(configured: str, env: Mapping[str, str]) -> str:
    """The engine's command: the setting (AFK_SRT), else ``srt`` on PATH.
    BadInput, with what to install, where there is none."""
    found = shutil.which(configured or ENGINE, path=env.get("PATH"))
    if found is None:
        raise BadInput(
            f"afk loop --sandbox: the sandbox engine {configured or ENGINE!r} is not installed "
            "(npm install -g @anthropic-ai/sandbox-runtime; on Linux it needs bubblewrap, "
            "socat and ripgrep: apt install bubblewrap socat ripgrep); nothing was claimed"
        )
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


def host_of(value: str) -> str:
    """``HOST[:PORT]`` of a URL or of a ``HOST[:PORT]`` as given."""
    parts = urlsplit(value if "//" in value else f"//{value}")
    if not parts.hostname:
        raise BadInput(f"{value!r} names no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port}" if parts.port else host


def allowed_hosts(
    harness: Harness | None,
    env: Mapping[str, str],
    extra: Sequence[str],
    hook_http: str | None,
) -> list[str]:
    """The hosts a run may reach: its harness's model API (or the host its
    variable names instead), the service's HTTP hooks, and ``extra``."""
    out: list[str] = []
    if harness is not None:
        default, variable = harness.api
        moved = env.get(variable, "").strip() if variable else ""
        out.append(host_of(moved) if moved else default)
    if hook_http:
        out.append(host_of(hook_http))
    out.extend(host_of(h) for h in extra)
    return list(dict.fromkeys(out))


def settings(
    *,
    writable: Sequence[str],
    read_only: Sequence[str],
    denied: Sequence[str],
    readable: Sequence[str],
    hosts: Sequence[str],
    denied_hosts: Sequence[str],
) -> dict[str, object]:
    """The engine's settings file for one run."""
    return {
        "filesystem": {
            "denyRead": list(denied),
            "allowRead": list(readable),
            "allowWrite": list(writable),
            "denyWrite": list(read_only),
        },
        "network": {
            "allowedDomains": [h for h in hosts if h not in denied_hosts],
            "deniedDomains": list(denied_hosts),
            # (the broker's socket: Linux cannot tell one socket from another)
            "allowAllUnixSockets": True,
        },
    }


def home_paths(home: str, harness: Harness | None) -> tuple[list[str], list[str]]:
    """Under ``home``: what is denied to every run, and what the harness writes."""
    denied = [os.path.join(home, p) for p in DENIED_HOME]
    state = [os.path.join(home, p) for p in harness.state] if harness is not None else []
    return denied, state


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
DECIDED = (
    (b"Allowed by config rule: ", True),
    (b"No matching config rule, denying: ", False),
    (b"Denied by config rule: ", False),
)
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


def run_folder(prefix: str = "afk-run-") -> str:
    """A private folder (mode 0700) for one run's settings and temporary
    folder, or a broker's socket, that a sandboxed run can see: under a short
    path (a Unix socket's may not be longer than 107 bytes), never under
    /dev (the sandbox gives a run a /dev of its own)."""
    import tempfile

    base = tempfile.gettempdir()
    usable = len(base) <= 48 and not base.startswith("/dev/")
    return tempfile.mkdtemp(prefix=prefix, dir=base if usable else "/tmp")


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

    def settings_for(
        self, command: Sequence[str], env: Mapping[str, str], work: str, tmp: str,
        git_dir: str | None,
    ) -> dict[str, object]:  # fmt: skip
        """The engine's settings for a run of ``command`` working in ``work``
        (its worktree, or its folder), with ``tmp`` its temporary folder and
        ``git_dir`` the repository's git folder a worktree commits into."""
        harness = harness_of(command)
        home = env.get("HOME") or os.path.expanduser("~")
        denied, state = home_paths(home, harness)
        writable = [work, tmp, *state]
        read_only = [os.path.join(work, p) for p in PINNED]
        if git_dir is not None:  # (its commits go there; its config and hooks stay)
            writable.append(git_dir)
            read_only += [os.path.join(git_dir, p) for p in ("config", "hooks", "info")]
        denied += list(self.deny_read)
        if self.worktrees is not None:
            denied.append(self.worktrees)
        return settings(
            writable=writable,
            read_only=read_only,
            denied=denied,
            readable=[work],
            hosts=allowed_hosts(harness, env, self.allow, self.hook_http),
            denied_hosts=self.denied_hosts,
        )

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str], work: str, run_dir: str,
        git_dir: str | None, log: bool = False,
    ) -> list[str]:  # fmt: skip
        """``argv`` inside the boundary: its settings written in ``run_dir``
        (the run's own folder, whose ``tmp`` is the run's temporary folder).
        ``log``: the engine's log on its stderr (an agent's run, read by an
        :class:`EngineLog`)."""
        path, tmp = os.path.join(run_dir, "srt-settings.json"), os.path.join(run_dir, "tmp")
        given = self.settings_for(argv, env, work, tmp, git_dir)
        with open(path, "w", encoding="utf-8") as out:
            json.dump(given, out, indent=1)
        return wrap(argv, self.engine, path, tmp, log)

    def record(self, command: Sequence[str], env: Mapping[str, str]) -> dict[str, object]:
        """What a run records of its boundary (``runs[].sandbox``)."""
        hosts = allowed_hosts(harness_of(command), env, self.allow, self.hook_http)
        return {"engine": ENGINE, "version": self.version, "hosts_allowed": hosts}
