"""Each task in a git worktree of its own (migration 0017, sql/workspaces.sql).

A task enqueued with ``--repo`` (or claimed by ``afk loop --repo``) gets, at
its first claim, a worktree of that repository on a branch of its own
(``afk/<id>-<slug>`` unless it named one), started from ``--base`` (else the
repository's HEAD then, recorded as ``base_sha``), in ``$AFK_HOME/worktrees``:
outside the main checkout, whose ``git status`` stays clean. Its retries,
resumes and reclaims reuse the same worktree and branch. While a lease holds
it the worktree is locked (``git worktree lock``), so that no prune removes
it; it holds a block of ``AFK_PORTS_PER_TASK`` ports that no other live
workspace overlaps (``AFK_PORT``, the first).

Git is a real dependency here: every git call is a subprocess with a
timeout, and a failure is one line (:class:`WorkspaceError`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .db import Database
from .errors import AfkError, BadInput, Conflict
from .text import clean, one_line

#: seconds a git command may take (a worktree of a large repository is made
#: in seconds; a hung one must not hold the night)
GIT_TIMEOUT = 120
#: seconds `gh pr view` may take: never a noticeable delay to a run
GH_TIMEOUT = 5
#: where the port blocks are taken from
FIRST_PORT, LAST_PORT = 20000, 59999
#: characters of a check's output kept
CHECK_TAIL = 4000


class WorkspaceError(AfkError):
    """A task's worktree could not be made or used (its repository is gone,
    git refused): the run cannot start, and nothing was lost."""


@dataclass(frozen=True)
class Workspace:
    task_id: uuid.UUID
    repo: str
    branch: str
    path: str
    base_sha: str
    port: int | None
    ports: int
    verify: str | None = None
    require_changes: bool = False

    def env(self) -> dict[str, str]:
        """What the agent gets in its environment."""
        out = {"AFK_WORKTREE": self.path, "AFK_BRANCH": self.branch, "AFK_BASE_SHA": self.base_sha}
        if self.port is not None:
            out["AFK_PORT"] = str(self.port)
            out["AFK_PORTS_PER_TASK"] = str(self.ports)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "path": self.path,
            "branch": self.branch,
            "base_sha": self.base_sha,
            "port": self.port,
        }


# -- git ------------------------------------------------------------------------


def git(args: Sequence[str], cwd: str, *, timeout: float = GIT_TIMEOUT) -> str:
    """``git ARGS`` in ``cwd``: its stdout, or WorkspaceError with git's own line."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
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


def _quiet(args: Sequence[str], cwd: str) -> str | None:
    try:
        return git(args, cwd).strip()
    except WorkspaceError:
        return None


def request(
    repo: str,
    *,
    base: str | None = None,
    branch: str | None = None,
    verify: str | None = None,
    require_changes: bool = False,
) -> dict[str, Any]:
    """A task's workspace request, checked with git: the repository exists,
    the base resolves, the branch is a valid name. BadInput otherwise,
    before anything is created."""
    path = Path(repo).expanduser()
    if not path.is_dir():
        raise BadInput(f"--repo {repo}: no such folder")
    top = _quiet(["rev-parse", "--show-toplevel"], str(path))
    if not top:
        raise BadInput(f"--repo {repo} is not a git repository")
    if base is not None and not _quiet(
        ["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], top
    ):
        raise BadInput(f"--base {base!r} does not resolve to a commit in {top}")
    if branch is not None and _quiet(["check-ref-format", "--branch", branch], top) is None:
        raise BadInput(f"--branch {branch!r} is not a valid branch name")
    if verify is not None and not verify.strip():
        raise BadInput("--verify is empty: give the command that checks the work")
    return {
        "repo": os.path.realpath(top),
        "base": base,
        "branch": branch,
        "verify": verify,
        "require_changes": require_changes,
    }


def branch_taken(db: Database, req: Mapping[str, Any]) -> bool:
    """Whether another task's workspace uses (or asked for) the branch named."""
    if not req.get("branch"):
        return False
    row = db.one("workspace_branch_taken", {"repo": req["repo"], "branch": req["branch"]})
    return bool(row and row["taken"])


def slug(title: str, limit: int = 40) -> str:
    words = re.findall(r"[a-z0-9]+", title.lower())
    out = "-".join(words)[:limit].strip("-")
    return out or "task"


def default_branch(task_id: uuid.UUID, title: str) -> str:
    return f"afk/{str(task_id)[:8]}-{slug(title)}"


def worktrees_home() -> Path:
    from . import embedded

    return embedded.home() / "worktrees"


def worktree_path(repo: str, task_id: uuid.UUID) -> Path:
    """Where a task's worktree lives: outside the main checkout."""
    digest = hashlib.sha256(repo.encode()).hexdigest()[:8]
    return worktrees_home() / f"{Path(repo).name}-{digest}" / str(task_id)


# -- a task's worktree ---------------------------------------------------------


def row_of(db: Database, task_id: uuid.UUID) -> dict[str, Any] | None:
    """A task's workspace request and the worktree it has (``path`` None
    before its first claim); None for an unknown task."""
    return db.one("workspace_of", {"id": task_id})


def adopt(db: Database, task_id: uuid.UUID, req: Mapping[str, Any]) -> None:
    """A supervisor's default workspace for a task that asked for none."""
    db.one("workspace_adopt", {"id": task_id, "request": json.dumps(dict(req))})


def prepare(db: Database, task_id: uuid.UUID, title: str, ports: int) -> Workspace | None:
    """The task's worktree, made at its first claim and found again after:
    locked while its lease holds. None for a task without a workspace."""
    row = row_of(db, task_id)
    if row is None or row["request"] is None:
        return None
    req = row["request"]
    repo = str(req["repo"])
    if not os.path.isdir(repo):
        raise WorkspaceError(f"the repository {repo} of the task's workspace does not exist")
    branch = row["branch"] or req.get("branch") or default_branch(task_id, title)
    path = row["path"] if row["path"] and row["removed_at"] is None else None
    path = path or str(worktree_path(repo, task_id))
    base_sha = row["base_sha"]
    if not (Path(path) / ".git").exists():
        if base_sha is None:
            base = req.get("base") or "HEAD"
            base_sha = git(["rev-parse", "--verify", f"{base}^{{commit}}"], repo).strip()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if _quiet(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo):
            git(["worktree", "add", path, branch], repo)  # its branch, kept: work again
        else:
            git(["worktree", "add", "-b", branch, path, base_sha], repo)
    try:
        made = db.one(
            "workspace_made",
            {
                "id": task_id,
                "repo": repo,
                "branch": branch,
                "path": path,
                "base_sha": base_sha,
                "ports": ports,
                "first_port": FIRST_PORT,
                "last_port": LAST_PORT - ports + 1,
            },
        )
    except Conflict:
        raise WorkspaceError(f"branch {branch} of {repo} is another task's workspace") from None
    assert made is not None  # an upsert: always one row
    lock(path, repo, task_id)
    return Workspace(
        task_id=task_id,
        repo=repo,
        branch=made["branch"],
        path=made["path"],
        base_sha=made["base_sha"],
        port=made["port"],
        ports=made["ports"] or ports,
        verify=req.get("verify"),
        require_changes=bool(req.get("require_changes")),
    )


def lock(path: str, repo: str, task_id: uuid.UUID) -> None:
    """No `git worktree prune` (nor any other tool) removes it while it runs."""
    reason = f"afk: task {task_id} holds its lease"
    _quiet(["worktree", "lock", "--reason", reason, path], repo)  # (locked already: fine)


def unlock(ws: Workspace) -> None:
    _quiet(["worktree", "unlock", ws.path], ws.repo)


def record_head(db: Database, ws: Workspace, head: str | None) -> None:
    if head:
        db.execute("workspace_head", {"id": ws.task_id, "head_sha": head})


def head(path: str) -> str | None:
    return _quiet(["rev-parse", "HEAD"], path)


def dirty(path: str) -> bool:
    return bool(_quiet(["status", "--porcelain"], path))


def commits(path: str, since: str, until: str = "HEAD") -> list[dict[str, str]]:
    out = _quiet(["log", "--format=%H%x1f%s", f"{since}..{until}"], path) or ""
    return [
        {"sha": sha, "subject": subject}
        for sha, _, subject in (line.partition("\x1f") for line in out.splitlines() if line)
    ]


def diffstat(path: str, since: str, until: str = "HEAD") -> dict[str, int]:
    """``git diff --shortstat`` as numbers."""
    text = _quiet(["diff", "--shortstat", since, until], path) or ""
    found = {
        key: int(m.group(1)) if (m := re.search(rf"(\d+) {word}", text)) else 0
        for key, word in (("files", "file"), ("insertions", "insertion"), ("deletions", "deletion"))
    }
    return found


def pull_request(branch: str, cwd: str) -> dict[str, Any] | None:
    """The branch's pull request, as `gh` sees it; None without `gh`, or with
    no answer in :data:`GH_TIMEOUT` seconds (never a failure, never a delay)."""
    gh = shutil.which("gh")
    if gh is None or not os.path.isdir(cwd):
        return None
    try:
        proc = subprocess.run(
            [gh, "pr", "view", branch, "--json", "url,number,state,isDraft"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GH_TIMEOUT,
        )
        said = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(said, dict):
        return None
    return {k: said.get(k) for k in ("url", "number", "state", "isDraft")}


def lineage(row: Mapping[str, Any], *, with_pr: bool = True) -> dict[str, Any]:
    """What a task's worktree holds now: its branch's commits since its base,
    what they change, whether anything is left uncommitted, its pull request."""
    path, base = str(row["path"]), str(row["base_sha"])
    live = row.get("removed_at") is None and os.path.isdir(path)
    tip = (head(path) if live else None) or row.get("head_sha") or base
    where = path if live else str(row["repo"])
    return {
        "repo": row["repo"],
        "path": path,
        "branch": row["branch"],
        "base_sha": base,
        "head_sha": tip,
        "commits": commits(where, base, tip),
        "diffstat": diffstat(where, base, tip),
        "dirty": dirty(path) if live else False,
        "port": row.get("port"),
        "pr": pull_request(str(row["branch"]), where) if with_pr else None,
        "removed": not live,
    }


def check(ws: Workspace, command: str, timeout: float) -> tuple[int, str]:
    """Run the task's check in its worktree, through the shell: its exit
    status (124 past ``timeout``) and the tail of what it printed."""
    try:
        proc = subprocess.run(
            command,
            shell=True,
            cwd=ws.path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            env={**os.environ, **ws.env()},
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        said = exc.output.decode("utf-8", "replace") if exc.output else ""
        return 124, clean(said)[-CHECK_TAIL:] + f"\n(the check was stopped after {timeout:g}s)"
    return proc.returncode, clean(proc.stdout.decode("utf-8", "replace"))[-CHECK_TAIL:]


def telling(tail: str) -> str:
    """A check's telling line: its last line that is not blank."""
    lines = [line for line in tail.splitlines() if line.strip()]
    return one_line(lines[-1]) if lines else "(it printed nothing)"
