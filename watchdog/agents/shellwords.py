"""The simple commands a shell command runs (issue 50 item 5), read by the
parser that knows the shell: tree-sitter-bash (a maintained grammar, on
PyPI), not a split on ``&&`` and ``;``. Pure; loaded only when a run has a
shell rule (``--ask-for Bash(...)``): a hook without one never imports it.

Every simple command is found wherever the shell would run it: in a
pipeline, a list, a subshell, a ``$(...)`` or backticks, a function's body,
an ``if``/``for``/``while``, and inside ``sh -c '...'`` (``bash``, ``dash``,
``zsh``, ``ksh`` too), read again. Each is given as the words that name
what runs: its program by its name (``/usr/bin/git`` is ``git``), with the
wrappers that run another program set aside (``env``, ``command``,
``exec``, ``nice``, ``timeout``, ``nohup``, ``xargs``, ``stdbuf``,
``setsid``, ``time``, ``coproc``, ``sudo``, ``doas``, ``watch``, ``busybox``
and more, with their options), what ``find -exec`` runs, and git's global
options before its subcommand (``-C``, ``-c``, ``--git-dir``...). A word the shell would
build at run time (``$X``) stays as the text it is.

What hides what runs from a reader of the text gives None: ``eval``,
``source`` and ``.``, an ``alias`` (or git's ``-c alias.X=...``), ``env -S``,
a program named by an expansion (``$GIT push``), a
``sh -c`` whose script is not literal, a shell reading its script from its
input (``echo 'git push' | sh``, a heredoc), a command that does not parse.
Programs started by programs (``make``, a script, ``npm run``) are not
looked into."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

#: what runs the program in its words: each with its options that take a value
WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "builtin": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "setsid": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-L", "-l", "-d", "-s", "-E", "-e", "-a",
                        "--arg-file", "--delimiter", "--max-args", "--max-procs",
                        "--max-lines", "--max-chars", "--replace"}),
    "coproc": frozenset(),
    "busybox": frozenset(),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R", "-T",
                       "--user", "--group", "--chdir", "--host", "--prompt"}),
    "doas": frozenset({"-u", "-C"}),
    "watch": frozenset({"-n", "--interval", "-d", "-q", "--equexit"}),
    "chronic": frozenset(),
    "unbuffer": frozenset(),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "taskset": frozenset(),
    "chrt": frozenset(),
    "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
}  # fmt: skip
#: wrappers whose first word that is not an option is theirs, not the program
#: (timeout's duration, taskset's mask, chrt's priority, flock's file)
WRAPPER_VALUE = frozenset({"timeout", "taskset", "chrt", "flock"})
#: a wrapper's options that make it run a string of its own: never read through
WRAPPER_SCRIPTS = frozenset({"-S", "--split-string", "-c", "--command"})
#: shells whose ``-c SCRIPT`` is read again
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
#: what runs text that is not in the command, or makes a word run another
#: program (an alias): never read through
INDIRECT = frozenset({"eval", "source", ".", "alias"})
#: what runs a command given in its arguments, up to ``;`` or ``+``
EXEC_OPTIONS = {"find": frozenset({"-exec", "-execdir", "-ok", "-okdir"})}
#: git's options before its subcommand that take a value
GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                               "--exec-path", "--config-env", "--super-prefix"})  # fmt: skip
#: how deep ``sh -c`` inside ``sh -c`` is read
MAX_DEPTH = 8


class Hidden(Exception):
    """The text does not say what runs."""


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def commands(text: str) -> list[list[str]] | None:
    """The words of each simple command ``text`` runs, in order; None when
    the text hides what runs (see the module)."""
    try:
        return _commands(text, 0)
    except Hidden:
        return None


def _commands(text: str, depth: int) -> list[list[str]]:
    if depth > MAX_DEPTH:
        raise Hidden
    tree = _parser().parse(text.encode("utf-8", "surrogatepass"))
    if tree.root_node.has_error:
        raise Hidden
    found: list[list[str]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "command":
            found.extend(_simple(node, depth))
        stack.extend(reversed(node.children))
    return found


def _simple(node: Any, depth: int) -> list[list[str]]:
    """A simple command's words (and what its ``sh -c`` runs)."""
    words: list[str | None] = []
    for child in node.children:
        if child.type in ("variable_assignment", "file_redirect", "herestring_redirect",
                          "heredoc_redirect", "comment"):  # fmt: skip
            continue
        if child.type == "command_name":
            name = _literal(child.children[0] if child.children else child)
            if name is None:
                raise Hidden  # (the program comes from an expansion)
            words.append(name)
        else:
            words.append(_literal(child))
    return _unwrapped(words, depth)


def _unwrapped(words: list[str | None], depth: int) -> list[list[str]]:
    """The words of what runs: wrappers set aside, ``sh -c`` read again."""
    while words:
        first = words[0]
        if first is None:
            raise Hidden
        name = os.path.basename(first)
        if name in INDIRECT:
            raise Hidden
        if name in WRAPPERS:
            words = _after_wrapper(name, words[1:])
            continue
        if name in SHELLS and "-c" in words[1:]:
            script = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else None
            if script is None:
                raise Hidden  # (a script that is not literal)
            return [[name, "-c"], *_commands(script, depth + 1)]
        if name in SHELLS and all(w is not None and w.startswith("-") for w in words[1:]):
            raise Hidden  # (a shell reading its script from its input: a pipe, a heredoc)
        rest = [w if w is not None else "$…" for w in words[1:]]
        if name == "git":
            rest = _git_subcommand(rest)
        return [[name, *rest], *_executed(name, rest, depth)]
    return []


def _after_wrapper(name: str, words: list[str | None]) -> list[str | None]:
    takes = WRAPPERS[name]
    i, valued = 0, name in WRAPPER_VALUE
    while i < len(words):
        word = words[i]
        if word is None:
            raise Hidden
        if word in WRAPPER_SCRIPTS and name in ("env", "flock"):
            raise Hidden  # (a string it splits or runs itself)
        if name == "env" and "=" in word and not word.startswith("-"):
            i += 1
        elif word == "--":
            return words[i + 1 :]
        elif word.startswith("-") and word != "-":
            i += 2 if word in takes else 1
        elif valued:
            valued, i = False, i + 1  # (timeout's duration)
        else:
            return words[i:]
    return []


def _git_subcommand(words: list[str]) -> list[str]:
    i = 0
    while i < len(words) and words[i].startswith("-"):
        if words[i] == "-c" and i + 1 < len(words) and words[i + 1].lower().startswith("alias."):
            raise Hidden  # (an alias made on the command line: another subcommand runs)
        i += 2 if words[i] in GIT_VALUE_OPTIONS else 1
    return words[i:]


def _executed(name: str, words: list[str], depth: int) -> list[list[str]]:
    """The commands ``find -exec CMD ... ;`` (and its siblings) run."""
    found: list[list[str]] = []
    options = EXEC_OPTIONS.get(name, frozenset())
    i = 0
    while i < len(words):
        if words[i] in options:
            end = next((j for j in range(i + 1, len(words)) if words[j] in (";", "+")), None)
            given: list[str | None] = list(words[i + 1 : end])
            found.extend(_unwrapped(given, depth))
            i = end if end is not None else len(words)
        i += 1
    return found


def _literal(node: Any) -> str | None:
    """A word's value as the shell makes it, or None when it is built at run
    time (an expansion, a substitution)."""
    kind = str(node.type)
    text = bytes(node.text).decode("utf-8", "surrogatepass")
    if kind == "word":
        return _unescaped(text)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        parts = [c for c in node.children if c.type not in ('"',)]
        if all(c.type == "string_content" for c in parts):
            return _unescaped(text[1:-1], IN_QUOTES)
        return None
    if kind == "concatenation":
        pieces = [_literal(c) for c in node.children]
        return None if any(p is None for p in pieces) else "".join(p or "" for p in pieces)
    if kind in ("number",):
        return text
    return None


#: a backslash and the character it quotes
_BACKSLASH = re.compile(r"\\(.)", re.S)
#: what a backslash quotes inside double quotes (elsewhere there, it stays)
IN_QUOTES = '$`"\\\n'


def _unescaped(text: str, only: str | None = None) -> str:
    """``text`` with the shell's backslashes taken away: every one, or only
    those before a character of ``only`` (inside double quotes)."""
    return _BACKSLASH.sub(
        lambda m: m.group(1) if only is None or m.group(1) in only else m.group(0), text
    )
