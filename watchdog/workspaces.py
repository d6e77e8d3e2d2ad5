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
timeout, and a failure is one line (:class:`~watchdog.errors.WorkspaceError`);
afk's own git, which no repository's config can change, is :mod:`watchdog.git`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agents.reach import PLACEHOLDERS
from .db import Database, json_param
from .errors import BadInput, Conflict, WorkspaceError
from .git import (
    GIT_TIMEOUT,
    base_tip,
    commits,
    common_dir,
    conflicts,
    diffstat,
    dirty,
    git,
    git_argv,
    git_env,
    head,
    pinned_dirs,
    quiet,
)
from .ids import short_id
from .models import Task, TaskRef, task_id_of
from .text import one_line

#: the longest branch name a task may ask for (a ref is a file: its name
#: must fit the file system's, with room for its folders)
MAX_BRANCH = 200
#: seconds `gh pr view` may take: never a noticeable delay to a run
GH_TIMEOUT = 5
#: where the port blocks are taken from
FIRST_PORT, LAST_PORT = 20000, 59999
#: characters of a check's output kept
CHECK_TAIL = 4000


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
    for name, value in (("repo", repo), ("base", base), ("branch", branch), ("verify", verify)):
        if value is not None and not isinstance(value, str):  # (a --file line's JSON, P31)
            raise BadInput(f"--{name} must be text, not {type(value).__name__}")
    if not isinstance(require_changes, bool):
        raise BadInput(f"--require-changes must be true or false, not {require_changes!r}")
    path = Path(repo).expanduser()
    if path.exists() and not path.is_dir():
        raise BadInput(f"--repo {repo} is a file, not a folder")
    if not path.is_dir():
        raise BadInput(f"--repo {repo}: no such folder")
    top = quiet(["rev-parse", "--show-toplevel"], str(path))
    if not top:
        if quiet(["rev-parse", "--is-bare-repository"], str(path)) == "true":
            raise BadInput(f"--repo {repo} is a bare repository: a task needs one with a checkout")
        raise BadInput(f"--repo {repo} is not a git repository")
    if base is not None and not quiet(
        ["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], top
    ):
        raise BadInput(f"--base {base!r} does not resolve to a commit in {top}")
    if base is None and not quiet(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], top):
        raise BadInput(  # (P22: else the night stopped at its claim)
            f"--repo {repo} has no commit to start from: commit first, or give --base"
        )
    if branch is not None and len(branch.encode()) > MAX_BRANCH:
        raise BadInput(f"--branch is longer than {MAX_BRANCH} bytes")
    if branch is not None:
        # (git expands @{-1} and @ to another branch's name: what gc would
        # delete later is then whatever they name by then, P3)
        if quiet(["check-ref-format", "--branch", branch], top) != branch:
            raise BadInput(f"--branch {branch!r} is not a valid branch name")
        if quiet(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], top):
            raise BadInput(
                f"--branch {branch!r} exists in {top}: a task works on a branch of its own "
                "(afk would commit onto yours, and afk gc would remove it)"
            )
        clash = branch_clash(top, branch)
        if clash is not None:
            raise BadInput(f"--branch {branch!r} cannot be made in {top}: {clash}")
    if verify is not None and not verify.strip():
        raise BadInput("--verify is empty: give the command that checks the work")
    return {
        "repo": os.path.realpath(top),
        "base": base,
        "branch": branch,
        "verify": verify,
        "require_changes": require_changes,
    }


def branch_clash(top: str, branch: str) -> str | None:
    """Why git could never make ``branch`` in the repository at ``top``
    though no branch has its name (R5), or None: a branch where a folder of
    its ref would be (``x`` for ``x/y``), branches under its name (``x/y``
    for ``x``), or a worktree on it with no commit yet."""
    parts = branch.split("/")
    for n in range(1, len(parts)):
        prefix = "/".join(parts[:n])
        if quiet(["rev-parse", "--verify", "--quiet", f"refs/heads/{prefix}"], top):
            return f"branch {prefix!r} exists (a branch cannot be made under another)"
    under = quiet(
        ["for-each-ref", "--count=1", "--format=%(refname:short)", f"refs/heads/{branch}/"], top
    )
    if under:
        return f"branch {under!r} exists under it (a branch cannot be made over others)"
    listed = (quiet(["worktree", "list", "--porcelain"], top) or "").splitlines()
    if f"branch refs/heads/{branch}" in listed:
        return f"a worktree of {top} has it checked out"
    return None


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
    return f"afk/{short_id(task_id)}-{slug(title)}"


def worktrees_home() -> Path:
    from . import embedded

    return embedded.home() / "worktrees"


def _private_folders(folder: Path) -> None:
    """The folders of a repository's worktrees, and afk's home above them,
    readable to no other local user."""
    from .embedded import home_mode, private

    private(worktrees_home().parent, home_mode())
    private(worktrees_home())
    private(folder)


def worktree_path(repo: str, task_id: uuid.UUID) -> Path:
    """Where a task's worktree lives: outside the main checkout."""
    digest = hashlib.sha256(repo.encode()).hexdigest()[:8]
    return worktrees_home() / f"{Path(repo).name}-{digest}" / str(task_id)


# -- a task's worktree ---------------------------------------------------------


def row_of(db: Database, task_id: uuid.UUID) -> dict[str, Any] | None:
    """A task's workspace request and the worktree it has (``path`` None
    before its first claim); None for an unknown task."""
    return db.one("workspace_of", {"id": task_id})


def view(
    db: Database, task_id: uuid.UUID, request: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A task's worktree as it is now (its commits, what they change, what is
    left uncommitted, its pull request), or what it asked for before its first
    claim; None for a task without a workspace."""
    if request is None:
        return None
    row = row_of(db, task_id)
    if row is None or row["path"] is None:
        return {**request, "path": None}
    return lineage(row)


# -- the agent's own configuration, pinned (issue 40 item 4) ----------------------


def pinned_state(path: str) -> dict[str, str]:
    """What a worktree at ``path`` would run with of its own, by every route
    a change could take: a sha256 of each file of the agent's configuration
    on disk (:data:`~watchdog.agents.reach.PINNED`, committed or not), the
    blob of each in its index (``index:PATH``) and in its branch's head
    (``HEAD:PATH``), and a sha256 of its repository's ``.git/config`` and
    hooks (not the samples). Nothing of it is run."""
    from .agents.reach import PINNED

    out: dict[str, str] = {}
    work = Path(path)
    for name in PINNED:
        _walk(out, "", work / name, work)
    out.update(_git_pins(path, "index"))
    out.update(_git_pins(path, "HEAD"))
    common = common_dir(path)
    if common is not None:
        git_dir = Path(common)
        _walk(out, ".git/", git_dir / "config", git_dir)
        hooks = git_dir / "hooks"
        if hooks.is_dir():
            for hook in sorted(hooks.iterdir()):
                if not hook.name.endswith(".sample"):
                    _add(out, f".git/hooks/{hook.name}", hook)
    return out


def _add(out: dict[str, str], key: str, file: Path) -> None:
    try:
        if file.is_symlink():
            out[key] = "link:" + os.readlink(file)
        elif file.is_file():
            digest = hashlib.sha256()
            with file.open("rb") as f:
                while chunk := f.read(1 << 16):
                    digest.update(chunk)
            out[key] = digest.hexdigest()
    except OSError:
        out[key] = "unreadable"


def _walk(out: dict[str, str], prefix: str, root: Path, base: Path) -> None:
    if root.is_dir() and not root.is_symlink():
        for child in sorted(root.rglob("*")):
            if not child.is_dir() or child.is_symlink():
                _add(out, f"{prefix}{child.relative_to(base)}", child)
    elif root.exists() or root.is_symlink():
        _add(out, f"{prefix}{root.relative_to(base)}", root)


def _git_pins(path: str, where: str) -> dict[str, str]:
    """The blobs git holds of the pinned paths in the worktree's ``index``,
    or in a commit (``HEAD``, a base's sha): ``WHERE:PATH`` -> blob."""
    from .agents.reach import PINNED

    if where == "index":
        said = quiet(["ls-files", "-s", "-z", "--", *PINNED], path)
        rows = [
            (line.split()[1], line.split("\t", 1)[1])
            for line in (said or "").split("\0")
            if "\t" in line
        ]
    else:
        said = quiet(["ls-tree", "-r", "-z", where, "--", *PINNED], path)
        rows = [
            (line.split()[2], line.split("\t", 1)[1])
            for line in (said or "").split("\0")
            if "\t" in line
        ]
    return {f"{where if where == 'index' else 'HEAD'}:{name}": blob for blob, name in rows}


def pinned_baseline(path: str, base: str) -> dict[str, str]:
    """The blobs of the pinned paths at commit ``base``, as the index and the
    head would hold them had the branch changed none (``index:PATH``,
    ``HEAD:PATH``)."""
    out: dict[str, str] = {}
    for key, blob in _git_pins(path, base).items():
        out[key] = out["index:" + key.removeprefix("HEAD:")] = blob
    return out


def _baseline_commit(row: Mapping[str, Any]) -> str:
    """The commit a worktree's own configuration is judged against: its
    base, or for one stacked on a task's branch, where that branch left the
    repository's own (what a dependency's branch planted is no baseline)."""
    base = str(row["base_sha"])
    if not row.get("stacked_on"):
        return base
    _, tip = base_tip(str(row["repo"]), row.get("base"))
    found = quiet(["merge-base", base, tip], str(row["repo"])) if tip else None
    return found or base


def pinned_changes(db: Database, ws: Workspace) -> list[str]:
    """What of its own configuration the worktree changed since it was made
    (or last trusted), by path, whichever route the change took (its disk,
    its index, its commits); [] when nothing did. The first look records the
    repository's base as the baseline (and the git folder's config and hooks
    as they are); a record from before the index and head were pinned takes
    theirs from the base."""
    row = row_of(db, ws.task_id)
    now = pinned_state(ws.path)
    before = row.get("pinned") if row is not None else None
    base = _baseline_commit(row) if row is not None and row.get("base_sha") else None
    from_base = pinned_baseline(ws.path, base) if base else {}
    if before is None:  # (its disk as it is: what git holds differs from the base's)
        before = {**{k: v for k, v in now.items() if not k.startswith(GIT_PINS)}, **from_base}
        db.execute("workspace_pinned", {"id": ws.task_id, "pinned": json.dumps(before)})
    elif not any(k.startswith(GIT_PINS) for k in before):
        before = {**before, **from_base}
    return _changed(before, now)


def trust(db: Database, task_id: uuid.UUID) -> list[str]:
    """A person lets the worktree's configuration as it is now run (a later
    change is held again): what changed since the last trust."""
    row = row_of(db, task_id)
    if row is None or row["path"] is None or row["removed_at"] is not None:
        raise BadInput(f"task {task_id} has no worktree to trust")
    now = pinned_state(str(row["path"]))
    before = row.get("pinned") or {}
    db.execute("workspace_pinned", {"id": task_id, "pinned": json.dumps(now)})
    return _changed(before, now)


#: the keys of what git holds of a pinned path (its index, its head)
GIT_PINS = ("index:", "HEAD:")


def _changed(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """The paths whose pin differs, by any route."""
    keys = {*before, *now}
    return sorted(
        {
            k.split(":", 1)[1] if k.startswith(GIT_PINS) else k
            for k in keys
            if before.get(k) != now.get(k)
        }
    )


def stack_base(db: Database, task_id: uuid.UUID, repo: str) -> str | None:
    """The branch a new worktree of ``task_id`` starts from: that of a task
    it depends on with a worktree of the same repository, while the branch
    is there (None: from its base)."""
    found = db.one("workspace_stack_base", {"id": task_id, "repo": repo})
    if found is None:
        return None
    branch = str(found["branch"])
    there = quiet(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo)
    return branch if there else None


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
    base_sha, stacked_on = row["base_sha"], row.get("stacked_on")
    if not (Path(path) / ".git").exists():
        if base_sha is None:
            base = req.get("base")
            if base is None:  # on the work of a task it depends on, if any
                stacked_on = stack_base(db, task_id, repo)
            start = base or (f"refs/heads/{stacked_on}" if stacked_on else "HEAD")
            base_sha = git(["rev-parse", "--verify", f"{start}^{{commit}}"], repo).strip()
        _private_folders(Path(path).parent)
        # a worktree deleted by hand is still registered: forget it, and make
        # it again from its branch, which holds its committed work (P22)
        quiet(["worktree", "prune"], repo)
        start = base_sha
        if quiet(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo):
            if row["base_sha"] is None:  # (P4: made since the task was enqueued)
                raise WorkspaceError(
                    f"branch {branch} of {repo} exists and is not this task's: afk works "
                    "on a branch of its own"
                )
            start = git(["rev-parse", f"refs/heads/{branch}"], repo).strip()  # work again
        make_folder(repo, path, branch, start, base_sha, task_id)
    try:
        made = db.row(
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
                "stacked_on": stacked_on,
            },
        )
    except Conflict:
        raise WorkspaceError(f"branch {branch} of {repo} is another task's workspace") from None
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
    """No `git worktree prune` (nor any other tool) removes an older task's
    linked worktree while it runs (a task folder of its own is no worktree)."""
    if not has_own_git(path):
        reason = f"afk: task {task_id} holds its lease"
        quiet(["worktree", "lock", "--reason", reason, path], repo)  # (locked already: fine)


def unlock(ws: Workspace) -> None:
    if not has_own_git(ws.path):
        quiet(["worktree", "unlock", ws.path], ws.repo)


def record_head(db: Database, ws: Workspace, head: str | None) -> None:
    """After a run: its branch's head recorded, and its branch brought back
    into the person's repository."""
    if head:
        db.execute("workspace_head", {"id": ws.task_id, "head_sha": head})
        bring_back(ws.repo, ws.path, ws.branch)


# -- a task's own git folder (issue 49 item 4) ----------------------------------------

#: where a task folder's borrowed base is kept from the person's `git gc`
KEEP = "refs/afk/keep"
#: what of the person's repository's config a task folder gets: its remotes
#: (pushes, `gh pr view`) and who commits
COPIED_CONFIG = r"^(remote\.[^.]+\.(url|pushurl|fetch)|user\.(name|email))$"
#: afk's git in the person's repository while it brings a branch back: no
#: automatic gc or maintenance started there
QUIET_FETCH = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")


def has_own_git(path: str) -> bool:
    """A task folder with a git folder of its own (not a linked worktree of
    the person's repository, which an older task may still have)."""
    dot = os.path.join(path, ".git")
    return os.path.isdir(dot) and not os.path.islink(dot)


def make_folder(
    repo: str, path: str, branch: str, start: str, base: str, task_id: uuid.UUID
) -> None:
    """A task's folder: a repository of its own whose objects borrow the
    person's, read-only, through alternates, on ``branch`` at ``start``,
    with the person's remotes; nothing of the person's git folder is the
    task's to write (its refs, index, config, hooks, objects). A keep-ref in
    the person's repository holds ``base`` (what the folder borrows) from
    its `git gc`."""
    objects = os.path.join(common_dir(repo) or os.path.join(repo, ".git"), "objects")
    os.makedirs(path, mode=0o700)
    os.chmod(path, 0o700)  # (no other local user reads a task's work)
    try:
        git(["init", "-q"], path)
        with open(os.path.join(path, ".git", "objects", "info", "alternates"), "w") as f:
            f.write(os.path.abspath(objects) + "\n")
        said = quiet(["config", "--local", "-z", "--get-regexp", COPIED_CONFIG], repo) or ""
        for entry in filter(None, said.split("\0")):
            key, _, value = entry.partition("\n")
            git(["config", "--add", key, value], path)
        git(["update-ref", f"refs/heads/{branch}", start], path)
        git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], path)
        git(["reset", "-q", "--hard"], path)
    except WorkspaceError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    git(["update-ref", f"{KEEP}/{task_id}", base], repo)


def own_refs(path: str, branch: str) -> list[str]:
    """What a task folder of its own holds besides its branch: the refs the
    agent made there (a branch, a tag, its stash), which removing the folder
    would lose (in a worktree they were the person's repository's)."""
    if not has_own_git(path):
        return []
    said = quiet(["for-each-ref", "--format=%(refname)"], path) or ""
    ours = (f"refs/heads/{branch}", "refs/afk/saved")
    return [r for r in said.splitlines() if r and r not in ours]


def save_own_refs(repo: str, path: str, ref: str) -> None:
    """Every ref of :func:`own_refs` kept under ``ref`` in the person's
    repository (``refs/...`` as they were; each stash entry as ``stash/N``)."""
    stashes = (quiet(["stash", "list", "--format=%H"], path) or "").split()
    for n, sha in enumerate(stashes):
        git(["update-ref", f"refs/afk/stash/{n}", sha], path)
    specs = ["+refs/heads/*:" + f"{ref}/refs/heads/*", "+refs/tags/*:" + f"{ref}/refs/tags/*"]
    if stashes:
        specs.append(f"+refs/afk/stash/*:{ref}/stash/*")
    git([*QUIET_FETCH, "fetch", "-q", "--no-tags", "--no-write-fetch-head", path, *specs], repo)


def bring_back(repo: str, path: str, branch: str) -> None:
    """The task's branch as its folder has it, fetched into the person's
    repository by afk's own git (outside any boundary): its review, its
    pull request, a task stacked on it, `git log` there all see it. Nothing
    for an older task's linked worktree (its branch is the repository's)."""
    if not has_own_git(path) or not os.path.isdir(repo):
        return
    spec = f"+refs/heads/{branch}:refs/heads/{branch}"
    quiet([*QUIET_FETCH, "fetch", "-q", "--no-tags", "--no-write-fetch-head", path, spec], repo)


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
    out = {k: said.get(k) for k in ("url", "number", "state", "isDraft")}
    url = out["url"]
    if not (isinstance(url, str) and re.match(r"https?://[^\s\"'<>]+$", url)):
        out["url"] = None  # (it goes into links: a web address, or nothing)
    return out


def left_over(path: str) -> bool:
    """Whether a worktree holds work no commit has: what `git status` shows,
    and any file with something in it under the paths afk tells a task's own
    git to ignore for the sandbox engine (agents.reach.PLACEHOLDERS: a run
    outside the sandbox may have written one, and gc must not take it for
    clean)."""
    if dirty(path):
        return True
    listed = quiet(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--",
                    *(f":(top,literal){p}" for p in PLACEHOLDERS)], path)  # fmt: skip
    for name in (listed or "").split("\0"):
        try:
            held = os.lstat(os.path.join(path, name)) if name else None
        except OSError:
            continue
        if held is not None and (stat.S_ISLNK(held.st_mode) or held.st_size > 0):
            return True
    return False


def emptied(path: str) -> str | None:
    """Whether a task's worktree holds nothing of a run's work: "deleted"
    (no folder), "emptied" (a folder with nothing in it, not even its
    ``.git``: R9), or None."""
    if not os.path.isdir(path):
        return "deleted"
    try:
        with os.scandir(path) as entries:
            return None if next(entries, None) is not None else "emptied"
    except OSError:
        return None  # (there, but not ours to read: git will say so)


def unreadable(path: str) -> str | None:
    """Why git cannot read the task's worktree at ``path``, or None: its
    ``.git`` is gone, or is not a repository git reads (R6: a garbage ``.git``
    read as "no changes"). Never git's search of the folders above it."""
    dot = os.path.join(path, ".git")
    if not os.path.lexists(dot):
        return f"its worktree {path} cannot be read by git (its .git link is gone)"
    try:
        pinned = pinned_dirs(path)
    except WorkspaceError as exc:
        return f"its worktree {path} cannot be read by git ({exc})"
    if not pinned or head(path) is None:
        return f"its worktree {path} cannot be read by git (its .git is not a repository)"
    return None


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
        "dirty": left_over(path) if live else False,
        "port": row.get("port"),
        "stacked_on": row.get("stacked_on"),
        "pr": pull_request(str(row["branch"]), where) if with_pr else None,
        "removed": not live,
    }


def telling(tail: str) -> str:
    """A check's telling line: its last line that is not blank."""
    lines = [line for line in tail.splitlines() if line.strip()]
    return one_line(lines[-1]) if lines else "(it printed nothing)"


# -- the morning review ---------------------------------------------------------


def review(row: Mapping[str, Any], *, with_pr: bool = True) -> dict[str, Any]:
    """One done task's work, as the morning reviews it."""
    repo = str(row["repo"])
    done_at = row["done_at"]
    check = row["last_check"]
    out: dict[str, Any] = {
        "id": str(row["id"]),
        "agent_id": row["agent_id"],
        "title": row["title"],
        "done_at": done_at.isoformat() if hasattr(done_at, "isoformat") else done_at,
        "branch": row["branch"],
        "cost_usd": row["cost_usd"],
        # (the last run's check, the task's own --verify or its loop's)
        "check": check if check and check.get("status") is not None else None,
        "denied_runs": row.get("runs_denied") or 0,
        "error": None,
        "path": row["path"],
        "head_sha": row.get("head_sha"),
        "commits": 0,
        "subjects": [],
        "diffstat": {"files": 0, "insertions": 0, "deletions": 0},
        "dirty": False,
        "pr": None,
        "base": row.get("base"),
        "behind_by": None,
        "stacked_on": row.get("stacked_on"),
        "conflicts": [],
        "changes": False,
    }
    if not os.path.isdir(repo):
        return {**out, "error": f"the repository {repo} is not here"}
    path = str(row["path"])
    live = row.get("removed_at") is None and os.path.isdir(path)
    why = unreadable(path) if live else None
    if why is not None:  # (P23, R6: not "no changes")
        return {**out, "error": why}
    if live:
        bring_back(repo, path, str(row["branch"]))
    seen = lineage(row, with_pr=with_pr)
    name, tip = base_tip(repo, row.get("base"))
    head_sha = seen["head_sha"]
    behind = quiet(["rev-list", "--count", f"{row['base_sha']}..{tip}"], repo) if tip else None
    return {
        **out,
        "path": seen["path"],
        "head_sha": head_sha,
        "commits": len(seen["commits"]),
        "subjects": [c["subject"] for c in seen["commits"]][:20],
        "diffstat": seen["diffstat"],
        "dirty": seen["dirty"],
        "pr": seen["pr"],
        "base": name,
        "behind_by": int(behind) if behind and behind.isdigit() else None,
        "stacked_on": row.get("stacked_on"),
        "conflicts": conflicts(repo, tip, head_sha) if tip and head_sha else [],
        "changes": len(seen["commits"]) > 0 or seen["dirty"],
    }


def to_review(
    db: Database,
    *,
    agent: str | None = None,
    since_seconds: float = 86400,
    limit: int = 50,
    with_pr: bool = True,
) -> list[dict[str, Any]]:
    rows = db.all("workspaces_done", {"agent": agent, "since": since_seconds, "limit": limit})
    return [review(r, with_pr=with_pr) for r in rows]


# -- cleaning up, never losing work -------------------------------------------------

#: where `afk gc --force` saves what a worktree held: the branch's tip and
#: the uncommitted and untracked files as a commit, per task
TRASH = "refs/afk/trash"


def folder_size(path: str) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _ours(row: Mapping[str, Any]) -> str | None:
    """Why ``row``'s folder is not one afk may remove (None: it is): it must
    be under afk's worktrees folder and registered as a worktree of its
    repository. A folder afk did not make is never removed."""
    path = os.path.realpath(str(row["path"]))
    home = os.path.realpath(worktrees_home())
    if os.path.commonpath([path, home]) != home:
        return f"{path} is not in afk's worktrees folder"
    if has_own_git(path):
        borrowed = os.path.join(path, ".git", "objects", "info", "alternates")
        objects = os.path.join(common_dir(str(row["repo"])) or "", "objects")
        try:
            with open(borrowed, encoding="utf-8") as f:
                lent = f.read(4096).split()
        except OSError:
            lent = []
        if os.path.realpath(objects) not in {os.path.realpath(x) for x in lent}:
            return f"{path} is not a task folder of {row['repo']}"
        return None
    listed = quiet(["worktree", "list", "--porcelain"], str(row["repo"])) or ""
    registered = {
        os.path.realpath(line[len("worktree ") :])
        for line in listed.splitlines()
        if line.startswith("worktree ")
    }
    if path not in registered:
        return f"{path} is not a worktree of {row['repo']}"
    return None


def merged(row: Mapping[str, Any]) -> str | None:
    """Whether the branch's work is in its base (or its pull request is
    merged): how, or None."""
    repo, tip = str(row["repo"]), row.get("head_sha") or row["base_sha"]
    name, base = base_tip(repo, row.get("base"))
    if (
        base
        and tip
        and subprocess.run(
            git_argv(["merge-base", "--is-ancestor", str(tip), base], repo),
            env=git_env(repo),
            cwd=repo,
            capture_output=True,
            timeout=GIT_TIMEOUT,
        ).returncode
        == 0
    ):
        return f"merged into {name}"
    pr = pull_request(str(row["branch"]), repo)
    if pr is not None and str(pr.get("state")).upper() == "MERGED":
        return f"pull request {pr.get('number')} merged"
    return None


def save(row: Mapping[str, Any]) -> str:
    """Everything a worktree holds, under ``refs/afk/trash/<task>/``: its
    branch's tip (``branch``) and, when anything is uncommitted or untracked,
    all of it as one commit on top (``work``). Returns the ref folder."""
    repo, path, task = str(row["repo"]), str(row["path"]), str(row["task_id"])
    ref = f"{TRASH}/{task}"
    tip = head(path) or str(row.get("head_sha") or row["base_sha"])
    bring_back(repo, path, str(row["branch"]))
    git(["update-ref", f"{ref}/branch", tip], repo)
    if own_refs(path, str(row["branch"])):  # (a stash, a branch: the folder's alone)
        save_own_refs(repo, path, ref)
    if dirty(path):
        scratch = tempfile.mkdtemp(prefix="afk-gc-")  # (not in the worktree: not saved)
        index = os.path.join(scratch, "index")
        env = git_env(path, GIT_INDEX_FILE=index)
        try:
            for args in (["read-tree", tip], ["add", "-A", "."]):
                subprocess.run(
                    git_argv(args, path), cwd=path, env=env, check=True, capture_output=True
                )
            tree = subprocess.run(
                git_argv(["write-tree"], path), cwd=path, env=env, check=True,
                capture_output=True, text=True,
            ).stdout.strip()  # fmt: skip
        except subprocess.CalledProcessError as exc:
            raise WorkspaceError(f"could not save {path}: {exc.stderr!r}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        made_in = path if has_own_git(path) else repo  # (where the tree's objects are)
        work = git(
            ["commit-tree", tree, "-p", tip, "-m", f"afk gc: what task {task} left uncommitted"],
            made_in,
        ).strip()
        if made_in == path:
            git(["update-ref", "refs/afk/saved", work], path)
            git([*QUIET_FETCH, "fetch", "-q", "--no-tags", "--no-write-fetch-head", path,
                 f"+refs/afk/saved:{ref}/work"], repo)  # fmt: skip
        else:
            git(["update-ref", f"{ref}/work", work], repo)
    archive(path, archive_path(repo, task))
    return ref


def archive_path(repo: str, task: str) -> str:
    """Where `afk gc --force` keeps a worktree's files byte for byte, beside
    the repository's trash refs (in its git folder)."""
    common = common_dir(repo) or os.path.join(repo, ".git")
    return os.path.join(common, "afk-trash", f"{task}.tar")


def archive(path: str, to: str) -> None:
    """Every file of the worktree at ``path`` (ignored ones too, with their
    modes, links and empty folders; not its ``.git`` link) into a tar at
    ``to``: what git's trash commit cannot hold (P1)."""
    import tarfile

    os.makedirs(os.path.dirname(to), mode=0o700, exist_ok=True)
    partial = f"{to}.partial"
    with (
        open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as raw,
        tarfile.open(fileobj=raw, mode="w") as tar,  # (0600 before a byte of it is written)
    ):
        for name in sorted(os.listdir(path)):
            if name != ".git":
                tar.add(os.path.join(path, name), arcname=name)
    os.replace(partial, to)


def unarchive(frm: str, path: str) -> None:
    """Put back what :func:`archive` kept, over the worktree at ``path``
    (nothing outside it: the tar's names are checked)."""
    import tarfile

    with tarfile.open(frm) as tar:
        tar.extractall(path, filter="tar")  # (modes kept; no path leaves ``path``)


def submodules_inside(path: str) -> bool:
    """Whether the worktree at ``path`` holds an initialised submodule: its
    repository lives in the worktree's git folder, which `git worktree
    remove` deletes (P2)."""
    own = quiet(["rev-parse", "--path-format=absolute", "--git-dir"], path)
    modules = os.path.join(own, "modules") if own else None
    return bool(modules and os.path.isdir(modules) and os.listdir(modules))


def remove(db: Database, row: Mapping[str, Any], *, trash: str | None) -> None:
    """Take a worktree away (it was checked, or saved first): its folder, and
    its branch where git agrees that nothing is lost (`git branch -d`, or -D
    once saved)."""
    repo, path = str(row["repo"]), str(row["path"])
    if has_own_git(path):
        bring_back(repo, path, str(row["branch"]))
        shutil.rmtree(path)
        quiet(["update-ref", "-d", f"{KEEP}/{row['task_id']}"], repo)
    else:
        quiet(["worktree", "unlock", path], repo)
        git(["worktree", "remove", *(["--force"] if trash else []), path], repo)
    quiet(["branch", "-D" if trash else "-d", str(row["branch"])], repo)
    db.execute("workspace_removed", {"id": row["task_id"], "trash_ref": trash})


def gc(
    db: Database,
    *,
    older_than: float = 0,
    force: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Remove the worktrees of done tasks that are merged and clean; list the
    rest with why they are kept. ``force``: save them first (``save``), then
    remove them. ``dry_run``: say what would be done, with each one's size."""
    report: list[dict[str, Any]] = []
    for row in db.all("workspaces_live"):
        item: dict[str, Any] = {
            "id": str(row["task_id"]),
            "title": row["title"],
            "path": row["path"],
            "branch": row["branch"],
            "state": row["state"],
        }
        report.append(item)
        if not os.path.isdir(str(row["path"])):
            item.update(action="kept", why="its folder is gone (nothing to remove)")
            continue
        try:
            _weigh(db, row, item, older_than=older_than, force=force, dry_run=dry_run)
        except WorkspaceError as exc:  # (P23: one worktree stops none of the others)
            item.update(action="kept", why=f"it cannot be read: {exc}")
    return {"worktrees": report, "bytes": sum(i.get("bytes", 0) for i in report)}


def _weigh(
    db: Database,
    row: Mapping[str, Any],
    item: dict[str, Any],
    *,
    older_than: float,
    force: bool,
    dry_run: bool,
) -> None:
    """What gc does with one worktree whose folder is there, in ``item``."""
    path = str(row["path"])
    if unreadable(path) is not None:
        # (its .git gone or garbage: git can say nothing of it, and removes nothing)
        item.update(action="kept", why="it cannot be read as a git worktree")
        return
    item["bytes"] = folder_size(path)
    if row["state"] != "done":
        item.update(action="kept", why=f"its task is {row['state']}")
        return
    if row["age"] < older_than:
        item.update(action="kept", why="done too recently (--older-than)")
        return
    not_ours = _ours(row)
    if not_ours is not None:
        item.update(action="kept", why=not_ours)
        return
    if submodules_inside(path):
        why = (
            "it holds an initialised submodule, whose repository removing it would "
            "delete: remove it by hand"
        )
        item.update(action="kept", why=why)
        return
    bring_back(str(row["repo"]), path, str(row["branch"]))
    how = merged(row)
    left = left_over(path)
    extra = own_refs(path, str(row["branch"]))
    if how is not None and not left and not extra:
        item.update(action="removed", why=how)
        if not dry_run:
            remove(db, row, trash=None)
        return
    why = (
        "uncommitted changes"
        if left
        else f"not merged into {base_tip(str(row['repo']), row.get('base'))[0]}"
        if how is None
        else "refs of its own that removing it would lose: "
        + ", ".join(r.removeprefix("refs/heads/") for r in extra[:5])
    )
    if not force:
        item.update(action="kept", why=why)
        return
    item.update(action="saved and removed", why=why, trash=f"{TRASH}/{row['task_id']}")
    if not dry_run:
        remove(db, row, trash=save(row))


def restore(db: Database, task_id: uuid.UUID) -> dict[str, Any]:
    """Bring back what `afk gc --force` saved of a task, into a worktree,
    byte for byte: its branch at its tip, and its uncommitted and untracked
    files as they were (uncommitted again)."""
    row = row_of(db, task_id)
    if row is None:
        raise BadInput(f"no task with id {task_id}")
    if row["path"] is None or row["trash_ref"] is None:
        raise BadInput(f"task {task_id} has no saved workspace (afk gc --force saves one)")
    if row["removed_at"] is None:
        raise BadInput(f"task {task_id}'s worktree is there already: {row['path']}")
    repo, ref, path = str(row["repo"]), str(row["trash_ref"]), str(row["path"])
    if os.path.exists(path):
        raise BadInput(f"{path} exists: move it away first")
    branch = str(row["branch"])
    if quiet(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo):
        branch = f"{branch}-restored"
    _private_folders(Path(path).parent)
    tip = git(["rev-parse", f"{ref}/branch"], repo).strip()
    make_folder(repo, path, branch, tip, str(row["base_sha"]), task_id)
    work = quiet(["rev-parse", "--verify", "--quiet", f"{ref}/work"], repo)
    if work:  # (its objects are the repository's, which the folder borrows)
        git(["read-tree", "-u", "--reset", work], path)
        git(["reset", "-q"], path)  # uncommitted again, as it was
    kept = archive_path(repo, str(task_id))
    if os.path.isfile(kept):  # ignored files, modes, empty folders: as they were
        unarchive(kept, path)
    db.execute("workspace_restored", {"id": task_id, "path": path, "branch": branch})
    return {"id": str(task_id), "path": path, "branch": branch, "from": ref}


def counts(db: Database, *, measure: bool) -> tuple[dict[str, int], int | None]:
    """The live worktrees per state of their task, and (``measure``) the
    bytes they hold: a walk of the folders, which the gauges do seldom."""
    rows = db.all("workspace_counts")
    per_state = {str(r["state"]): int(r["n"]) for r in rows}
    if not measure:
        return per_state, None
    paths = [p for r in rows for p in r["paths"] if p and os.path.isdir(p)]
    return per_state, sum(folder_size(p) for p in paths)


def used(db: Database) -> bool:
    row = db.one("workspaces_used")
    return bool(row and row["used"])


class Worktrees:
    """A claimed task's worktree, as the queue's methods (one of
    :class:`~watchdog.queue.Queue`'s bases): ``afk claim`` and ``afk loop``
    both take it from :meth:`worktree`."""

    db: Database
    if TYPE_CHECKING:  # (the queue's)

        def release(self, task: TaskRef, reason: str, *, outcome: str = ...) -> Task: ...

    def adopt_workspace(self, task: TaskRef, request: Mapping[str, Any]) -> None:
        """A supervisor's default workspace (``afk loop --repo``) for a task
        that asked for none: written once, never over a task's own."""
        given = json_param(dict(request))
        self.db.one("workspace_adopt", {"id": task_id_of(task), "request": given})

    def worktree(
        self, task: Task, ports: int, default: Mapping[str, Any] | None = None
    ) -> Workspace | None:
        """The claimed task's worktree, made at its first claim and found
        again after (None: the task has no workspace); ``default``: a
        supervisor's request for a task that asked for none. One that cannot
        be made gives the task back, paused, no attempt spent (its run ends
        as cannot_start), and raises :class:`WorkspaceError`."""
        if task.workspace is None and default is not None:
            self.adopt_workspace(task, default)
        try:
            return prepare(self.db, task.id, task.title, ports)
        except WorkspaceError as exc:
            self.release(task, f"paused: {exc}", outcome="cannot_start")
            raise
