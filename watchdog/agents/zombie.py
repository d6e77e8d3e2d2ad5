"""What a session whose task is lost (a zombie) may still run of ``afk``: the
PreToolUse hook denies every other shell command of it. A command is read
as the shell would read it (:func:`afk_words`), then looked up in the room's
table of every command of the CLI (:data:`watchdog.agents.reach.COMMANDS`,
each command's ``zombie`` rule)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ..ids import names_task
from .reach import COMMANDS, GLOBAL_OPTIONS

#: what separates, redirects or groups commands in a shell, outside quotes
_OPERATORS = "();<>|&\n\r"


def afk_words(command: Any, path: str | None = None) -> list[str]:
    """The words of a shell command that is one plain ``afk`` command, parsed
    as the shell would: no list, pipe, redirection, group or substitution
    (a newline outside quotes separates commands too), and the program is
    ``afk`` from PATH (``path``, else this process's) or this very afk by its
    absolute path; else []."""
    if not isinstance(command, str) or "`" in command or "$(" in command:
        return []
    lexer = shlex.shlex(command, posix=True, punctuation_chars=_OPERATORS)
    lexer.whitespace, lexer.whitespace_split = " \t", True
    # no comments: shlex would swallow a comment's newline with it, and the
    # shell starts a new command after it ("afk status # x\nrm -rf ~")
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError:
        return []
    if not words or any(w and all(c in _OPERATORS for c in w) for w in words):
        return []
    return words if words[0] == "afk" or _is_this_afk(words[0], path) else []


def _is_this_afk(program: str, path: str | None = None) -> bool:
    import shutil  # (only here: a hook's fast path does without it)

    if not os.path.isabs(program) or Path(program).name != "afk":
        return False
    ours = shutil.which("afk", path=path) or str(Path(sys.executable).parent / "afk")
    return os.path.realpath(program) == os.path.realpath(ours)


# -- what a zombie may still run --------------------------------------------------

#: the options of afk's commands that take a value (``--opt V`` or ``--opt=V``)
_VALUED = frozenset(
    {
        *("--dsn", "--config", "--token", "--result", "--error", "--patch", "--agent"),
        *("--since", "--project", "--format", "--account", "--runner", "--until"),
        *("--reason", "--install", "--harness", "--title", "--spec"),
    }
)
_COMMON = GLOBAL_OPTIONS
_HELP = frozenset({"-h", "--help"})


def zombie_may_run(words: list[str], own: tuple[str, int] | None) -> bool:
    """Whether a session whose task is lost may run the afk command
    ``words`` (as :func:`afk_words` gives them): a command that only reads,
    a help text, or a finishing command of its own task ``own`` (id, token)
    under its own token. The list says what is safe; whatever it does not
    name is denied."""
    rest = words[1:]
    while rest[:1] and rest[0].split("=", 1)[0] in _COMMON:  # afk --dsn X COMMAND
        rest = rest[1:] if "=" in rest[0] else rest[2:]
    if rest in (["--version"], ["-h"], ["--help"]):
        return True
    if not rest or rest[0] not in COMMANDS:
        return False
    rule, args = COMMANDS[rest[0]].zombie, rest[1:]
    if args and args[-1] in _HELP and all(not a.startswith("-") for a in args[:-1]):
        return len(args) <= 2  # `afk db --help`, `afk db status -h`: argparse prints, exits
    if rule is None:
        return False
    options, positionals = _split(args)
    if options is None or positionals is None:
        return False
    if rule.options is not None and not set(options) <= rule.options:
        return False
    if rule.positionals is not None:
        if len(positionals) > len(rule.positionals):
            return False
        for word, allowed in zip(positionals, rule.positionals, strict=False):
            if allowed is not None and word not in allowed:
                return False
    if not rule.own_task:
        return True
    id_at = len(rule.positionals or ()) - 1  # the task id is the last positional
    named = positionals[id_at] if len(positionals) > id_at else None
    given = options.get("--token")
    if own is None:  # its own token is in its shell's environment: name none
        return named is None and given is None
    return (named is None or names_task(named, own[0])) and (
        given is None or given.strip() == str(own[1])
    )


def _split(args: list[str]) -> tuple[dict[str, str] | None, list[str] | None]:
    """An afk command's words after its name, as options (each once) and
    positional words; (None, None) for what this reading cannot be sure of:
    a ``--``, a short option, an option given twice, a value missing."""
    options: dict[str, str] = {}
    positionals: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--" or (word.startswith("-") and not word.startswith("--") and word != "-"):
            return None, None
        if not word.startswith("--"):
            positionals.append(word)
            continue
        name, eq, value = word.partition("=")
        if name in _VALUED and not eq:
            following = next(words, None)
            if following is None:
                return None, None
            value = following
        elif name not in _VALUED and eq:
            return None, None
        if name in options:
            return None, None
        options[name] = value
    return options, positionals


def may_text() -> str:
    """What a zombie may still run, as its deny reason tells it: the
    commands of the room's table that it may run at all."""
    rules = {name: c.zombie for name, c in COMMANDS.items()}
    reads = sorted(c for c, r in rules.items() if r is not None and not r.own_task)
    own = sorted(c for c, r in rules.items() if r is not None and r.own_task)
    return (
        f"afk {', '.join(reads)} (to read), and afk {', '.join(own)} of this task with its "
        "own token"
    )
