"""What needs a person (issue 43): ``--ask-for`` rules in Claude Code's
permission-rule syntax (https://code.claude.com/docs/en/permissions), read
here and matched against a tool call as its PreToolUse hook sees it. Pure:
the hook (:mod:`watchdog.agents.hooks`) asks, the queue keeps the requests
(``afk_approval``, migration 0032).

A rule is ``Tool`` (every call of the tool; ``mcp__server`` every tool of
that server; ``*`` a glob over the name) or ``Tool(spec)``:

- ``Bash(git push:*)``: a command whose words start with ``git push``;
  ``Bash(rm -rf *)``: a glob; ``Bash(make deploy)``: that exact command.
  The call is read by the shell's own grammar (:mod:`shellwords`): it
  matches when any simple command it runs does, wherever it sits (a
  pipeline, a subshell, ``$(...)``, ``sh -c '...'``, behind ``env`` or
  ``timeout``, with git's global options); a call whose text hides what runs
  (``eval``, ``$GIT push``) is asked about.
- ``WebFetch(domain:example.com)``: a URL on that host or under it.
- ``Read(...)``, ``Edit(...)``, ``Write(...)``: a glob over the file's path
  (``./x`` and ``x`` match a path that ends in it).
- any other tool's spec: a glob over the values of its input.

A rule only ever asks for a person: afk's hook answers ``defer`` (or ``deny``
where the harness has no defer) for a call that matches, ``allow`` only for
the very call a person approved, and nothing for anything else."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import BadInput

#: the rule of a request that no rule made: a call the harness itself would
#: have asked a person about (Claude Code's PermissionRequest in -p mode)
ASKED = "(a call Claude Code would ask about)"
#: each harness's shell tool (Claude Code's Bash, Gemini CLI's
#: run_shell_command, Codex's and Copilot's): a Bash(...) rule names them all
SHELL_TOOLS = ("Bash", "run_shell_command", "Shell", "bash")
#: the tools whose spec is a path
PATH_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "Glob", "Grep"})
RULE = re.compile(r"^(?P<tool>[A-Za-z0-9_*.-]+)(?:\((?P<spec>.+)\))?$", re.S)
#: the longest rule read
MAX_RULE = 500
#: the tools a rule may name (a rule with any other name never matched: issue
#: 50 item 5): Claude Code's (https://code.claude.com/docs/en/settings#tools-
#: available-to-claude), Gemini CLI's and Codex's own; ``Bash`` names every
#: harness's shell tool; ``mcp__...`` and a glob are a name's pattern
KNOWN_TOOLS = frozenset({
    "Bash", "BashOutput", "KillShell", "Read", "Edit", "MultiEdit", "Write", "NotebookEdit",
    "NotebookRead", "Glob", "Grep", "LS", "WebFetch", "WebSearch", "Task", "Agent",
    "TodoWrite", "ExitPlanMode", "SlashCommand", "Skill",
    "read_file", "read_many_files", "write_file", "replace", "list_directory", "glob",
    "search_file_content", "web_fetch", "google_web_search", "save_memory",
    "apply_patch", "update_plan", "view_image",
})  # fmt: skip


@dataclass(frozen=True)
class Rule:
    text: str
    tool: str
    spec: str | None = None


def parse(text: str) -> Rule:
    """One rule, or BadInput saying what is wrong with it."""
    given = text.strip()
    m = RULE.match(given) if 0 < len(given) <= MAX_RULE else None
    if m is None or any(ord(c) < 32 for c in given):
        raise BadInput(
            f"--ask-for {text!r} is not a permission rule: write Tool or Tool(spec), "
            "as Bash(git push:*), WebFetch or mcp__deploy__*"
        )
    tool, spec = m.group("tool"), m.group("spec")
    if spec is not None and not spec.strip():
        raise BadInput(f"--ask-for {text!r} has an empty spec: write {tool}")
    if "*" not in tool and not tool.startswith("mcp__") and tool not in KNOWN_TOOLS:
        cased = {k.lower(): k for k in KNOWN_TOOLS} | {t.lower(): "Bash" for t in SHELL_TOOLS}
        right = cased.get(tool.lower())
        if right is not None:
            raise BadInput(f"--ask-for {text!r}: write {right} (tool names have their case)")
        raise BadInput(
            f"--ask-for {text!r}: {tool} is not a tool a harness has (Bash, Read, Edit, "
            "Write, WebFetch, mcp__server__tool ...)"
        )
    if spec is not None and spec.count("(") != spec.count(")"):
        raise BadInput(f"--ask-for {text!r}: its pattern's parentheses are unbalanced")
    return Rule(given, tool, spec)


def parse_all(texts: Iterable[str]) -> list[Rule]:
    return [parse(t) for t in texts if t.strip()]


def first_match(rules: Iterable[Rule], tool: str, tool_input: Any) -> Rule | None:
    """The first rule that asks a person about this call."""
    return next((r for r in rules if matches(r, tool, tool_input)), None)


def matches(rule: Rule, tool: str, tool_input: Any) -> bool:
    if rule.tool == "Bash" and tool in SHELL_TOOLS:
        tool = "Bash"
    if not _tool_matches(rule.tool, tool):
        return False
    if rule.spec is None:
        return True
    given = tool_input if isinstance(tool_input, Mapping) else {}
    spec = rule.spec.strip()
    if tool == "Bash":
        command = shell_command(given)
        if command is None:
            return False
        from .shellwords import commands  # (the parser: only with a shell rule)

        ran = commands(command)
        # (a command whose text hides what runs is asked about, never let through)
        return ran is None or any(_command_matches(spec, words) for words in ran)
    if tool == "WebFetch" and spec.startswith("domain:"):
        host = (urlsplit(str(given.get("url", ""))).hostname or "").lower()
        want = spec.removeprefix("domain:").strip().lower()
        return bool(host) and (host == want or host.endswith("." + want))
    if tool in PATH_TOOLS:
        path = str(given.get("file_path") or given.get("path") or given.get("notebook_path") or "")
        bare = spec.removeprefix("./")
        return bool(path) and (
            fnmatch.fnmatchcase(path, spec)
            or fnmatch.fnmatchcase(path, "*/" + bare)
            or path == bare
        )
    return any(fnmatch.fnmatchcase(str(v), spec) for v in given.values())


def shell_command(tool_input: Any) -> str | None:
    """A call's shell command, when its input has one (a string)."""
    command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
    return command if isinstance(command, str) else None


def _tool_matches(pattern: str, tool: str) -> bool:
    if pattern.startswith("mcp__") and pattern.count("__") == 1:  # a server: all its tools
        return tool == pattern or tool.startswith(pattern + "__")
    return fnmatch.fnmatchcase(tool, pattern)


def _command_matches(spec: str, words: list[str]) -> bool:
    """A rule's spec against one simple command's words (shellwords)."""
    if spec.endswith(":*"):
        prefix = spec[:-2].split()
        return bool(prefix) and words[: len(prefix)] == prefix
    command = " ".join(words)
    if "*" in spec:
        return fnmatch.fnmatchcase(command, spec)
    return command == " ".join(spec.split())


#: a session id afk puts on a command line (`claude --resume ID`): the
#: harness's own ids are UUIDs; anything else came from a forged payload
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def resumable(session: Any) -> bool:
    """Whether ``session`` may go on a command line as ``--resume``'s value:
    a hook's payload is the agent's to write (it may run the hook command
    itself), and a value like ``--dangerously-skip-permissions`` must never
    reach the harness as an option."""
    return isinstance(session, str) and SESSION_ID.match(session) is not None


def call_hash(tool: str, tool_input: Any) -> str:
    """The call a person decides: its tool and its exact input."""
    text = json.dumps([tool, tool_input], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: what afk loop gives a run about approvals (issue 43), as JSON: the
#: --ask-for rules ("ask_for"), how long a request waits ("ttl", seconds) and
#: what it then becomes ("on_timeout": deny or hold)
RUN_APPROVALS = "AFK_RUN_APPROVALS"


def run_approvals(env: Mapping[str, str]) -> tuple[list[Rule], float | None, str]:
    """A run's approvals as :data:`RUN_APPROVALS` gives them (none when it
    does not read: a hook never fails its agent): its rules, the time to live
    it was given (None: none; config.approval_ttl holds it to the loop's
    bounds), and what a request no one decided becomes."""
    try:
        given = json.loads(env.get(RUN_APPROVALS) or "{}")
        rules = parse_all(str(r) for r in given.get("ask_for") or [])
        ttl = float(given["ttl"]) if given.get("ttl") is not None else None
    except (ValueError, TypeError, AttributeError, KeyError, BadInput):
        return [], None, "deny"
    return rules, ttl, "hold" if given.get("on_timeout") == "hold" else "deny"


def answer(row: Mapping[str, Any], rule: str, *, defer: bool) -> tuple[str, str]:
    """What a PreToolUse says of a call that needs a person, from what its
    request says (``approval_for_call`` in people.sql: its ``action``, allow,
    deny or defer): allow, deny or defer (where the harness can, ``defer``),
    and the line the agent reads."""
    who = f"{row.get('decided_by') or 'someone'}, via {row.get('decided_via') or 'afk'}"
    noted = f": {row['note']}" if row.get("note") else ""
    if row["action"] == "allow":
        return "allow", f"afk: a person approved this call ({who}){noted}"
    if row["action"] == "deny":
        if row.get("decision") == "expired" or row.get("decided_via") == "ttl":
            return (
                "deny",
                "afk: no one decided on this call in time: it is denied; go on without it",
            )
        return "deny", f"afk: a person denied this call ({who}){noted}; go on without it"
    if defer:
        return "defer", (
            f"afk: {rule} needs a person's approval (request {row['approval_id']}, "
            "afk approvals): this session waits for it"
        )
    return "deny", (
        f"afk: {rule} needs a person's approval, and a person was asked (request "
        f"{row['approval_id']}): do not do it another way; end your turn, the "
        "task waits for their answer"
    )
