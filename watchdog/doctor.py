"""``afk doctor``: what a user runs after installing, to learn whether the
protection is on. Each check says what it found and, when it fails, the fix.

- the database: reachable and migrated to what this afk knows;
- the watchdog service: some replica holds the leader lease (a dead service
  reclaims nothing);
- this machine's clock against the database's (leases are the database's);
- the settings that must fit together (the reclaim interval and the lease);
- each agent settings file found (the project's and the user's, for Claude
  Code and Codex CLI): afk's hook entries present for the events that matter,
  their commands absolute and executable, and hooks not disabled
  (``disableAllHooks``, ``allowManagedHooksOnly``).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .agents import hooklink
from .agents.harnesses import (
    BY_NAME,
    HARNESS_TABLE,
    SURVIVE_EXIT,
    codex_home,
    is_our_entry,
    is_ours,
    read_settings,
    written_by_afk,
)
from .config import Settings
from .errors import AfkError, BadInput

#: seconds this machine's clock may be off the database's
CLOCK_SKEW = 2.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}

    def line(self) -> str:
        head = f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"  # (aligned)
        return head if self.ok or not self.fix else f"{head} (fix: {self.fix})"


def settings_files(project: Path, home: Path) -> list[tuple[str, Path]]:
    """The agent settings files afk's hooks may be in (each harness's own)."""
    return [(h.name, path) for h in HARNESS_TABLE for path in h.files(project, home)]


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


def check_harness(project: Path, home: Path) -> list[Check]:
    out = []
    found_any = False
    for kind, path in settings_files(project, home):
        if not path.is_file():
            continue
        name = f"{kind} {path}"
        try:
            data = read_settings(path, comments=kind == "gemini")  # Gemini's is JSONC
        except BadInput as exc:
            out.append(Check(name, False, f"cannot be read: {exc}", "fix the file"))
            continue
        if "hooks" in data and not isinstance(data["hooks"], dict):
            out.append(Check(name, False, "'hooks' is not an object of events", "fix the file"))
            continue
        odd = sorted(e for e, v in (data.get("hooks") or {}).items() if not isinstance(v, list))
        if odd:  # (the harness reads no hook of such an event, afk's included)
            why = f"the hooks of {', '.join(odd)} are not a list: none of them runs"
            out.append(Check(name, False, why, "fix the file"))
        if data.get("disableAllHooks") is True:
            out.append(
                Check(name, False, "disableAllHooks is on: no hook runs", "remove disableAllHooks")
            )
        if data.get("allowManagedHooksOnly") is True:
            out.append(
                Check(
                    name,
                    False,
                    "allowManagedHooksOnly is on: hooks from this file do not run",
                    "install afk's hooks in the managed settings",
                )
            )
        hooks = data.get("hooks")
        ours = _our_commands(hooks if isinstance(hooks, dict) else {})
        if not ours:
            continue
        found_any = True
        missing = [e for e in BY_NAME[kind].needed if e not in ours]
        if missing:
            out.append(
                Check(
                    name,
                    False,
                    f"afk's hook is missing for {', '.join(missing)}",
                    f"afk hooks {kind} --install {path}",
                )
            )
        for event, commands in sorted(ours.items()):
            for command in commands:
                problem = _command_problem(command, kind)
                if problem:
                    out.append(
                        Check(
                            name, False, f"{event}: {problem}", f"afk hooks {kind} --install {path}"
                        )
                    )
        if not any(c.name == name and not c.ok for c in out):
            out.append(Check(name, True, f"afk's hooks for {', '.join(sorted(ours))}"))
        seen = check_worktree_sees(kind, path, project)
        if seen is not None:
            out.append(seen)
        if kind == "claude" and _fails_closed(hooks):
            out.append(check_fail_closed())
        if kind == "codex" and not any(c.name.startswith("codex trust") for c in out):
            out.append(check_codex_trust(home))
        if kind == "codex" and path == project / ".codex" / "hooks.json":
            out.append(check_codex_project(project, home))
    if not found_any:
        out.append(
            Check(
                "hooks",
                False,
                "no agent settings file here or in your home holds afk's hooks",
                "afk hooks claude --install .claude/settings.json",
            )
        )
    return out


def check_worktree_sees(kind: str, path: Path, project: Path) -> Check | None:
    """What an agent in a task's worktree sees of a project's settings file
    (issue 41 item 1): a worktree is made from committed files, so a file
    git does not track is not in it. Claude Code is given afk's hooks by
    ``afk loop`` itself (``--settings``); another harness runs without them.
    None where it does not matter (a file in the home, no repository)."""
    from . import workspaces

    try:
        path.relative_to(project)
    except ValueError:
        return None
    top = workspaces.toplevel(str(project))
    if top is None:
        return None
    name = f"{kind} {path} in a worktree"
    if workspaces.tracked(top, str(path)):
        return Check(name, True, "committed: a task's worktree holds it")
    if kind == "claude":
        return Check(
            name,
            True,
            "not committed, so not in a task's worktree: afk loop gives Claude Code "
            "afk's hooks itself there (--settings)",
        )
    return Check(
        name,
        False,
        "not committed, so not in a task's worktree: an agent there runs without afk's hooks",
        f"commit {path.relative_to(project)}, or install afk's hooks in your home's settings",
    )


#: the first Claude Code that reads an HTTP hook's onFailure (--fail-closed)
FAIL_CLOSED_SINCE = (2, 1, 295)


def _fails_closed(hooks: Any) -> bool:
    groups = hooks.get("PreToolUse") if isinstance(hooks, dict) else None
    for group in groups if isinstance(groups, list) else []:
        entries = group.get("hooks") if isinstance(group, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            blocks = isinstance(entry, dict) and entry.get("onFailure") == "block"
            if blocks and is_our_entry(entry):
                return True
    return False


def check_fail_closed() -> Check:
    """`--fail-closed` is `"onFailure": "block"`, which a Claude Code before
    2.1.295 ignores: its PreToolUse would fail open, silently."""
    import re
    import shutil
    import subprocess

    name = "claude fail-closed"
    claude = shutil.which("claude")
    if claude is None:
        return Check(name, True, "claude is not on PATH here: its version is not checked")
    try:
        said = subprocess.run(
            [claude, "--version"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", said)
    if found is None:
        return Check(name, True, "claude's version could not be read")
    version = tuple(int(n) for n in found.groups())
    shown, needed = ".".join(found.groups()), ".".join(map(str, FAIL_CLOSED_SINCE))
    if version < FAIL_CLOSED_SINCE:
        return Check(
            name,
            False,
            f"--fail-closed needs Claude Code {needed} or later; {shown} ignores onFailure "
            "and lets a tool call through when the service does not answer",
            "upgrade Claude Code (npm install -g @anthropic-ai/claude-code)",
        )
    return Check(name, True, f"Claude Code {shown} blocks a tool call the service does not answer")


def _our_commands(hooks: dict[str, Any]) -> dict[str, list[str]]:
    """afk's hook commands in a settings file's ``hooks``, per event."""
    out: dict[str, list[str]] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(group, dict) and ("command" in group or "bash" in group):
                entries = [group]  # a flat entry (Cursor's and Copilot CLI's formats)
            for entry in entries if isinstance(entries, list) else []:
                if not isinstance(entry, dict):
                    continue
                command = entry.get("command", entry.get("bash"))
                if isinstance(command, str) and is_ours(command):
                    out.setdefault(event, []).append(command)
                elif is_our_entry(entry):  # an HTTP hook: its URL stands for it
                    out.setdefault(event, []).append(f"http {entry.get('url')}")
    return out


def check_codex_trust(home: Path) -> Check:
    """Codex runs a hook only once the person trusted it, and skips an
    untrusted one without a word (https://developers.openai.com/codex/hooks);
    the trust is a hash per hook in its config.toml (``[hooks.state.KEY]
    trusted_hash``), not ours to compute: no trusted hook at all is certain
    to skip afk's."""
    import tomllib

    config = _codex_config(home)
    name = f"codex trust {config}"
    fix = (
        "run codex, open /hooks and trust afk's hooks (again after each `afk hooks codex "
        "--install`), or give `codex exec` --dangerously-bypass-hook-trust"
    )
    try:
        state = tomllib.loads(config.read_text("utf-8")).get("hooks", {}).get("state", {})
    except FileNotFoundError:
        state = {}
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return Check(name, False, f"cannot be read as TOML ({exc})", "fix the file")
    trusted = [k for k, v in state.items() if isinstance(v, dict) and v.get("trusted_hash")]
    if not trusted:
        return Check(name, False, "Codex trusts no hook yet: it skips afk's without a word", fix)
    return Check(
        name,
        True,
        f"Codex trusts {len(trusted)} hook(s); it asks again when a hook's command changes",
    )


def _codex_config(home: Path) -> Path:
    return codex_home(home) / "config.toml"


def check_codex_project(project: Path, home: Path) -> Check:
    """Codex loads a project's ``.codex/hooks.json`` only in a trusted project
    (https://developers.openai.com/codex/hooks, "Where Codex looks for
    hooks"); elsewhere it runs the user's hooks and skips the project's
    without a word. The project is the nearest folder holding ``.git`` (what
    ``codex exec --trust`` records; seen on 0.171.0), else the folder itself."""
    import tomllib

    root = next((p for p in (project, *project.parents) if (p / ".git").exists()), project)
    config = _codex_config(home)
    name = f"codex project {root}"
    try:
        projects = tomllib.loads(config.read_text("utf-8")).get("projects", {})
    except FileNotFoundError:
        projects = {}
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return Check(name, False, f"{config} cannot be read as TOML ({exc})", "fix the file")
    entry = projects.get(str(root.resolve())) if isinstance(projects, dict) else None
    if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
        return Check(name, True, "trusted: Codex loads its .codex/hooks.json")
    return Check(
        name,
        False,
        f"not a trusted project in {config}: Codex skips its .codex/hooks.json without a word",
        f"run `codex exec --trust` once in {root}, or install the hooks in "
        f"{config.parent / 'hooks.json'}",
    )


#: the ``--harness`` each settings format's commands must name


def _command_problem(command: str, kind: str) -> str | None:
    if command.startswith("http "):
        return None  # an HTTP hook: the service answers it (afk doctor's hook-service)
    try:
        words = shlex.split(command.removeprefix(SURVIVE_EXIT))
    except ValueError:
        return "its command cannot be parsed"
    told = words[words.index("--harness") + 1] if "--harness" in words[:-1] else "claude"
    wanted = BY_NAME[kind].reads
    if told != wanted:
        why = " (and Gemini drops AFK_TASK_TOKEN from its environment)" if kind == "gemini" else ""
        return f"it reads {told}'s payloads, not {kind}'s{why}"
    program = words[0] if words else ""
    if not os.path.isabs(program):
        return f"{program!r} is not an absolute path (the agent's PATH may not find it)"
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return f"{program} does not exist or cannot be executed"
    return None


def check_hook_service(argv: list[str], env: Mapping[str, str]) -> Check:
    """Whether the watchdog service answers this user's hooks for this
    database (the fast path: about 11 ms a hook instead of about 170)."""
    name = "hook-service"
    path = hooklink.socket_path(env)
    if path is None:
        return Check(name, True, "off (AFK_HOOK_SOCKET=off): each hook goes to the database")
    fix = "run `afk watchdog run` as this user (deploy/systemd/user/afk-watchdog.service)"
    if not os.path.exists(path):
        return Check(
            name,
            False,
            f"no service answers hooks on {path}: each hook goes to the database itself "
            "(about 170 ms added to each tool call instead of about 40)",
            fix,
        )
    why = hooklink.untrusted_why(path)
    if why is not None:
        return Check(
            name,
            False,
            f"{why}: hooks do not use {path}",
            "remove it, and let the service make its own",
        )
    ping = json.dumps({"session_id": "afk-doctor", "hook_event_name": "afk-doctor"}).encode()
    said = hooklink.exchange(argv, ping, env)
    if said is None:
        if "did not answer" in (hooklink.why_not or ""):  # (P30: connected, no answer)
            return Check(
                name,
                False,
                f"a service holds {path} but does not answer within "
                f"{hooklink.ANSWER_WAIT:g} s: stopped (SIGSTOP, a debugger) or wedged; "
                "each hook waits that long, then goes to the database itself",
                "look at the service (`systemctl --user status afk-watchdog`; "
                "`kill -CONT` a stopped one), or restart it",
            )
        return Check(name, False, f"no service answers on {path} (a dead one's socket)", fix)
    if said.get("fallback") is not None:
        return Check(
            name,
            False,
            f"the service on {path} hands hooks back: {said['fallback']}",
            "start the service with the hooks' settings (the same DSN and PG* environment)",
        )
    return Check(name, True, f"the service answers hooks on {path}")


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
        *(check_live(project, home, env, settings.service.hook_http or None) if live else []),
    ]


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
    except BadInput as exc:
        return Check("sandbox", False, str(exc), "npm install -g @anthropic-ai/sandbox-runtime")
    return Check("sandbox", True, f"on: {engine} {sandbox.version(engine)}")


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
    if " 200" not in status:
        raise ConnectionRefusedError(status or "no answer")
    return status

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


def check_sandbox_probes(boundary: Any, dsn: str, env: Mapping[str, str]) -> list[Check]:
    """`afk doctor --sandbox`: the boundary proved on this machine with probes
    run through it exactly as a run would be. What must fail, each: a write
    outside the worktree, a read of ~/.ssh and of afk's home and settings,
    the database's address, a host not on the list; what must work: each
    allowed host (the model API's, or --allow-host)."""
    import shutil
    import subprocess
    import sys

    from .agents import sandbox
    from .db import addresses

    home = env.get("HOME") or os.path.expanduser("~")
    tcp, sockets = addresses(dsn)
    hosts = list(boundary.allow) or sandbox.allowed_hosts("claude", env, (), None)
    want = {
        "home": home,
        "read": _readable(os.path.join(home, ".ssh"), *boundary.deny_read),
        "database": [*tcp, *sockets],
        "denied_host": "example.com:80",
        "hosts": hosts,
    }
    run_dir = sandbox.run_folder()
    work = os.path.join(run_dir, "work")
    os.mkdir(work)
    os.mkdir(os.path.join(run_dir, "tmp"))
    argv = [sys.executable, "-I", "-c", SANDBOX_PROBE, json.dumps(want)]
    why = ""
    try:
        wrapped = boundary.wrap(argv, env, work, run_dir, None)
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
    from . import workspaces
    from .db import Database

    version = workspaces.git_version()
    needed = ".".join(map(str, workspaces.GIT_NEEDED))
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
    if version < workspaces.GIT_NEEDED:
        return Check("git", not in_use, f"git {shown} is older than {needed} (afk review)", fix)
    return Check("git", True, f"git {shown}")


# -- afk doctor --live: every installed hook fired as its harness fires it -----------

#: seconds a hook may take before it counts as timed out (the timeout afk writes)
LIVE_TIMEOUT = 10.0


def live_payload(kind: str, event: str, project: Path) -> dict[str, Any]:
    """A payload of ``event`` as ``kind``'s harness sends it, for no real task."""
    common = {"session_id": "afk-doctor-live", "hook_event_name": event, "cwd": str(project)}
    if kind == "cursor":
        return {
            "conversation_id": "afk-doctor-live",
            "hook_event_name": event,
            "workspace_roots": [str(project)],
            "command": "true",
        }
    tool = {"gemini": "run_shell_command", "copilot": "bash"}.get(kind, "Bash")
    return {**common, "tool_name": tool, "tool_input": {"command": "true"}}


def check_live(
    project: Path, home: Path, env: Mapping[str, str], hook_http: str | None = None
) -> list[Check]:
    """Fire each hook installed in each settings file that holds afk's, as its
    harness would: the command with a payload on stdin, or the HTTP request
    with its headers, for a task that does not exist. Each must answer in its
    harness's shape, in time, and through the service (a command hook that
    went to the database itself says why)."""
    import uuid

    out: list[Check] = []
    fire_env = {
        **env,
        "AFK_TASK_ID": str(uuid.uuid4()),  # a task that does not exist
        "AFK_TASK_TOKEN": "1",
        "AFK_HOOK_EXPLAIN": "1",
    }
    silent: set[str] = set()  # URLs that timed out once: not waited for again
    for kind, path in settings_files(project, home):
        if not path.is_file():
            continue
        try:
            hooks = read_settings(path, comments=kind == "gemini").get("hooks")
        except BadInput:
            continue  # (the harness check names it)
        for event, groups in hooks.items() if isinstance(hooks, dict) else []:
            for entry in _entries(groups):
                if not is_our_entry(entry):
                    continue
                payload = live_payload(kind, event, project)
                name = f"live {kind} {event} ({path.name})"
                fix = f"afk hooks {kind} --install {path}"
                if entry.get("type") == "http":
                    # (P8: the token goes to the service's own address, or nowhere)
                    if not _posts_to_service(entry.get("url"), hook_http):
                        why = f"not fired: it posts to {entry.get('url')!r}, not AFK_HOOK_HTTP"
                        out.append(Check(name, False, why, fix))
                        continue
                    url = str(entry.get("url"))
                    if url in silent:
                        why = f"not fired: {url} did not answer the hook before it"
                        out.append(Check(f"{name[:-1]}, http)", False, why, fix))
                        continue
                    fired = _fire_http(kind, path, event, entry, payload, fire_env)
                    if "timed out" in fired.detail:
                        silent.add(url)
                    out.append(fired)
                    continue
                command = entry.get("command", entry.get("bash"))
                if not written_by_afk(command):  # (P8: no other command is run)
                    why = "not fired: its command is not exactly as `afk hooks` writes it"
                    out.append(Check(name, False, why, fix))
                    continue
                out.append(_fire_command(kind, path, event, str(command), payload, fire_env))
    return out


def _posts_to_service(url: Any, hook_http: str | None) -> bool:
    """Whether an HTTP hook's URL is the service's hook address (AFK_HOOK_HTTP)."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not hook_http:
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    host, _, wanted = hook_http.rpartition(":")
    return (
        parts.scheme == "http"
        and (parts.hostname or "") == host.strip("[]")
        and str(port) == wanted
        and parts.path.startswith("/hooks/")
    )


def _entries(groups: Any) -> list[Any]:
    out: list[Any] = []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and ("command" in group or "bash" in group):
            out.append(group)  # a flat entry (Cursor's and Copilot CLI's formats)
        elif isinstance(group, dict) and isinstance(group.get("hooks"), list):
            out += group["hooks"]
    return out


def _shaped(stdout: str) -> bool:
    """An answer a harness reads: nothing, or one JSON object."""
    if not stdout.strip():
        return True
    try:
        return isinstance(json.loads(stdout), dict)
    except ValueError:
        return False


def _fire_command(
    kind: str, path: Path, event: str, command: str, payload: dict[str, Any], env: Any
) -> Check:
    import subprocess
    import time

    name = f"live {kind} {event} ({path.name})"
    started = time.monotonic()
    try:
        proc = subprocess.run(
            ["sh", "-c", command],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=LIVE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return Check(
            name, False, f"timed out after {LIVE_TIMEOUT:g}s", "afk doctor (the hook-service check)"
        )
    took = (time.monotonic() - started) * 1000
    said = [line for line in proc.stderr.splitlines() if "answered by the database itself" in line]
    if proc.returncode != 0 or not _shaped(proc.stdout):
        last = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        return Check(
            name,
            False,
            f"no answer of its shape (exit {proc.returncode}: {last[:200]})",
            f"afk hooks {kind} --install {path}",
        )
    if said and event not in ("StopFailure",):
        why = said[-1].split("itself: ", 1)[-1]
        return Check(
            name,
            False,
            f"answered in {took:.0f} ms by the database, not the service: {why}",
            "run `afk watchdog run` as this user (deploy/systemd/user/afk-watchdog.service)",
        )
    return Check(name, True, f"answered in {took:.0f} ms")


def _fire_http(
    kind: str, path: Path, event: str, entry: dict[str, Any], payload: dict[str, Any], env: Any
) -> Check:
    import re
    import time
    import urllib.error
    import urllib.request

    name = f"live {kind} {event} ({path.name}, http)"
    allowed = set(entry.get("allowedEnvVars") or [])

    def fill(value: str) -> str:  # $VAR and ${VAR}, for the variables it lists only
        def one(m: re.Match[str]) -> str:
            var = m.group(1) or m.group(2)
            return str(env.get(var, "")) if var in allowed else ""

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, value)

    headers = {k: fill(str(v)) for k, v in (entry.get("headers") or {}).items()}
    headers["Content-Type"] = "application/json"
    url = str(entry.get("url"))
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers=headers, method="POST"
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(
            request, timeout=float(entry.get("timeout") or LIVE_TIMEOUT)
        ) as r:
            body = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        hint = " (is AFK_HOOK_TOKEN the service's?)" if exc.code == 401 else ""
        return Check(name, False, f"{url} answered {exc.code}{hint}", "afk doctor --live again")
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):  # (P30: a stopped or wedged service)
            wait = float(entry.get("timeout") or LIVE_TIMEOUT)
            return Check(
                name,
                False,
                f"{url} timed out after {wait:g} s: the service holds the port but does "
                "not answer (stopped or wedged)",
                "look at the service, or restart it",
            )
        return Check(
            name,
            False,
            f"no service answers on {url} ({reason})",
            "start the watchdog service with AFK_HOOK_HTTP and AFK_HOOK_TOKEN",
        )
    took = (time.monotonic() - started) * 1000
    if not _shaped(body):
        return Check(name, False, "its answer is not of its harness's shape", "afk doctor")
    return Check(name, True, f"answered in {took:.0f} ms by the service")
