"""``afk doctor``'s agent half: whether afk guards each agent here. Each
settings file of each harness (the project's and the user's) holds afk's
hook entries for the events that matter, their commands absolute and
executable, hooks not disabled (``disableAllHooks``,
``allowManagedHooksOnly``), what a task's worktree sees of it, the quirks of
its harness (its record in :mod:`~watchdog.agents.harnesses`: a version
that fails open, hooks a person must trust); whether the watchdog service
answers hooks; and, with ``--live``, every installed hook fired as its
harness fires it. Each check says what it found and, when it fails, the fix.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from . import hooklink
from .harnesses import (
    BY_NAME,
    HARNESS_TABLE,
    SURVIVE_EXIT,
    Harness,
    codex_home,
    is_our_entry,
    is_ours,
    read_settings,
    written_by_afk,
)


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


def check_harness(project: Path, home: Path) -> list[Check]:
    out = []
    found_any = False
    for kind, path in settings_files(project, home):
        if not path.is_file():
            continue
        name = f"{kind} {path}"
        harness = BY_NAME[kind]
        try:
            data = read_settings(path, comments=harness.jsonc)
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
        missing = [e for e in harness.needed if e not in ours]
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
                problem = _command_problem(command, harness)
                if problem:
                    out.append(
                        Check(
                            name, False, f"{event}: {problem}", f"afk hooks {kind} --install {path}"
                        )
                    )
        if not any(c.name == name and not c.ok for c in out):
            out.append(Check(name, True, f"afk's hooks for {', '.join(sorted(ours))}"))
        seen = check_worktree_sees(harness, path, project)
        if seen is not None:
            out.append(seen)
        if harness.fail_closed_since and _fails_closed(hooks):
            out.append(check_fail_closed(harness))
        if harness.trusts_hooks and not any(c.name.startswith("codex trust") for c in out):
            out.append(check_codex_trust(home))
        if harness.trusts_hooks and path == harness.files(project, home)[0]:
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


def check_worktree_sees(harness: Harness, path: Path, project: Path) -> Check | None:
    """What an agent in a task's worktree sees of a project's settings file
    (issue 41 item 1): a worktree is made from committed files, so a file
    git does not track is not in it. A harness that takes settings on its
    command line (Claude Code's ``--settings``) is given afk's hooks by
    ``afk loop`` itself; another runs without them. None where it does not
    matter (a file in the home, no repository)."""
    from .. import git

    try:
        path.relative_to(project)
    except ValueError:
        return None
    top = git.toplevel(str(project))
    if top is None:
        return None
    name = f"{harness.name} {path} in a worktree"
    if git.tracked(top, str(path)):
        return Check(name, True, "committed: a task's worktree holds it")
    if harness.settings_option:
        return Check(
            name,
            True,
            f"not committed, so not in a task's worktree: afk loop gives {harness.name} "
            f"afk's hooks itself there ({harness.settings_option})",
        )
    return Check(
        name,
        False,
        "not committed, so not in a task's worktree: an agent there runs without afk's hooks",
        f"commit {path.relative_to(project)}, or install afk's hooks in your home's settings",
    )


def _fails_closed(hooks: Any) -> bool:
    groups = hooks.get("PreToolUse") if isinstance(hooks, dict) else None
    for group in groups if isinstance(groups, list) else []:
        entries = group.get("hooks") if isinstance(group, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            blocks = isinstance(entry, dict) and entry.get("onFailure") == "block"
            if blocks and is_our_entry(entry):
                return True
    return False


def check_fail_closed(harness: Harness) -> Check:
    """`--fail-closed` is `"onFailure": "block"`, which a harness older than
    its record's ``fail_closed_since`` (Claude Code 2.1.295) ignores: its
    PreToolUse would fail open, silently."""
    import re
    import shutil
    import subprocess

    program = harness.command
    name = f"{harness.name} fail-closed"
    found_at = shutil.which(program)
    if found_at is None:
        return Check(name, True, f"{program} is not on PATH here: its version is not checked")
    try:
        said = subprocess.run(
            [found_at, "--version"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", said)
    if found is None:
        return Check(name, True, f"{program}'s version could not be read")
    version = tuple(int(n) for n in found.groups())
    shown, needed = ".".join(found.groups()), ".".join(map(str, harness.fail_closed_since))
    if version < harness.fail_closed_since:
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


def _command_problem(command: str, harness: Harness) -> str | None:
    """What is wrong with one of afk's hook commands in ``harness``'s
    settings: it names another's ``--harness`` (its payloads are read
    wrong), or its program is not an absolute, executable path."""
    if command.startswith("http "):
        return None  # an HTTP hook: the service answers it (afk doctor's hook-service)
    try:
        words = shlex.split(command.removeprefix(SURVIVE_EXIT))
    except ValueError:
        return "its command cannot be parsed"
    told = words[words.index("--harness") + 1] if "--harness" in words[:-1] else "claude"
    if told != harness.reads:
        why = f" (and {harness.misread})" if harness.misread else ""
        return f"it reads {told}'s payloads, not {harness.name}'s{why}"
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


# -- afk doctor --live: every installed hook fired as its harness fires it -----------

#: seconds a hook may take before it counts as timed out (the timeout afk writes)
LIVE_TIMEOUT = 10.0


def check_live(
    project: Path,
    home: Path,
    env: Mapping[str, str],
    hook_http: str | None = None,
    proof: str | None = None,
) -> list[Check]:
    """Fire each hook installed in each settings file that holds afk's, as its
    harness would: the command with a payload on stdin, or the HTTP request
    with its headers, for a task that does not exist. Each must answer in its
    harness's shape, in time, and through the service (a command hook that
    went to the database itself says why; an HTTP answer proves it comes from
    the service with ``proof``, the database's secret: R1)."""
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
            hooks = read_settings(path, comments=BY_NAME[kind].jsonc).get("hooks")
        except BadInput:
            continue  # (the harness check names it)
        for event, groups in hooks.items() if isinstance(hooks, dict) else []:
            for entry in _entries(groups):
                if not is_our_entry(entry):
                    continue
                payload = BY_NAME[kind].live_payload(event, project)
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
                    fired = _fire_http(kind, path, event, entry, payload, fire_env, proof)
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
    kind: str,
    path: Path,
    event: str,
    entry: dict[str, Any],
    payload: dict[str, Any],
    env: Any,
    proof: str | None = None,
) -> Check:
    import hmac
    import re
    import secrets
    import time
    import urllib.error
    import urllib.request

    from ..links import CHALLENGE_HEADER, PROOF_HEADER, hook_proof

    name = f"live {kind} {event} ({path.name}, http)"
    allowed = set(entry.get("allowedEnvVars") or [])

    def fill(value: str) -> str:  # $VAR and ${VAR}, for the variables it lists only
        def one(m: re.Match[str]) -> str:
            var = m.group(1) or m.group(2)
            return str(env.get(var, "")) if var in allowed else ""

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, value)

    headers = {k: fill(str(v)) for k, v in (entry.get("headers") or {}).items()}
    headers["Content-Type"] = "application/json"
    challenge = secrets.token_hex(16)
    headers[CHALLENGE_HEADER] = challenge
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
            proved = r.headers.get(PROOF_HEADER, "")
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
    if proof is not None and not (
        proof and hmac.compare_digest(proved, hook_proof(proof, challenge))
    ):
        port = url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[-1]
        return Check(
            name,
            False,
            f"{url} answered, but not as afk's service: it could not prove it holds the "
            "database's secret (another process holds the port, and reads every hook's token)",
            f"see who listens: ss -ltnp 'sport = :{port}'; stop it, then start afk's service",
        )
    if not _shaped(body):
        return Check(name, False, "its answer is not of its harness's shape", "afk doctor")
    vouched = "by the service" if proof is not None else "(not proved: no database to ask)"
    return Check(name, True, f"answered in {took:.0f} ms {vouched}")
