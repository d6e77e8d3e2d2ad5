"""``afk doctor``: what a user runs after installing, to learn whether the
protection is on. Each check says what it found and, when it fails, the fix.

- the database: reachable and migrated to what this afk knows;
- the watchdog service: some replica holds the leader lease (a dead service
  reclaims nothing);
- this machine's clock against the database's (leases are the database's);
- the settings that must fit together (the reclaim interval and the lease);
- git, for the tasks' workspaces; the sandbox, and with ``--sandbox`` its
  probes from inside;
- the agents: their hooks and harnesses, the hook service and ``--live``
  (:mod:`watchdog.agents.checkup`, the wing's half).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .agents.checkup import Check, check_harness, check_hook_service, check_live
from .agents.harnesses import BY_NAME, HARNESS_TABLE
from .config import Settings
from .errors import AfkError

#: seconds this machine's clock may be off the database's
CLOCK_SKEW = 2.0


def check_database(dsn: str, settings: Settings) -> list[Check]:
    from . import sql
    from .db import Database

    out = []
    db = Database(dsn, connect_timeout=5, retry_for=0)
    try:
        version = db.schema_version()
        known = max(v for v, _, _ in sql.migrations())
        if version == known:
            out.append(Check("database", True, f"reachable, schema {version} (current)"))
        elif version < known:
            out.append(
                Check("database", False, f"schema {version}, this afk needs {known}", "afk migrate")
            )
        else:
            out.append(
                Check(
                    "database",
                    False,
                    f"schema {version} is newer than this afk knows ({known})",
                    "upgrade afk-watchdog",
                )
            )
            return out
        row = db.row("doctor", {})
        out.append(check_clock(row["now"].timestamp(), time.time()))
        if row["leader"] is not None and row["leading"]:
            out.append(
                Check(
                    "watchdog",
                    True,
                    f"running: {row['leader']} leads (its lease good for "
                    f"{row['lease_left']:.0f} s more)",
                )
            )
        else:
            out.append(
                Check(
                    "watchdog",
                    False,
                    "no watchdog service leads: expired leases are not reclaimed and no "
                    "digest is sent",
                    "start it: afk watchdog run (deploy/systemd/afk-watchdog.service)",
                )
            )
    except AfkError as exc:
        out.append(Check("database", False, str(exc), "check AFK_DSN, --dsn or --config"))
    finally:
        db.close()
    return out


def check_clock(database: float, here: float) -> Check:
    """This machine's clock against the database's (both as Unix times)."""
    skew = abs(database - here)
    return Check(
        "clock",
        skew <= CLOCK_SKEW,
        f"this machine is {skew:.1f} s off the database's clock",
        None if skew <= CLOCK_SKEW else "synchronise this machine's clock (NTP)",
    )


def check_settings(settings: Settings) -> list[Check]:
    try:
        settings.service.check_against(settings.queue)
    except AfkError as exc:
        return [Check("settings", False, str(exc).removeprefix("invalid settings: "))]
    return [
        Check(
            "settings",
            True,
            f"lease {settings.queue.lease_seconds} s, reclaimed every "
            f"{settings.service.reclaim_interval:g} s",
        )
    ]


def run(
    dsn: str,
    settings: Settings,
    project: Path,
    home: Path,
    hook_argv: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    live: bool = False,
) -> list[Check]:
    harness = check_harness(project, home)
    hooked = any(c.ok and c.detail.startswith("afk's hooks") for c in harness)
    env = os.environ if env is None else env
    return [
        *check_database(dsn, settings),
        *check_settings(settings),
        check_git(dsn),
        check_sandbox(settings, env),
        *harness,
        *([check_hook_service(hook_argv or [], env)] if hooked else []),
        *(
            check_live(project, home, env, settings.service.hook_http or None, hook_proof(dsn))
            if live
            else []
        ),
    ]


def hook_proof(dsn: str) -> str | None:
    """The secret the service proves itself with on the hook port (R1: a
    process squatting the port cannot): read from the database, which a
    squatter cannot read; "" when no service made it yet (so none answers
    hooks for this database); None when the database cannot be reached."""
    from .db import Database
    from .links import HOOK_PROOF

    try:
        db = Database(dsn, connect_timeout=5, retry_for=0)
        try:
            row = db.one("hook_proof_secret", {"name": HOOK_PROOF})
        finally:
            db.close()
    except AfkError:
        return None
    return "" if row is None else str(row["value"])  # ("": no service ever answered)


def check_sandbox(settings: Settings, env: Mapping[str, str]) -> Check:
    """Whether afk loop holds its runs to a boundary (AFK_SANDBOX), and with
    what engine; said when it is off."""
    from .agents import sandbox

    if not settings.loop.sandbox:
        return Check(
            "sandbox",
            True,
            "off: afk loop runs agents on this machine as you (afk loop --sandbox, or "
            "AFK_SANDBOX=1, holds each run to its worktree and its hosts)",
        )
    try:
        engine = sandbox.locate(settings.loop.srt, env)
    except sandbox.EngineMissing as exc:
        return engine_missing(exc)
    return Check("sandbox", True, f"on: {engine} {sandbox.version(engine)}")


def engine_missing(exc: Any) -> Check:
    """A missing sandbox engine, as afk doctor says it: once, with what
    installs it."""
    from .agents import sandbox

    return Check(
        "sandbox", False, f"the sandbox engine {exc.engine!r} is not installed", sandbox.INSTALL
    )


#: what `afk doctor --sandbox` runs inside the boundary, as a run would be
#: run: each probe's name and whether it got through (argv[1]: JSON of what
#: to try)
SANDBOX_PROBE = r"""
import json, os, socket, sys, urllib.parse
want = json.loads(sys.argv[1])
out = {}

def attempt(name, fn):
    try:
        said = fn()
    except Exception as exc:
        out[name] = [False, f"{type(exc).__name__}: {exc}"[:160]]
    else:
        out[name] = [True, str(said)[:160]]

def write_outside():
    path = os.path.join(want["home"], ".afk-sandbox-probe")
    with open(path, "w") as f:
        f.write("x")
    os.unlink(path)
    return path

def read(path, seen):
    # a folder denied shows empty inside: what is seen of it outside must not be
    if os.path.isdir(path):
        shown = set(os.listdir(path)) & set(seen)
        if not shown:
            raise PermissionError("nothing of it is seen")
        return sorted(shown)
    return open(path).read(1) and "read"

def connect(where):
    if where.startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(where)
    else:
        host, _, port = where.rpartition(":")
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=3)
    s.close()
    return where

def through_proxy(host):
    proxy = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY") or os.environ["HTTP_PROXY"])
    target = host if ":" in host.rsplit("]", 1)[-1] else f"{host}:443"
    s = socket.create_connection((proxy.hostname, proxy.port or 80), timeout=10)
    auth = ""
    if proxy.username:
        import base64
        unquote = urllib.parse.unquote
        pair = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
        auth = "Proxy-Authorization: Basic " + base64.b64encode(pair.encode()).decode() + "\r\n"
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n".encode())
    status = s.recv(200).split(b"\r\n", 1)[0].decode(errors="replace")
    s.close()
    if " 200" in status:
        return status
    if " 502" in status or " 504" in status:  # the proxy let it through; no answer there
        return f"allowed; the host did not answer from this machine ({status})"
    raise ConnectionRefusedError(status or "no answer")

attempt("write outside the worktree", write_outside)
for path, seen in want["read"].items():
    attempt(f"read {path}", lambda p=path, s=seen: read(p, s))
for where in want["database"]:
    attempt(f"connect to the database at {where}", lambda w=where: connect(w))
attempt(f"reach {want['denied_host']}, a host not on the list",
        lambda: through_proxy(want["denied_host"]))
for host in want["hosts"]:
    attempt(f"reach {host}", lambda h=host: through_proxy(h))
print(json.dumps(out))
"""


def _readable(*paths: str) -> dict[str, list[str]]:
    """Each path with something to leak, and what of it is seen from here
    (a file: [], read inside or not; an empty folder: left out)."""
    out: dict[str, list[str]] = {}
    for path in paths:
        if os.path.isdir(path):
            try:
                names = sorted(os.listdir(path))[:50]
            except OSError:
                continue
            if names:
                out[path] = names
        elif os.path.isfile(path):
            out[path] = []
    return out


def _sockets_in(path: str) -> list[str]:
    """The PostgreSQL sockets a path the boundary hides is or holds."""
    if not os.path.isdir(path):
        return [path] if _is_socket_name(os.path.basename(path)) else []
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted(os.path.join(path, n) for n in names if _is_socket_name(n))


def _is_socket_name(name: str) -> bool:
    return name.startswith(".s.PGSQL.") and name[9:].isdigit()


def check_sandbox_probes(boundary: Any, dsn: str, env: Mapping[str, str]) -> list[Check]:
    """`afk doctor --sandbox`: the boundary proved on this machine with probes
    run through it exactly as a run would be. What must fail, each: a write
    outside the worktree, a read of ~/.ssh and of afk's home and settings,
    the database's address, a host not on the list; what must work: each
    allowed host (the model API's, or --allow-host)."""
    import shutil
    import subprocess
    import sys

    from .agents import reach
    from .db import addresses

    home = env.get("HOME") or os.path.expanduser("~")
    tcp, sockets = addresses(dsn)
    harness = BY_NAME["claude"]  # (the probes run as a run of it: its model API allowed)
    hosts = reach.allowed_hosts(harness, env, boundary.allow, None)
    found = [s for p in boundary.deny_read for s in _sockets_in(p)]
    want = {
        "home": home,
        "read": _readable(os.path.join(home, ".ssh"), *boundary.deny_read),
        "database": list(dict.fromkeys([*tcp, *sockets, *found])),
        "denied_host": "example.com:80",
        "hosts": hosts,
    }
    run_dir = reach.run_folder()
    work = os.path.join(run_dir, "work")
    os.mkdir(work)
    os.mkdir(os.path.join(run_dir, "tmp"))
    argv = [sys.executable, "-I", "-c", SANDBOX_PROBE, json.dumps(want)]
    why = ""
    try:
        wrapped = boundary.wrap(argv, harness, env, work, run_dir, None)
        proc = subprocess.run(
            wrapped, cwd=work, env=dict(env), capture_output=True, text=True, timeout=120
        )
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        said = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        detail = f"the probes did not run through the engine: {why or exc}"[:300]
        return [Check("sandbox probes", False, detail, f"{boundary.engine} --debug -- true")]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    out = []
    homes = {
        "each profile's own, its settings kept out of the run": [
            h.name for h in HARNESS_TABLE if h.home_variable and h.isolate
        ],
        "each profile's own, its hooks afk's alone before each run, but other settings a "
        "run writes there apply to its next run, inside the sandbox": [
            h.name for h in HARNESS_TABLE if h.home_variable and h.home_hooks and not h.isolate
        ],
        "each profile's own, but the settings a run writes there apply to its next run, "
        "inside the sandbox": [
            h.name for h in HARNESS_TABLE if h.home_variable and not h.isolate and not h.home_hooks
        ],
        "under your home, writable to their runs, their settings and hooks applying there": [
            h.name for h in HARNESS_TABLE if not h.home_variable
        ],
    }
    detail = "; ".join(f"{', '.join(names)}: {how}" for how, names in homes.items() if names)
    out.append(Check("sandbox: the harness's own folder", True, detail))
    if not boundary.server_sockets_known:
        out.append(
            Check(
                "sandbox: the server's own sockets",
                True,
                "could not ask the server where its Unix sockets are (its role may not read "
                "unix_socket_directories): hidden are the DSN's folder, PGHOST's, "
                "/var/run/postgresql, /run/postgresql and /tmp/.s.PGSQL.*",
                "GRANT pg_read_all_settings TO the loop's role, or --deny-read the folder",
            )
        )
    for name, (through, why) in said.items():
        must_reach = name in {f"reach {h}" for h in hosts}
        ok = through if must_reach else not through
        if ok:
            detail = "reached" if must_reach else f"refused ({why})"
            out.append(Check(f"sandbox: {name}", True, detail))
        elif must_reach:
            out.append(
                Check(
                    f"sandbox: {name}",
                    False,
                    f"not reached: {why}",
                    "check the host, or --allow-host",
                )
            )
        else:
            out.append(
                Check(
                    f"sandbox: {name}",
                    False,
                    "got through the boundary",
                    "check the engine and its parts (bubblewrap, socat)",
                )
            )
    return out


def check_git(dsn: str) -> Check:
    """Git, for the tasks' workspaces (--repo): present, and new enough for
    `afk review`'s `git merge-tree --write-tree`. Needed only once a task
    asks for a workspace."""
    from . import git, workspaces
    from .db import Database

    version = git.git_version()
    needed = ".".join(map(str, git.GIT_NEEDED))
    fix = f"install git {needed} or later (Debian: apt-get install git)"
    try:
        db = Database(dsn, connect_timeout=5, retry_for=0)
        try:
            in_use = workspaces.used(db)
        finally:
            db.close()
    except AfkError:
        in_use = False  # (the database check says what is wrong there)
    if version is None:
        if in_use:
            return Check("git", False, "git is not installed; tasks here ask for workspaces", fix)
        return Check("git", True, "not installed (needed only for workspaces: --repo)")
    shown = ".".join(map(str, version))
    if version < git.GIT_NEEDED:
        return Check("git", not in_use, f"git {shown} is older than {needed} (afk review)", fix)
    return Check("git", True, f"git {shown}")
