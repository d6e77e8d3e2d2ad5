"""What a task's own git folder costs (issue 49 item 4), on a repository of
FILES files and COMMITS commits: making it (a repository borrowing the
person's objects through alternates, its remotes copied, its branch checked
out) beside `git worktree add` of the same commit (what a task got before),
and bringing its branch back into the person's repository after a run that
committed one change, beside the `git update-ref` that is all a worktree
needed. Medians of RUNS, interleaved.

    python -m bench.taskfolder [--files 2000] [--commits 300] [--runs 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.common import emit_report
from watchdog import workspaces

WHO = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.invalid",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.invalid",
}


def run(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **WHO}, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip


def repository(root: Path, files: int, commits: int) -> Path:
    """FILES files in folders of 50, then COMMITS commits changing a few each."""
    repo = root / "repo"
    repo.mkdir()
    run("init", "-q", "-b", "main", cwd=repo)
    run("remote", "add", "origin", "https://example.invalid/acme/app.git", cwd=repo)
    for i in range(files):
        folder = repo / f"pkg{i // 50}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"VALUE = {i}\n" * 20)
    run("add", "-A", cwd=repo)
    run("commit", "-q", "-m", "files", cwd=repo)
    for c in range(commits - 1):
        for k in range(3):
            (repo / f"pkg{(c + k) % (files // 50)}" / f"mod{(c * 7 + k) % files}.py").write_text(
                f"VALUE = {c} {k}\n"
            )
        run("commit", "-q", "--allow-empty", "-am", f"change {c}", cwd=repo)
    return repo


def timed(fn: Callable[..., object], *args: object, **kwargs: object) -> float:
    began = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - began) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", help="write the report (JSON) here too")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="afk-bench-taskfolder-"))
    out: dict[str, list[float]] = {"folder": [], "worktree": [], "back": [], "ref": []}
    try:
        repo = repository(root, args.files, args.commits)
        base = run("rev-parse", "HEAD", cwd=repo)
        for i in range(args.runs + 1):
            task = uuid.uuid4()
            folder, tree = root / f"f{i}", root / f"w{i}"
            branch, other = f"afk/f{i}", f"afk/w{i}"
            spent = {
                "folder": timed(
                    workspaces.make_folder, str(repo), str(folder), branch, base, base, task
                ),
                "worktree": timed(
                    run, "worktree", "add", "-q", "-b", other, str(tree), base, cwd=repo
                ),
            }
            (folder / "pkg0" / "mod0.py").write_text("changed\n")
            run("commit", "-q", "-am", "work", cwd=folder)
            tip = run("rev-parse", "HEAD", cwd=folder)
            spent["back"] = timed(workspaces.bring_back, str(repo), str(folder), branch)
            spent["ref"] = timed(run, "update-ref", f"refs/heads/{other}", tip, cwd=repo)
            assert run("rev-parse", f"refs/heads/{branch}", cwd=repo) == tip
            if i:  # (the first round warms the page cache)
                for key, ms in spent.items():
                    out[key].append(ms)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {k: round(statistics.median(v), 1) for k, v in out.items()}
    report = {
        "files": args.files,
        "commits": args.commits,
        "runs": args.runs,
        "median_ms": medians,
        "make_ratio": round(medians["folder"] / medians["worktree"], 2),
    }
    emit_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
