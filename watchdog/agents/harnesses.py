"""The harnesses afk's hooks run in, and the settings `afk hooks` writes for
each: one table of the events afk handles (:data:`EVENT_TABLE`), each other
harness's names for them, and the installers of Claude Code's, Codex CLI's,
Gemini CLI's, Cursor's and GitHub Copilot CLI's settings files. Running a
hook is :mod:`watchdog.agents.hooks`."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput


@dataclass(frozen=True)
class Event:
    """One hook event afk handles: the one table the installers and the
    dispatcher read (a new event is its handler on :class:`Hook` and its
    entry here)."""

    name: str
    #: the :class:`Hook` method that acts on it
    handler: str
    #: seconds, in the settings written by `afk hooks`
    timeout: int
    matcher: str | None = None
    #: installed only with --gate (without it the hook would do nothing)
    gate_only: bool = False
    #: the command ignores SIGTERM (see SURVIVE_EXIT)
    survive_exit: bool = False
    #: Codex CLI has it too
    codex: bool = False
    #: Claude Code has it (False: another harness's own event)
    claude: bool = True


EVENT_TABLE = (
    Event("SessionStart", "session_start", 20, "startup|resume|clear|compact", codex=True),
    Event("PreToolUse", "pre_tool_use", 10, "*", codex=True),
    Event("PostToolUse", "post_tool_use", 10, "*", codex=True),
    # a call its settings do not allow, in a run with no one to ask (issue 43)
    Event("PermissionRequest", "permission_request", 10, "*"),
    Event("PreCompact", "pre_compact", 10, codex=True),
    Event("PostCompact", "post_compact", 10, codex=True),
    Event("Stop", "stop", 10, gate_only=True, codex=True),
    Event("StopFailure", "stop_failure", 10, survive_exit=True),
    Event("SessionEnd", "session_end", 10, codex=True),
    # Gemini CLI's turn start: the brief again after a compression
    Event("BeforeAgent", "before_agent", 10, claude=False),
)
#: Gemini CLI's events (https://geminicli.com/docs/hooks/reference), as ours:
#: (its name, ours, its matcher); its timeouts are milliseconds
GEMINI_EVENTS = (
    ("SessionStart", "SessionStart", None),
    ("BeforeTool", "PreToolUse", ".*"),
    ("AfterTool", "PostToolUse", ".*"),
    ("PreCompress", "PreCompact", None),
    ("BeforeAgent", "BeforeAgent", None),
    ("AfterAgent", "Stop", None),
    ("SessionEnd", "SessionEnd", None),
)
GEMINI_TO_OURS = {theirs: ours for theirs, ours, _ in GEMINI_EVENTS}
#: Cursor's agent events (https://cursor.com/docs/hooks), as ours: its tool
#: calls are preToolUse/postToolUse (the edited file comes with afterFileEdit,
#: read as a Write), and it has no event that can add context at a turn's
#: start, so the brief after a compaction comes with the next postToolUse
CURSOR_EVENTS = (
    ("sessionStart", "SessionStart"),
    ("preToolUse", "PreToolUse"),
    ("postToolUse", "PostToolUse"),
    ("afterFileEdit", "PostToolUse"),
    ("preCompact", "PreCompact"),
    ("stop", "Stop"),
    ("sessionEnd", "SessionEnd"),
)
CURSOR_TO_OURS = dict(CURSOR_EVENTS)
#: GitHub Copilot CLI's events under their PascalCase names, which make it send
#: Claude Code's snake_case payloads (https://docs.github.com/en/copilot/
#: reference/copilot-cli-reference/cli-hooks-reference#hook-event-input-payloads).
#: It reads no output of SessionStart or PostToolUse, so no brief can be added:
#: a supervisor's prompt carries it
COPILOT_EVENTS = ("PreToolUse", "PostToolUse", "PreCompact", "Stop", "SessionEnd")
EVENTS = tuple(e.name for e in EVENT_TABLE)
BY_EVENT = {e.name: e for e in EVENT_TABLE}


# -- settings written by `afk hooks` -------------------------------------------


#: the StopFailure command ignores SIGTERM from its first instant: Claude Code
#: (2.1.332, ``-p``) sends it to that hook some 15 ms after starting it, as it
#: exits, and kills it for good about 1.5 s later; the hook then goes on in a
#: process of its own (cli.agents._detach)
SURVIVE_EXIT = "trap '' TERM; exec "


#: what a hook command runs: afk's entry point, by the interpreter it is
#: installed in (``python -I -c HOOK_CODE hook ...``), not the console script,
#: whose own ``import re`` cost a third of the hook; ``-I``: the agent's folder
#: (a project with a ``watchdog`` package of its own) and PYTHON* variables
#: have no say in what it imports
HOOK_CODE = "import sys; from watchdog.__main__ import main; sys.exit(main())"


def hook_command(
    python: str, gate: bool = False, survive_exit: bool = False, extra: tuple[str, ...] = ()
) -> str:
    """The command of one hook entry, run by ``python`` (the interpreter afk
    is installed in); ``extra`` (``--config FILE``, ``--dsn DSN``) makes the
    hook reach the database the supervisor uses."""
    words = [shlex.quote(python), "-I", "-c", shlex.quote(HOOK_CODE), "hook"]
    command = " ".join([*words, *(shlex.quote(a) for a in extra)] + (["--gate"] if gate else []))
    return SURVIVE_EXIT + command if survive_exit else command


def claude_settings(afk: str, gate: bool = False, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Claude Code hook settings: one ``afk hook`` entry per event handled,
    with matchers for the tool and session events and a timeout each."""
    hooks: dict[str, Any] = {}
    for event in EVENT_TABLE:
        if (event.gate_only and not gate) or not event.claude:
            continue
        entry = {
            "type": "command",
            "command": hook_command(
                afk, gate and event.gate_only, survive_exit=event.survive_exit, extra=extra
            ),
            "timeout": event.timeout,
        }
        group: dict[str, Any] = {"hooks": [entry]}
        if event.matcher is not None:
            group = {"matcher": event.matcher, **group}
        hooks[event.name] = [group]
    return {"hooks": hooks}


#: the headers a Claude Code HTTP hook sends (each the value of the agent's
#: variable of that name, listed in allowedEnvVars: the service reads what the
#: hook would read of its environment from them)
HTTP_ENV = {
    "X-Afk-Task-Id": "AFK_TASK_ID",
    "X-Afk-Task-Token": "AFK_TASK_TOKEN",
    "X-Afk-Task-Lease": "AFK_TASK_LEASE",
    "X-Afk-Account": "AFK_ACCOUNT",
    "X-Afk-Runner-Id": "AFK_RUNNER_ID",
    # the run's sign-of-life file, which the service touches for a hook it
    # answered (a command hook touches it itself)
    "X-Afk-Alive-File": "AFK_ALIVE_FILE",
    "Traceparent": "TRACEPARENT",
}
#: the variable that holds an HTTP hook's bearer token (never the token itself
#: in a settings file that git may track)
HTTP_TOKEN_ENV = "AFK_HOOK_TOKEN"


def claude_http_settings(
    afk: str, gate: bool, extra: tuple[str, ...], url: str, fail_closed: bool = False
) -> dict[str, Any]:
    """Claude Code hook settings over HTTP (``"type": "http"``): every event
    afk uses posts its payload to the watchdog service at ``url``, but
    SessionStart, which Claude Code runs only as a command. ``fail_closed``:
    a PreToolUse that gets no answer blocks the tool call (``onFailure``)."""
    out = claude_settings(afk, gate, extra)
    headers = {"Authorization": f"Bearer ${HTTP_TOKEN_ENV}"}
    headers.update({header: f"${name}" for header, name in HTTP_ENV.items()})
    for event in EVENT_TABLE:
        if event.name not in out["hooks"] or event.name == "SessionStart":
            continue
        entry: dict[str, Any] = {
            "type": "http",
            "url": url.rstrip("/")
            + "/hooks/claude"
            + ("?gate=1" if gate and event.gate_only else ""),
            "headers": headers,
            "allowedEnvVars": [HTTP_TOKEN_ENV, *HTTP_ENV.values()],
            "timeout": event.timeout,
        }
        if fail_closed and event.name == "PreToolUse":
            entry["onFailure"] = "block"
        out["hooks"][event.name][0]["hooks"] = [entry]
    return out


def is_our_entry(entry: Any) -> bool:
    """A hook entry `afk hooks` wrote: its command, or its HTTP hook."""
    if not isinstance(entry, dict):
        return False
    if entry.get("type") == "http":
        given = entry.get("headers")
        auth = given.get("Authorization") if isinstance(given, dict) else None
        return isinstance(auth, str) and f"${HTTP_TOKEN_ENV}" in auth
    return is_ours(entry.get("command", entry.get("bash")))


def written_by_afk(command: Any) -> bool:
    """Whether a hook command is exactly one :func:`hook_command` writes: the
    interpreter by its absolute path, afk's entry point, and only afk hook's
    own options, nothing a shell would run besides (``afk doctor --live``
    fires no other, P8)."""
    words = _command_words(command)
    body = command.removeprefix(SURVIVE_EXIT) if words is not None else ""
    if words is None or " ".join(shlex.quote(w) for w in words) != body or len(words) < 5:
        return False
    if not os.path.isabs(words[0]) or words[1:5] != ["-I", "-c", HOOK_CODE, "hook"]:
        return False
    rest = words[5:]
    while rest:
        if rest[0] in ("--gate", "stop"):
            rest = rest[1:]
        elif rest[0] in ("--harness", "--config", "--dsn") and len(rest) > 1:
            rest = rest[2:]
        else:
            return False
    return True


def gemini_settings(afk: str, gate: bool = False, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Gemini CLI's settings.json hooks: its own event names, timeouts in
    milliseconds, each command told it runs for Gemini (`--harness gemini`:
    its payloads and answers have their own shapes). Its SessionEnd is not
    waited for: a supervisor pauses its own task. Gemini drops variables whose
    name holds TOKEN from the hook's environment: AFK_TASK_LEASE carries the
    same token."""
    hooks: dict[str, Any] = {}
    for theirs, ours, matcher in GEMINI_EVENTS:
        event = BY_EVENT[ours]
        if event.gate_only and not gate:
            continue
        command = hook_command(afk, gate and event.gate_only, extra=(*extra, "--harness", "gemini"))
        group: dict[str, Any] = {
            "hooks": [{"type": "command", "command": command, "timeout": event.timeout * 1000}]
        }
        if matcher is not None:
            group = {"matcher": matcher, **group}
        hooks[theirs] = [group]
    return {"hooks": hooks}


def cursor_settings(afk: str, gate: bool = False, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Cursor's .cursor/hooks.json (https://cursor.com/docs/hooks): ``version``
    1 and one flat ``{command, timeout}`` entry per event, each command told
    it runs for Cursor (its payloads and answers have their own shapes)."""
    hooks: dict[str, Any] = {}
    for theirs, ours in CURSOR_EVENTS:
        event = BY_EVENT[ours]
        if event.gate_only and not gate:
            continue
        command = hook_command(afk, gate and event.gate_only, extra=(*extra, "--harness", "cursor"))
        hooks[theirs] = [{"command": command, "timeout": event.timeout}]
    return {"version": 1, "hooks": hooks}


def copilot_settings(afk: str, gate: bool = False, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """A GitHub Copilot CLI hooks file (.github/hooks/afk.json): ``version``
    1, one ``{type, bash, timeoutSec}`` entry per event."""
    hooks: dict[str, Any] = {}
    for name in COPILOT_EVENTS:
        event = BY_EVENT[name]
        if event.gate_only and not gate:
            continue
        command = hook_command(
            afk, gate and event.gate_only, extra=(*extra, "--harness", "copilot")
        )
        hooks[name] = [{"type": "command", "bash": command, "timeoutSec": event.timeout}]
    return {"version": 1, "hooks": hooks}


def codex_settings(afk: str, gate: bool = False, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Codex CLI's hooks.json: the events it shares with Claude Code
    (https://developers.openai.com/codex/hooks; SessionEnd since 0.145)."""
    ours = claude_settings(afk, gate, extra)["hooks"]
    return {"hooks": {e.name: ours[e.name] for e in EVENT_TABLE if e.codex and e.name in ours}}


def is_ours(command: Any) -> bool:
    """An ``afk hook`` command written by any version of `afk hooks`."""
    words = _command_words(command)
    if words is None:
        return False
    if len(words) >= 2 and Path(words[0]).name == "afk" and words[1] == "hook":
        return True  # (as `afk hooks` wrote it before: the console script)
    return len(words) >= 5 and words[1:5] == ["-I", "-c", HOOK_CODE, "hook"]


def _command_words(command: Any) -> list[str] | None:
    """A hook entry's command as the shell splits it (less the prefix that
    keeps a hook through its agent's exit); None for no command or one the
    shell could not split."""
    if not isinstance(command, str):
        return None
    try:
        return shlex.split(command.removeprefix(SURVIVE_EXIT))
    except ValueError:
        return None


def hook_words(command: str) -> list[str]:
    """An installed hook command's words from ``hook`` on (its arguments),
    whichever way it runs afk."""
    words = shlex.split(command.removeprefix(SURVIVE_EXIT))
    return words[words.index("hook") :] if "hook" in words else []


#: the largest settings file read (a real one is a few KiB; /dev/zero is endless)
MAX_SETTINGS_BYTES = 4 << 20
#: a comment of JSONC (Gemini CLI's settings), outside strings
_JSONC = re.compile(r'("(?:[^"\\]|\\.)*")|//[^\n]*|/\*.*?\*/', re.S)


def read_settings(path: Path, *, comments: bool = False) -> dict[str, Any]:
    """A settings file's JSON object, read within bounds: at most
    :data:`MAX_SETTINGS_BYTES`, nested no deeper than the parser goes, no key
    twice (one of the two would be lost). ``comments``: JSONC's ``//`` and
    ``/* */`` are read as nothing (for reading only). Raises BadInput, with
    the reason, for anything else."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise BadInput(f"{path} is larger than {MAX_SETTINGS_BYTES >> 20} MiB, not a settings file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8") from None
    if comments:
        text = _JSONC.sub(lambda m: m.group(1) or "", text)

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"the key {key!r} is there twice (one would be lost)")
            out[key] = value
        return out

    try:
        data = json.loads(text or "{}", object_pairs_hook=once)
    except RecursionError:
        raise BadInput(f"{path} is nested too deeply to be a settings file") from None
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} does not hold a JSON object")
    return data


def merge_settings(path: Path, ours: dict[str, Any]) -> dict[str, Any]:
    """Our hook entries merged into a settings file, everything else kept.
    Entries an earlier `afk hooks` wrote are replaced, so installing twice (or
    after an upgrade) leaves one entry per event."""
    current: dict[str, Any] = {}
    if path.exists():
        try:
            current = read_settings(path)
        except BadInput as exc:
            if _commented(path):  # valid once its comments are taken out
                raise BadInput(
                    f"{path} has comments (JSONC), which afk would lose in rewriting it; "
                    "it was left unchanged: remove them, or add the hooks that "
                    "`afk hooks` prints by hand"
                ) from None
            raise BadInput(f"{exc}; it was left unchanged") from None
    if "version" in ours and current.get("version", ours["version"]) != ours["version"]:
        raise BadInput(
            f"{path} says version {json.dumps(current['version'])}; afk writes hooks of "
            f"version {ours['version']}: it was left unchanged"
        )
    hooks = current.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput(f"{path}: 'hooks' is not an object; it was left unchanged")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise BadInput(f"{path}: hooks.{event} is not a list; it was left unchanged")
    for event in list(hooks):
        kept = []
        for group in hooks[event]:
            if isinstance(group, dict) and is_ours(group.get("command", group.get("bash"))):
                continue  # a flat entry (Cursor's and Copilot CLI's formats)
            entries = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(entries, list):
                mine = [h for h in entries if is_our_entry(h)]
                if mine:
                    rest = [h for h in entries if h not in mine]
                    if not rest:
                        continue
                    group = {**group, "hooks": rest}
            kept.append(group)
        hooks[event] = kept
        if not kept:
            del hooks[event]
    for event, groups in ours["hooks"].items():
        hooks.setdefault(event, []).extend(groups)
    if "version" in ours:
        current.setdefault("version", ours["version"])
    return current


def _commented(path: Path) -> bool:
    """Whether ``path`` is valid JSON once its comments are taken out."""
    try:
        read_settings(path, comments=True)
    except BadInput:
        return False
    return True


def install(path: Path, ours: dict[str, Any]) -> Path:
    """Write the merged settings atomically. A symlinked settings file is
    followed (its target is rewritten, the link stays); returns the file
    written."""
    try:
        target = path.resolve(strict=False) if path.is_symlink() else path
        is_dir = target.is_dir()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError up to 3.12)
        raise BadInput(f"cannot follow {path}: {exc}; it was left unchanged") from None
    if is_dir:
        raise BadInput(f"{path} is a directory, not a settings file")
    merged = merge_settings(target, ours)
    text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.afk-{os.getpid()}")
        tmp.write_text(text, "utf-8")
        try:
            if target.exists():
                os.chmod(tmp, target.stat().st_mode & 0o7777)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise BadInput(
            f"cannot write {path}: {exc.strerror or exc}; it was left unchanged"
        ) from None
    return target


@dataclass(frozen=True)
class Skip:
    """One way a harness's command line turns its permission checks off: an
    option (each of its spellings), alone or with the value that does it.
    ``key``: the option sets a config ``KEY=VALUE`` (Codex CLI's ``-c``), this
    key to ``value``; ``settings``: the option's value is settings (JSON, or a
    file of it) whose permission mode :func:`bypass_mode` reads."""

    flags: tuple[str, ...]
    value: str | None = None
    key: str | None = None
    settings: bool = False

    def said(self, flag: str, value: str | None, attached: bool = False) -> str | None:
        """How the checks are turned off by ``flag`` given ``value`` (None:
        they are not); ``attached``: given as ``--flag=VALUE``."""
        if flag not in self.flags:
            return None
        if self.settings:
            return (
                f"{flag} with permissions.defaultMode bypassPermissions"
                if bypass_mode(value)
                else None
            )
        if self.value is None:
            return None if attached else flag
        if self.key is not None:
            key, _, given = (value or "").partition("=")
            given = given.strip().strip("\"'")
            return (
                f"{flag} {self.key}={given}"
                if key.strip() == self.key and given == self.value
                else None
            )
        return f"{flag} {self.value}" if value == self.value else None


def bypass_mode(settings: str | None) -> bool:
    """Whether Claude Code settings (JSON, or a file of it) set
    ``permissions.defaultMode`` to ``bypassPermissions``."""
    if not settings:
        return False
    text = settings
    if not settings.lstrip().startswith("{"):
        try:
            text = json.dumps(read_settings(Path(settings)))
        except BadInput:
            return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    mode = data.get("permissions", {}) if isinstance(data, dict) else {}
    return isinstance(mode, dict) and mode.get("defaultMode") == "bypassPermissions"


def skips_permissions(command: list[str]) -> str | None:
    """How ``command`` turns a harness's permission checks off
    (``--permission-mode bypassPermissions``, ``gemini -y``, say), or None.
    Each harness's words are read by its own record's table
    (:attr:`Harness.skip_permissions`), from where its program stands in the
    command (or in a shell's script, ``sh -c '... gemini -y'``) to the next
    program; a long option of any harness counts anywhere (a script may run
    it another way). A word the shell would expand (``$F``) cannot be read:
    docs/sandbox.md says so."""
    words: list[str] = []
    for arg in command:
        words.append(arg)
        if any(c.isspace() for c in arg):
            try:
                words.extend(shlex.split(arg))
            except ValueError:
                words.extend(arg.split())
    harness: Harness | None = None
    for i, word in enumerate(words):
        program = BY_PROGRAM.get(os.path.basename(word))
        if program is not None:
            harness = program
            continue
        flag, eq, given = word.partition("=")
        value = given if eq else (words[i + 1] if i + 1 < len(words) else None)
        rules = [*(harness.skip_permissions if harness else ()), *LONG_SKIPS]
        for rule in rules:
            said = rule.said(flag, value, bool(eq))
            if said is not None:
                return said
    return None


def skips_in_settings(command: list[str], project: Path, home: Path) -> str | None:
    """Which settings file of ``command``'s harness (the project's, the
    user's) turns its permission checks off (``permissions.defaultMode:
    bypassPermissions``), or None."""
    harness = harness_of(command)
    if harness is None or not any(rule.settings for rule in harness.skip_permissions):
        return None
    for path in harness.files(project, home):
        if path.is_file() and bypass_mode(str(path)):
            return f"{path} sets permissions.defaultMode bypassPermissions"
    return None


def isolated(command: list[str]) -> list[str]:
    """``command`` with its harness's options that keep its state folder's
    own settings out of the run (:attr:`Harness.isolate`) and run the hooks
    afk wrote there (:attr:`Harness.trust_hooks`), unless it gives them
    itself. For a sandboxed run: the folder is the run's to write."""
    harness = harness_of(command)
    if harness is None:
        return command
    out = command
    for options in (harness.isolate, harness.trust_hooks):
        option = options[0] if options else None
        if option is None or any(a == option or a.startswith(option + "=") for a in command):
            continue
        out = [out[0], *options, *out[1:]]
    return out


def give_home_hooks(harness: Harness, folder: Path, afk: str) -> Path | None:
    """Write afk's hooks, and no other, into a sandboxed run's own state
    folder (:attr:`Harness.home_hooks`), for a harness that takes no settings
    on its command line: the file's other keys (a login's choice, say) are
    kept; its hooks are afk's alone, so one an earlier run of the profile
    wrote there (the folder is its to write) never runs. A file that does not
    parse is the run's doing and is replaced. None: the harness has none."""
    if not harness.home_hooks:
        return None
    path = folder / harness.home_hooks
    ours = harness.settings(afk, False, ())
    try:
        current = read_settings(path, comments=harness.jsonc) if path.is_file() else {}
    except BadInput:
        current = {}
    merged = {**current, **ours}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.afk-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def with_hooks(command: list[str], afk: str) -> list[str]:
    """``command`` with afk's hooks given on its command line where its
    harness takes settings there: Claude Code's ``--settings`` (a JSON
    string; settings from the command line add to the project's and the
    user's, and a hook whose command is the same as one of theirs runs once).
    A worktree is made from committed files: hooks installed in a checkout's
    uncommitted ``.claude/settings.json`` are not in it (issue 41 item 1).
    Anything else as given."""
    harness = harness_of(command)
    if harness is None or not harness.settings_option:
        return command
    settings = json.dumps(harness.settings(afk, False, ()), separators=(",", ":"))
    return [command[0], harness.settings_option, settings, *command[1:]]


#: options whose value is the prompt (Gemini CLI's `gemini -p PROMPT`)
PROMPT_OPTIONS = ("-p", "--prompt")


def prompt_argv(command: list[str], prompt: str) -> list[str]:
    """The agent's command line with ``prompt`` as its last argument, written
    so that the agent cannot read it as an option: after a `--` for Claude
    Code and Codex CLI (unless the command has one), as ``--prompt=PROMPT``
    where the command ends with Gemini CLI's ``-p``; anything else as given
    (end your own command with `--` where your agent reads one)."""
    harness = harness_of(command)
    takes = harness.prompt if harness is not None else ""
    if takes == "-p" and command[-1] in PROMPT_OPTIONS:
        return [*command[:-1], f"--prompt={prompt}"]
    if takes == "--" and "--" not in command[1:]:
        return [*command, "--", prompt]
    return [*command, prompt]


# -- the harnesses: one record each ---------------------------------------------


def _same(value: dict[str, Any]) -> dict[str, Any]:
    return value


def cursor_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A Cursor payload in Claude Code's words: its conversation_id is the
    session, its first workspace root the cwd, and an afterFileEdit a Write
    of its file_path (https://cursor.com/docs/hooks)."""
    out = dict(payload)
    conversation = payload.get("conversation_id", payload.get("session_id"))
    if conversation is not None:
        out["session_id"] = conversation
    roots = payload.get("workspace_roots")
    if "cwd" not in out and isinstance(roots, list) and roots and isinstance(roots[0], str):
        out["cwd"] = roots[0]
    if payload.get("hook_event_name") == "afterFileEdit":
        out["tool_name"], out["tool_input"] = "Write", {"file_path": payload.get("file_path")}
    return out


def gemini_answer(out: dict[str, Any]) -> dict[str, Any]:
    """Ours in Gemini CLI's words: it denies a tool with a top-level decision
    and reason (https://geminicli.com/docs/hooks/reference#beforetool), and
    names its own events."""
    specific = out.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
        return {"decision": "deny", "reason": specific.get("permissionDecisionReason", "")}
    if isinstance(specific, dict):
        theirs = {ours: t for t, ours, _ in GEMINI_EVENTS}.get(str(specific.get("hookEventName")))
        return {**out, "hookSpecificOutput": {**specific, "hookEventName": theirs}}
    return out


def cursor_answer(out: dict[str, Any]) -> dict[str, Any]:
    """Ours in Cursor's words (https://cursor.com/docs/hooks): a deny is
    ``permission`` with a message for the user and one for the agent, added
    context is ``additional_context``, and a blocked stop is a
    ``followup_message`` that sends the agent back to work."""
    if out.get("decision") == "block":
        return {"followup_message": out.get("reason", "")}
    specific = out.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        return {}
    if specific.get("permissionDecision") == "deny":
        reason = specific.get("permissionDecisionReason", "")
        return {"permission": "deny", "user_message": reason, "agent_message": reason}
    if "additionalContext" in specific:
        return {"additional_context": specific["additionalContext"]}
    return {}


def copilot_answer(out: dict[str, Any]) -> dict[str, Any]:
    """Ours in Copilot CLI's words: a deny is a top-level
    ``permissionDecision`` and its reason; a blocked stop is as ours."""
    specific = out.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
        return {
            "permissionDecision": "deny",
            "permissionDecisionReason": specific.get("permissionDecisionReason", ""),
        }
    return out if out.get("decision") == "block" else {}


def codex_home(home: Path) -> Path:
    """Where Codex keeps the user's settings: CODEX_HOME, else ~/.codex."""
    return Path(os.environ.get("CODEX_HOME") or home / ".codex")


def cursor_sample(event: str, project: Path) -> dict[str, Any]:
    """A payload of ``event`` as Cursor sends it, for no real task."""
    return {
        "conversation_id": "afk-doctor-live",
        "hook_event_name": event,
        "workspace_roots": [str(project)],
        "command": "true",
    }


@dataclass(frozen=True)
class Harness:
    """One agent's harness, the one record of everything afk knows of it:
    `afk hooks` (its settings), `afk hook --harness` (its payloads and
    answers), `afk doctor` (its files, the events it must have, its live
    payload), `afk loop` (its program, how it takes the prompt and afk's
    hooks, whether a decided session resumes), the sandbox (its state and its
    model API) and the CLI's choices read it. No module tests a harness by its
    name: a new harness is a record here and its recorded payloads in
    tests/fixtures/hooks/."""

    #: the name `afk hooks` takes
    name: str
    #: its settings, as `afk hooks NAME` writes them (afk, gate, extra args)
    settings: Callable[[str, bool, tuple[str, ...]], dict[str, Any]]
    #: the settings files its hooks may be in (a project, a home)
    files: Callable[[Path, Path], list[Path]]
    #: the events (its names) without which afk cannot guard it
    needed: tuple[str, ...]
    #: the harness whose payloads its hooks send, when not its own (Codex CLI
    #: sends Claude Code's)
    speaks_like: str | None = None
    #: its event names, as ours (None: ours already)
    to_ours: Mapping[str, str] | None = None
    #: its payload in Claude Code's words, and our answer in its words
    payload_in: Callable[[dict[str, Any]], dict[str, Any]] = _same
    answer_out: Callable[[dict[str, Any]], dict[str, Any]] = _same
    #: its command's program (``afk loop -- PROGRAM ...``), when not its name
    program: str = ""
    #: how its command line takes the prompt: "--" (after a ``--``, so a
    #: title that starts with "-" is no option), "-p" (``--prompt=PROMPT`` in
    #: place of a last ``-p``), "" (as the last argument)
    prompt: str = ""
    #: every way its command line turns its own permission checks off
    #: (:class:`Skip`): such an agent needs a boundary (issue 49 item 9)
    skip_permissions: tuple[Skip, ...] = ()
    #: its state under the home: written by it, or it cannot run (the sandbox)
    state: tuple[str, ...] = ()
    #: the variable that moves its whole state folder (its settings, logins,
    #: transcripts) elsewhere: under --sandbox each profile's runs get a folder
    #: of their own there, and the person's own (:attr:`state`) is never read
    home_variable: str | None = None
    #: its options that keep that folder's own settings (hooks, plugins and
    #: mods enabled there, permissions) out of a sandboxed run, which may
    #: write the folder: checked on the real Claude Code 2.1.332,
    #: `--setting-sources project,local` runs no hook of the user's settings
    #: and every one given with --settings (afk's)
    isolate: tuple[str, ...] = ()
    #: where, in that folder, its user-level hooks are: a sandboxed run's
    #: file is rewritten before each run with afk's hooks alone (its other
    #: keys kept), so a hook an earlier run planted there never runs
    home_hooks: str = ""
    #: its options that run hooks no person trusted by hand (Codex CLI asks
    #: for each hook once, in its /hooks): for the hooks afk wrote itself
    #: into a sandboxed run's own folder, which has no trust recorded
    trust_hooks: tuple[str, ...] = ()
    #: its model API's host, and the variable that points it elsewhere
    api: tuple[str, str | None] = ("", None)
    #: its settings files are JSON with comments (Gemini CLI's)
    jsonc: bool = False
    #: its option that takes settings, afk's hooks included, on its command
    #: line (Claude Code's ``--settings``): afk loop gives them in any worktree
    settings_option: str = ""
    #: it takes HTTP hooks (``afk hooks NAME --transport http``), whose
    #: ``onFailure`` it honours from version ``fail_closed_since`` on
    http_hooks: bool = False
    fail_closed_since: tuple[int, ...] = ()
    #: its PreToolUse may answer "defer" (Claude Code -p, v2.1.89+:
    #: https://code.claude.com/docs/en/hooks#defer-a-tool-call-for-later);
    #: another's call that waits for a person is denied with a line saying so
    defers: bool = False
    #: a session whose call a person decided resumes (``--resume ID``)
    resumes: bool = False
    #: after a compaction its SessionStart says no "compact": the brief comes
    #: back at this event of ours instead
    rebrief_at: str | None = None
    #: headless, it fires no SessionStart (``gemini -p``, 0.61.0): the first
    #: turn's hook gives the brief
    no_headless_start: bool = False
    #: the name of its shell tool in a payload
    shell_tool: str = "Bash"
    #: it runs a hook only once a person trusted it (Codex CLI: afk doctor
    #: reads its trust)
    trusts_hooks: bool = False
    #: why hooks of another's payloads fail it, besides the shape
    misread: str = ""
    #: a payload of an event as it sends it, for no real task (afk doctor --live)
    sample: Callable[[str, Path], dict[str, Any]] | None = None

    @property
    def reads(self) -> str:
        """Whose payloads it sends: the `afk hook --harness` its hooks name."""
        return self.speaks_like or self.name

    @property
    def command(self) -> str:
        """Its command's program name."""
        return self.program or self.name

    def ours(self, event: str) -> str:
        """Its event's name as ours ("" for one afk does not handle)."""
        return event if self.to_ours is None else self.to_ours.get(event, "")

    def live_payload(self, event: str, project: Path) -> dict[str, Any]:
        """A payload of ``event`` as it sends it, for no real task."""
        if self.sample is not None:
            return self.sample(event, project)
        return {
            "session_id": "afk-doctor-live",
            "hook_event_name": event,
            "cwd": str(project),
            "tool_name": self.shell_tool,
            "tool_input": {"command": "true"},
        }


HARNESS_TABLE = (
    Harness(
        "claude",
        claude_settings,
        lambda project, home: [
            project / ".claude" / "settings.json",
            project / ".claude" / "settings.local.json",
            home / ".claude" / "settings.json",
        ],
        ("SessionStart", "PreToolUse", "PostToolUse"),
        prompt="--",
        skip_permissions=(
            Skip(("--dangerously-skip-permissions",)),
            Skip(("--allow-dangerously-skip-permissions",)),
            Skip(("--permission-mode",), "bypassPermissions"),
            Skip(("--settings",), settings=True),
        ),
        state=(".claude", ".claude.json"),
        home_variable="CLAUDE_CONFIG_DIR",
        isolate=("--setting-sources", "project,local"),
        api=("api.anthropic.com", "ANTHROPIC_BASE_URL"),
        settings_option="--settings",
        http_hooks=True,
        fail_closed_since=(2, 1, 295),
        defers=True,
        resumes=True,
    ),
    Harness(
        "codex",
        codex_settings,
        lambda project, home: [project / ".codex" / "hooks.json", codex_home(home) / "hooks.json"],
        ("SessionStart", "PreToolUse", "PostToolUse"),
        speaks_like="claude",
        prompt="--",
        skip_permissions=(
            Skip(("--dangerously-bypass-approvals-and-sandbox", "--yolo")),
            Skip(("--full-auto",)),
            Skip(("-s", "--sandbox"), "danger-full-access"),
            Skip(("-c", "--config"), "danger-full-access", key="sandbox_mode"),
        ),
        state=(".codex",),
        # its sessions, login, config.toml and hooks.json (seen on 0.171.0)
        home_variable="CODEX_HOME",
        home_hooks="hooks.json",
        trust_hooks=("--dangerously-bypass-hook-trust",),
        api=("api.openai.com", "OPENAI_BASE_URL"),
        trusts_hooks=True,
    ),
    Harness(
        "gemini",
        gemini_settings,
        lambda project, home: [
            project / ".gemini" / "settings.json",
            home / ".gemini" / "settings.json",
        ],
        ("SessionStart", "BeforeTool", "AfterTool"),
        to_ours=GEMINI_TO_OURS,
        answer_out=gemini_answer,
        prompt="-p",
        skip_permissions=(Skip(("-y", "--yolo")), Skip(("--approval-mode",), "yolo")),
        state=(".gemini",),
        # the folder its `.gemini` is made in (docs/reference/configuration.md
        # of 0.61.0: "the root directory for Gemini CLI's user-level
        # configuration and storage")
        home_variable="GEMINI_CLI_HOME",
        home_hooks=".gemini/settings.json",
        api=("generativelanguage.googleapis.com", "GOOGLE_GEMINI_BASE_URL"),
        jsonc=True,
        rebrief_at="BeforeAgent",
        no_headless_start=True,
        shell_tool="run_shell_command",
        misread="Gemini drops AFK_TASK_TOKEN from its environment",
    ),
    Harness(
        "cursor",
        cursor_settings,
        lambda project, home: [project / ".cursor" / "hooks.json", home / ".cursor" / "hooks.json"],
        ("sessionStart", "preToolUse", "postToolUse"),
        to_ours=CURSOR_TO_OURS,
        payload_in=cursor_payload,
        answer_out=cursor_answer,
        program="cursor-agent",
        skip_permissions=(Skip(("-f", "--force")),),
        state=(".cursor",),
        # https://cursor.com/docs/cli/reference/configuration ("Override with
        # environment variables: CURSOR_CONFIG_DIR"); not tried on the real
        # CLI, which is not on a registry this project can pin
        home_variable="CURSOR_CONFIG_DIR",
        home_hooks="hooks.json",
        api=("api2.cursor.sh", None),
        rebrief_at="PostToolUse",
        sample=cursor_sample,
    ),
    Harness(
        "copilot",
        copilot_settings,
        lambda project, home: sorted((project / ".github" / "hooks").glob("*.json")),
        ("PreToolUse", "PostToolUse"),
        answer_out=copilot_answer,
        skip_permissions=(Skip(("--allow-all-tools", "--allow-all", "--yolo")),),
        state=(".copilot",),
        # https://docs.github.com/en/copilot/reference/copilot-cli-reference/
        # cli-config-dir-reference; COPILOT_HOME moves all of it (its
        # --config-dir does not move its plugins: github/copilot-cli#3000)
        home_variable="COPILOT_HOME",
        api=("api.githubcopilot.com", None),
        shell_tool="bash",
    ),
)
#: the records, by the name `afk hooks` takes
BY_NAME = {h.name: h for h in HARNESS_TABLE}
#: the records, by their command's program name
BY_PROGRAM = {h.command: h for h in HARNESS_TABLE}
#: every harness's long options that turn its permission checks off: any of
#: them in a command counts (its harness's or not: a script may run another);
#: a short one (``-y``, ``-f``, ``-s``) only after its own harness's program
LONG_SKIPS = tuple(
    Skip(tuple(f for f in rule.flags if f.startswith("--")), rule.value, rule.key, rule.settings)
    for h in HARNESS_TABLE
    for rule in h.skip_permissions
    if any(f.startswith("--") for f in rule.flags)
)
#: each agent's hook settings, by the name `afk hooks` takes
SETTINGS = {h.name: h.settings for h in HARNESS_TABLE}
#: the payload readers `afk hook --harness` takes (claude: Claude Code and Codex CLI)
READERS = {h.name: h for h in HARNESS_TABLE if h.reads == h.name}
HARNESSES = tuple(READERS)
#: every harness afk knows by name (codex's hooks read as claude's): what a
#: profile runs, what a task may ask for (afk enqueue --harness)
HARNESS_NAMES = tuple(h.name for h in HARNESS_TABLE)
#: the required label of a harness (afk enqueue --harness)
HARNESS_LABEL = "harness:"


def harness_of(command: Sequence[str]) -> Harness | None:
    """The harness a command runs (by its program's name), if afk knows it."""
    return BY_PROGRAM.get(os.path.basename(command[0])) if command else None


def harness_label(harness: Any) -> str:
    """``harness:claude``: what a task that must run under a harness requires,
    and what a loop offers for the harness of each profile it can use."""
    if harness not in HARNESS_NAMES:
        raise BadInput(f"harness {harness!r}: one of {', '.join(sorted(HARNESS_NAMES))}")
    return HARNESS_LABEL + str(harness)
