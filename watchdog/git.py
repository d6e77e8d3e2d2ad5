"""afk's own git: every call a subprocess with a timeout, under a config no
repository can change (an agent's branch may plant a ``.git/config`` or a
``.gitattributes``: no hook, driver, pager or program of the repository's
runs), and a failure one line (:class:`~watchdog.errors.WorkspaceError`).
The worktrees are :mod:`watchdog.workspaces`; this is the git they stand on.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence

from .errors import WorkspaceError

#: seconds a git command may take (a worktree of a large repository is made
#: in seconds; a hung one must not hold the night)
GIT_TIMEOUT = 120
#: the oldest git whose `merge-tree --write-tree` afk review reads
GIT_NEEDED = (2, 38)

#: what afk's own git runs with, whatever the repository's config says (an
#: agent's branch may plant a .git/config or a .gitattributes): no hook, no
#: fsmonitor, no ssh command, askpass, credential helper, pager, editor or
#: signing program of the repository's (issue 40 item 5)
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.sshCommand=ssh",
    "core.askPass=",
    "credential.helper=",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "gpg.program=gpg",
    "gpg.ssh.program=ssh-keygen",
    "gpg.x509.program=gpgsm",
    "core.alternateRefsCommand=",
    "core.gitProxy=",
    "protocol.ext.allow=never",
)
#: and for each driver the repository's config names (its .gitattributes
#: picks them), commands that run nothing of its: filters pass content
#: through, a diff's text conversion is the content, a merge driver fails
DRIVER_CONFIG = {
    "filter": ("clean=cat", "smudge=cat", "process=", "required=false"),
    "diff": ("textconv=cat", "command=true"),
    "merge": ("driver=false", "recursive=text"),
}
#: what afk's git never takes from its own environment
GIT_ENV_DROPPED = ("GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND")


def git_argv(args: Sequence[str], cwd: str, *, timeout: float = GIT_TIMEOUT) -> list[str]:
    """``git ARGS`` as afk runs it in ``cwd``: with :data:`SAFE_CONFIG`, and
    every driver of the repository's config defused (:data:`DRIVER_CONFIG`),
    read by ``git config``, which runs nothing of the repository's."""
    safe = [arg for pair in SAFE_CONFIG for arg in ("-c", pair)]
    try:
        env = git_env(cwd)
    except WorkspaceError:
        return ["git", *safe, *args]  # (git() says why, and runs nothing)
    try:
        named = subprocess.run(
            ["git", *safe, "config", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        named = []  # (the command itself says what is wrong)
    drivers = sorted({tuple(name.split(".")[:-1]) for name in named if name.count(".") >= 2})
    for section, *driver in drivers:
        for setting in DRIVER_CONFIG.get(section, ()):
            safe += ["-c", ".".join([section, *driver, setting])]
    return ["git", *safe, *args]


#: git's variables that say where a repository is: afk's git sets them
#: itself (:func:`pinned_dirs`), or takes none of the environment's
GIT_DIR_VARIABLES = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def git_env(cwd: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of afk's git: its own, without what would run a
    program of the environment's choosing, never prompting; in ``cwd``, the
    repository's folders pinned (:func:`pinned_dirs`)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in GIT_ENV_DROPPED and k not in GIT_DIR_VARIABLES
    }
    pinned = pinned_dirs(cwd) if cwd is not None else {}
    return {**env, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **pinned, **extra}


def pinned_dirs(top: str) -> dict[str, str]:
    """Where the repository whose working tree is ``top`` keeps its git
    folders, read from its ``.git`` and the layout git makes, never from a
    ``commondir`` file (a run could write one to send afk's git into a
    repository of its own making): ``GIT_DIR``, ``GIT_COMMON_DIR`` and
    ``GIT_WORK_TREE``, set so that git reads no such file. A linked
    worktree's git folder is ``COMMON/worktrees/NAME``; anything else is its
    own common folder. A ``commondir`` file that says otherwise is refused
    (git's refs would still follow it): :class:`WorkspaceError`. Nothing
    where ``top`` holds no ``.git`` (git finds it, as for a subfolder)."""
    dot = os.path.join(top, ".git")
    if os.path.isdir(dot) and not os.path.islink(dot):
        git_dir = dot
    elif os.path.isfile(dot) and not os.path.islink(dot):
        try:
            with open(dot, encoding="utf-8") as f:
                said = f.read(4096)
        except (OSError, UnicodeDecodeError):
            return {}
        if not said.startswith("gitdir: "):
            return {}
        git_dir = os.path.normpath(os.path.join(top, said[len("gitdir: ") :].strip()))
    else:
        return {}
    parent = os.path.dirname(git_dir)
    common = os.path.dirname(parent) if os.path.basename(parent) == "worktrees" else git_dir
    planted = os.path.join(git_dir, "commondir")
    if os.path.lexists(planted):
        try:
            with open(planted, encoding="utf-8") as f:
                said = os.path.join(git_dir, f.read(4096).strip())
        except (OSError, UnicodeDecodeError):
            said = ""
        if os.path.realpath(said) != os.path.realpath(common):
            raise WorkspaceError(
                f"{planted} sends git to {said or 'an unreadable place'}, not to the "
                f"repository's own {common}: afk's git runs nothing there"
            )
    return {"GIT_DIR": git_dir, "GIT_COMMON_DIR": common, "GIT_WORK_TREE": top}


def git(args: Sequence[str], cwd: str, *, timeout: float = GIT_TIMEOUT) -> str:
    """``git ARGS`` in ``cwd``: its stdout, or WorkspaceError with git's own line."""
    try:
        proc = subprocess.run(
            git_argv(args, cwd, timeout=timeout),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=git_env(cwd),
        )
    except FileNotFoundError as exc:
        if not os.path.isdir(cwd):
            raise WorkspaceError(f"{cwd} does not exist") from None
        raise WorkspaceError("git is not installed (afk doctor checks it)") from exc
    except NotADirectoryError:
        raise WorkspaceError(f"{cwd} is not a folder") from None
    except subprocess.TimeoutExpired:
        raise WorkspaceError(f"git {args[0]} in {cwd} took over {timeout:g}s") from None
    if proc.returncode != 0:
        said = [line for line in proc.stderr.splitlines() if line.strip()]
        raise WorkspaceError(f"git {args[0]} in {cwd}: {said[-1] if said else 'failed'}")
    return proc.stdout


def quiet(args: Sequence[str], cwd: str) -> str | None:
    """``git ARGS``'s stdout, stripped; None where git failed."""
    try:
        return git(args, cwd).strip()
    except WorkspaceError:
        return None


def toplevel(folder: str) -> str | None:
    """The top of the git working tree ``folder`` is in, or None."""
    return quiet(["rev-parse", "--show-toplevel"], folder) if os.path.isdir(folder) else None


def common_dir(path: str) -> str | None:
    """The git folder a worktree at ``path`` shares with its repository
    (its objects and refs: where its commits go)."""
    return quiet(["rev-parse", "--path-format=absolute", "--git-common-dir"], path)


def tracked(repo: str, path: str) -> bool:
    """Whether git tracks ``path`` in ``repo`` (committed or staged)."""
    return quiet(["ls-files", "--error-unmatch", "--", path], repo) is not None


def head(path: str) -> str | None:
    return quiet(["rev-parse", "HEAD"], path)


def dirty(path: str) -> bool:
    return bool(quiet(["status", "--porcelain"], path))


def commits(path: str, since: str, until: str = "HEAD") -> list[dict[str, str]]:
    out = quiet(["log", "--format=%H%x1f%s", f"{since}..{until}"], path) or ""
    return [
        {"sha": sha, "subject": subject}
        for sha, _, subject in (line.partition("\x1f") for line in out.splitlines() if line)
    ]


def diffstat(path: str, since: str, until: str = "HEAD") -> dict[str, int]:
    """``git diff --shortstat`` as numbers."""
    text = (
        quiet(["diff", "--no-ext-diff", "--no-textconv", "--shortstat", since, until], path) or ""
    )
    found = {
        key: int(m.group(1)) if (m := re.search(rf"(\d+) {word}", text)) else 0
        for key, word in (("files", "file"), ("insertions", "insertion"), ("deletions", "deletion"))
    }
    return found


def base_tip(repo: str, base: str | None) -> tuple[str, str | None]:
    """The base a branch is reviewed against, now: the ref it asked for, else
    the repository's current branch (main, say); its name and commit."""
    name = base or quiet(["symbolic-ref", "--short", "HEAD"], repo) or "HEAD"
    return name, quiet(["rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], repo)


def conflicts(repo: str, base: str, tip: str) -> list[str]:
    """The files that would conflict if ``tip`` were merged into ``base``,
    by `git merge-tree --write-tree` (git 2.38 and later): no checkout, no
    index, no working tree is touched."""
    try:
        proc = subprocess.run(
            git_argv(
                ["merge-tree", "--write-tree", "--name-only", "--no-messages", base, tip], repo
            ),
            env=git_env(repo),
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired, WorkspaceError):
        return []
    if proc.returncode != 1:  # 0: merges cleanly; anything else: no answer
        return []
    return [line for line in proc.stdout.splitlines()[1:] if line.strip()]


def git_version() -> tuple[int, ...] | None:
    """The installed git's version, None without git."""
    try:
        said = subprocess.run(
            ["git", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", said)
    return tuple(int(n) for n in found.groups() if n is not None) if found else None
