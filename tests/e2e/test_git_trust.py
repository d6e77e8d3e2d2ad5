"""afk's own git trusts nothing a run wrote (issue 49 item 5): a key planted
in a repository's config, and a file planted in its git folder (a worktree's
``commondir``), each tried against afk's git as it runs after a run, in
`afk review` and in gc. Real git, real files; every planted program only
leaves a mark, and no mark may appear."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from watchdog import git
from watchdog.errors import WorkspaceError

WHO = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
#: a signature of each format git verifies with a program of its config's
SIGNATURES = {
    "ssh": "-----BEGIN SSH SIGNATURE-----\n AAAA\n -----END SSH SIGNATURE-----",
    "x509": "-----BEGIN SIGNED MESSAGE-----\n AAAA\n -----END SIGNED MESSAGE-----",
    "openpgp": "-----BEGIN PGP SIGNATURE-----\n AAAA\n -----END PGP SIGNATURE-----",
}


def run(*args: str, cwd: Path, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **WHO},
        input=stdin,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def signed(repo: Path, kind: str, message: str) -> str:
    """A commit on HEAD carrying a signature of ``kind`` (git asks a program
    to verify it when it shows signatures)."""
    tree, parent = run("rev-parse", "HEAD^{tree}", cwd=repo), run("rev-parse", "HEAD", cwd=repo)
    body = (
        f"tree {tree}\nparent {parent}\nauthor T <t@example.invalid> 1700000000 +0000\n"
        f"committer T <t@example.invalid> 1700000000 +0000\n"
        f"gpgsig {SIGNATURES[kind]}\n\n{message}\n"
    )
    sha = run("hash-object", "-t", "commit", "-w", "--stdin", cwd=repo, stdin=body)
    run("update-ref", "HEAD", sha, cwd=repo)
    return sha


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A repository, a linked worktree of a task on its branch, and a folder
    the planted programs leave their marks in; the branch's first commit."""
    marks, repo = tmp_path / "marks", tmp_path / "repo"
    marks.mkdir()
    repo.mkdir()
    run("init", "-q", "-b", "main", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    run("add", "a.txt", cwd=repo)
    run("commit", "-q", "-m", "first", cwd=repo)
    base = run("rev-parse", "HEAD", cwd=repo)
    work = tmp_path / "worktrees" / "task"
    run("worktree", "add", "-q", "-b", "afk/task", str(work), "HEAD", cwd=repo)
    return repo, work, marks, base


def program(marks: Path, name: str) -> str:
    path = marks.parent / f"{name}.sh"
    path.write_text(f'#!/bin/sh\ntouch "{marks}/{name}"\nexit 1\n')
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("gpg.ssh.program", "ssh"),
        ("gpg.x509.program", "x509"),
        ("gpg.program", "openpgp"),
        ("gpg.openpgp.program", "openpgp"),
    ],
)
def test_a_signature_program_planted_in_the_config_never_runs(planted, key, kind):
    """P5: `log.showSignature` with `gpg.ssh.program` ran the agent's program
    at the loop's `git log` after the run and in `afk review`."""
    repo, work, marks, base = planted
    run("config", "log.showSignature", "true", cwd=repo)
    run("config", key, program(marks, key), cwd=repo)
    if kind == "ssh":
        run("config", "gpg.format", "ssh", cwd=repo)
    sha = signed(work, kind, "fix typo")
    assert [c["sha"] for c in git.commits(str(work), base)] == [sha]
    assert git.head(str(work)) == sha and git.dirty(str(work)) is False
    assert git.diffstat(str(work), base)["files"] == 0
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.fsmonitor", "MARK"),
        ("core.hooksPath", "HOOKS"),
        ("core.pager", "MARK"),
        ("core.sshCommand", "MARK"),
        ("core.gitProxy", "MARK"),
        ("core.alternateRefsCommand", "MARK"),
        ("credential.helper", "!MARK"),
        ("core.askPass", "MARK"),
    ],
)
def test_a_program_planted_in_the_config_never_runs(planted, key, value):
    repo, work, marks, base = planted
    hooks = marks.parent / "hooks"
    hooks.mkdir()
    for hook in ("reference-transaction", "post-checkout", "post-index-change"):
        (hooks / hook).write_text(f'#!/bin/sh\ntouch "{marks}/{hook}"\n')
        (hooks / hook).chmod(0o755)
    mark = program(marks, key)
    run("config", key, str(hooks) if value == "HOOKS" else value.replace("MARK", mark), cwd=repo)
    (work / "b.txt").write_text("b\n")
    assert git.dirty(str(work)) is True
    git.git(["update-ref", "refs/afk/probe", "HEAD"], str(work))
    git.git(["update-ref", "refs/afk/probe", "HEAD"], str(repo))
    assert git.commits(str(work), base) == []
    with pytest.raises(Exception):  # noqa: B017 (git's own refusal: ext:: is off)
        git.git(["ls-remote", f"ext::{mark}"], str(work))
    assert sorted(p.name for p in marks.iterdir()) == []


def test_a_commondir_planted_in_the_worktrees_git_folder_is_not_followed(planted):
    """P5: a worktree's `commondir` (in the repository's git folder, which a
    run could write) sent afk's git into a repository of the run's making,
    with a config of its own and a branch of the same name."""
    repo, work, marks, base = planted
    real_head = git.head(str(work))
    evil = marks.parent / "evil"
    evil.mkdir()
    run("init", "-q", "--bare", str(evil), cwd=marks.parent)
    (evil / "objects" / "info" / "alternates").write_text(str(repo / ".git" / "objects") + "\n")
    run("config", "log.showSignature", "true", cwd=evil)
    run("config", "gpg.ssh.program", program(marks, "evil-ssh"), cwd=evil)
    run("config", "gpg.format", "ssh", cwd=evil)
    run("config", "core.fsmonitor", program(marks, "evil-fsmonitor"), cwd=evil)
    fake = run(
        "commit-tree",
        "-m",
        "fix typo",
        "-p",
        base,
        run("rev-parse", f"{base}^{{tree}}", cwd=repo),
        cwd=repo,
    )
    run("--git-dir", str(evil), "update-ref", "refs/heads/afk/task", fake, cwd=marks.parent)
    admin = Path(run("rev-parse", "--absolute-git-dir", cwd=work))
    assert git.head(str(work)) == real_head
    (admin / "commondir").write_text(str(evil) + "\n")
    # (git itself follows it: its refs are the planted repository's)
    assert run("rev-parse", "HEAD", cwd=work) == fake
    with pytest.raises(WorkspaceError, match="commondir"):
        git.git(["rev-parse", "HEAD"], str(work))
    assert git.head(str(work)) is None and git.commits(str(work), base) == []
    assert git.common_dir(str(work)) is None
    git.dirty(str(work))
    assert sorted(p.name for p in marks.iterdir()) == []
    # its own, as git writes it, is no plant
    (admin / "commondir").write_text("../..\n")
    assert git.head(str(work)) == real_head
