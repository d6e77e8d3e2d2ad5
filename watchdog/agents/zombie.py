"""What a session whose task is lost (a zombie) may still run of ``afk``: the
PreToolUse hook denies every other shell command of it. A command is read
as the shell would read it (:func:`afk_words`), then looked up in
:data:`ZOMBIE_MAY`, which names every command of the CLI."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class ZombieRule:
    """What a session whose task is lost may still run of one command."""

    #: the options it may give (``None``: any, for a command that only reads)
    options: frozenset[str] | None = None
    #: the positional words it may give, in order (``None``: any)
    positionals: tuple[frozenset[str] | None, ...] | None = None
    #: a finishing command of its own task: no other task's id, no other token
    own_task: bool = False


def _own(*options: str, question: bool = False) -> ZombieRule:
    """A finishing command of the session's own task: the fence refuses it
    under a stale token anyway, and it can name no other task or token."""
    words: tuple[frozenset[str] | None, ...] = ((None,) if question else ()) + (None,)
    return ZombieRule(frozenset({"--token", *options}), words, own_task=True)


_READS = ZombieRule()
_COMMON = ("--dsn", "--config")
#: every command of the CLI, and what a zombie may run of it: what only
#: reads, and its own task's finishing commands. A command missing here is
#: denied; a unit test keeps this table and the CLI's commands in step.
ZOMBIE_MAY: dict[str, ZombieRule | None] = {
    "status": _READS,
    "show": _READS,
    "dead": _READS,
    "questions": _READS,
    "resume-brief": _READS,
    # (not --live: it runs the project's hook commands; not --sandbox, P8)
    "doctor": ZombieRule(frozenset({"--json", "--project", *_COMMON}), ()),
    "review": _READS,
    "limit": ZombieRule(frozenset({"--account", *_COMMON}), ()),  # the list, not a park
    "hooks": ZombieRule(frozenset({"--gate", *_COMMON}), (None,)),  # printed, not installed
    "db": ZombieRule(frozenset(_COMMON), (frozenset({"status"}),)),
    "digest": ZombieRule(frozenset({"--dry-run", "--format", *_COMMON}), ()),  # printed
    "done": _own("--result", "--next"),
    "fail": _own("--error", "--next"),
    "checkpoint": _own("--patch"),
    "heartbeat": _own(),
    "ask": _own(question=True),
    "pause": _own(),  # not --agent or --runner: those pause other tasks
    # these run a program, claim, enqueue, park, stop a server or change
    # other tasks: never a zombie's
    "migrate": None,
    "enqueue": None,
    "claim": None,
    "loop": None,
    "retry": None,
    "answer": None,
    "approve": None,  # a person's decision, never the agent's
    "deny": None,
    "approvals": None,  # (a person's list: the calls of every task)
    "web": None,  # makes a person's login
    "profile": None,  # the ways to run an agent: a person's
    "loops": _READS,
    "trust": None,
    "cancel": None,  # ends other tasks  # lets a worktree's changed config run
    "reclaim": None,
    "demo": None,
    "once": None,
    "hook": None,
    "watchdog": None,
    "gc": None,  # removes worktrees
    "restore": None,
    "import": None,  # enqueues
    "export": None,  # writes a file
}
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
    if not rest or rest[0] not in ZOMBIE_MAY:
        return False
    rule, args = ZOMBIE_MAY[rest[0]], rest[1:]
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
    return (named is None or named == own[0]) and (given is None or given.strip() == str(own[1]))


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
    commands of :data:`ZOMBIE_MAY` that it may run at all."""
    reads = sorted(c for c, r in ZOMBIE_MAY.items() if r is not None and not r.own_task)
    own = sorted(c for c, r in ZOMBIE_MAY.items() if r is not None and r.own_task)
    return (
        f"afk {', '.join(reads)} (to read), and afk {', '.join(own)} of this task with its "
        "own token"
    )
