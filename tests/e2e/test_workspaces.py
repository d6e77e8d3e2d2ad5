"""Each task in its own git worktree: real git (Debian's), temporary
repositories with a bare origin, a stub `gh` on PATH, and `afk loop` running
a stand-in agent that logs where it runs and makes commits."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import Afk, poll, require_tool
from helpers.service import Service

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}
FAST = {"AFK_BACKOFF_BASE_SECONDS": "1", "AFK_BACKOFF_CAP_SECONDS": "1"}

#: the stand-in agent: logs its working folder and workspace variables, then
#: does what its plan (AGENT_PLAN, JSON: title -> a list of steps, one per
#: run) says: "commit" a file named after the task, "fail", "dirty" (write
#: and leave it), "nothing", "sleep" (until killed), "fix" (write check.ok),
#: "plant" (commit a .claude/settings.json with a hook, then fail)
AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    title = sys.argv[-1].split("\\n", 1)[0]
    log = os.environ["AGENT_LOG"]
    with open(log, "a") as out:
        out.write(json.dumps({"title": title, "cwd": os.getcwd(), "pid": os.getpid(),
                              "prompt": sys.argv[-1],
                              **{k: v for k, v in os.environ.items()
                                 if k in ("AFK_WORKTREE", "AFK_BRANCH", "AFK_BASE_SHA",
                                          "AFK_PORT", "AFK_TASK_ID")}}) + "\\n")
    runs = sum(1 for line in open(log) if json.loads(line)["title"] == title)
    plan = json.loads(os.environ.get("AGENT_PLAN", "{}")).get(title, ["commit"])
    step = plan[min(runs, len(plan)) - 1]
    name = title.replace(" ", "-") + ".txt"
    if step == "sleep":
        time.sleep(300)
    if step == "plant":  # its branch changes the agent's own settings, then fails
        os.makedirs(".claude", exist_ok=True)
        with open(".claude/settings.json", "w") as f:
            f.write('{"hooks": {"SessionStart": [{"hooks": [{"type": "command", '
                    '"command": "touch planted-hook-ran"}]}]}}')
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", "settings"], check=True)
        print("FAILED: it does not work yet", flush=True)
        sys.exit(1)
    if step in ("plantindex", "plantindexdone"):  # through git's index: nothing on disk
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=(
            '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", '
            '"command": "touch planted-hook-ran"}]}]}}'), capture_output=True, text=True,
            check=True).stdout.strip()
        subprocess.run(["git", "update-index", "--add", "--cacheinfo",
                        f"100644,{blob},.claude/settings.json"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", "harmless docs fix"], check=True)
        subprocess.run(["git", "update-index", "--force-remove", ".claude/settings.json"],
                       check=True)
        if step == "plantindex":
            sys.exit(1)
    if step == "rmtree":  # it deletes its own worktree
        import shutil
        shutil.rmtree(os.getcwd())
    if step == "empty":  # its worktree replaced by an empty folder (R9)
        import shutil
        here = os.getcwd()
        shutil.rmtree(here)
        os.mkdir(here)
    if step == "garbagegit":  # it commits, then writes garbage over its .git (R6)
        with open(name, "a") as f:
            f.write("work\\n")
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", "work"], check=True)
        import shutil
        shutil.rmtree(".git") if os.path.isdir(".git") else os.remove(".git")
        with open(".git", "w") as f:
            f.write("not a git link at all\\n")
    if step == "rmgit":  # it leaves work, and breaks its folder's git
        with open("precious.txt", "w") as f:
            f.write("precious uncommitted\\n")
        import shutil
        shutil.rmtree(".git") if os.path.isdir(".git") else os.remove(".git")
    if step == "fail":
        print("FAILED: it does not work yet", flush=True)
        sys.exit(1)
    if step == "commitfail":  # it commits its work, then fails
        with open(name, "a") as f:
            f.write(f"run {runs} of {title}\\n")
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"{title}: run {runs}"], check=True)
        sys.exit(1)
    if step in ("commit", "dirty", "fix"):
        with open(name if step != "fix" else "check.ok", "a") as f:
            f.write(f"run {runs} of {title}\\n")
    if step in ("commit", "fix"):
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"{title}: run {runs}"], check=True)
    """
)


def sh(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=True
    )
    return proc.stdout.strip()


class Repo:
    """A repository with a bare origin, one commit on main, and the afk
    loops and agents that work on it."""

    def __init__(self, afk: Afk, tmp: Path) -> None:
        require_tool("git")
        self.afk, self.tmp = afk, tmp
        self.origin = tmp / "origin.git"
        self.path = tmp / "repo"
        sh("git", "init", "-q", "--bare", "-b", "main", str(self.origin), cwd=tmp)
        sh("git", "clone", "-q", str(self.origin), str(self.path), cwd=tmp)
        (self.path / "README.md").write_text("# app\n")
        sh("git", "add", "-A", cwd=self.path)
        sh("git", "commit", "-q", "-m", "first", cwd=self.path)
        sh("git", "push", "-q", "origin", "HEAD:main", cwd=self.path)
        self.agent = tmp / "agent.py"
        self.agent.write_text(AGENT)
        self.log = tmp / "agent.log"
        self.log.write_text("")
        self.env = {**afk.env, **GIT_ENV, **FAST, "AGENT_LOG": str(self.log)}

    def git(self, *args: str, cwd: Path | None = None) -> str:
        return sh("git", *args, cwd=cwd or self.path)

    def enqueue(self, *titles: str, agent: str = "w", **extra: Any) -> list[str]:
        lines = "".join(
            json.dumps({"title": t, "repo": str(self.path), **extra}) + "\n" for t in titles
        )
        out = self.afk("enqueue", "--agent", agent, "--file", "-", input=lines, env=self.env)
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout)["enqueued"])

    def loop(self, *args: str, agent: str = "w", plan: dict[str, list[str]] | None = None):
        env = {**self.env, "AGENT_PLAN": json.dumps(plan or {})}
        return subprocess.Popen(
            [*Afk.command("loop", "--agent", agent, *args, "--"), sys.executable, str(self.agent)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def runs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def show(self, task_id: str) -> dict[str, Any]:
        return dict(self.afk.json("show", task_id, env=self.env))


@pytest.fixture
def repo(afk, tmp_path, monkeypatch):
    # the worktrees live under AFK_HOME: the test's own
    afk.env["AFK_HOME"] = str(tmp_path / "afk-home")
    return Repo(afk, tmp_path)


def finish(proc: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def test_two_loops_on_one_repository_work_in_four_worktrees_apart(repo):
    ids = repo.enqueue("task a", "task b", "task c", "task d")
    loops = [repo.loop(), repo.loop()]
    for proc in loops:
        code, err = finish(proc)
        assert code == 0, err
    shown = [repo.show(i) for i in ids]
    assert [t["state"] for t in shown] == ["done"] * 4
    spaces = [t["workspace"] for t in shown]
    paths = {w["path"] for w in spaces}
    branches = {w["branch"] for w in spaces}
    assert len(paths) == 4 and len(branches) == 4
    for task_id, task, ws in zip(ids, shown, spaces, strict=True):
        assert ws["branch"] == f"afk/{task_id[:8]}-{task['title'].replace(' ', '-')}"
        assert not ws["path"].startswith(str(repo.path))  # outside the main checkout
        # each task's commit on its own branch only, from the base
        assert [c["subject"] for c in ws["commits"]] == [f"{task['title']}: run 1"]
        assert ws["diffstat"] == {"files": 1, "insertions": 1, "deletions": 0}
        assert ws["dirty"] is False and ws["base_sha"] == repo.git("rev-parse", "main")
        (run,) = task["runs"]
        assert run["before_sha"] == ws["base_sha"] and run["after_sha"] == ws["head_sha"]
        assert run["changes"] == 1
    # the agents ran in their worktrees, with their variables
    for run in repo.runs():
        task = next(t for t in shown if t["id"] == run["AFK_TASK_ID"])
        assert run["cwd"] == run["AFK_WORKTREE"] == task["workspace"]["path"]
        assert run["AFK_BRANCH"] == task["workspace"]["branch"]
    # no two port blocks overlap
    blocks = sorted((int(w["port"]), int(w["port"]) + 10) for w in spaces)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(blocks)), blocks
    # the main checkout is clean and still on main
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_a_retry_and_a_reclaim_work_in_the_same_worktree(repo, sql):
    (fails,) = repo.enqueue("fails once")
    code, err = finish(repo.loop(plan={"fails once": ["fail", "commit"]}))
    assert code == 0, err
    runs = [r for r in repo.runs() if r["title"] == "fails once"]
    assert len(runs) == 2 and runs[0]["cwd"] == runs[1]["cwd"]
    assert runs[0]["AFK_BRANCH"] == runs[1]["AFK_BRANCH"]
    assert repo.show(fails)["state"] == "done"
    # a SIGKILLed loop: the task, reclaimed, resumes in the same worktree and branch
    (killed,) = repo.enqueue("killed")
    proc = repo.loop("--lease", "2", plan={"killed": ["sleep", "commit"]})
    poll(lambda: [r for r in repo.runs() if r["title"] == "killed"], timeout=60)
    # (its folder is a repository of its own, no worktree of the person's: no
    # `git worktree prune` of theirs can take it while it runs)
    (started,) = [r for r in repo.runs() if r["title"] == "killed"]
    assert (Path(started["cwd"]) / ".git").is_dir()
    assert started["cwd"] not in repo.git("worktree", "list", "--porcelain")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    sql.expire(killed)
    assert repo.afk("reclaim", env=repo.env).returncode == 0
    code, err = finish(repo.loop(plan={"killed": ["sleep", "commit"]}))
    assert code == 0, err
    runs = [r for r in repo.runs() if r["title"] == "killed"]
    assert len(runs) == 2 and runs[0]["cwd"] == runs[1]["cwd"], runs
    task = repo.show(killed)
    assert task["state"] == "done" and len(task["workspace"]["commits"]) == 1


def test_the_check_must_pass_before_done(repo):
    check = "test -f check.ok && echo all good || { echo 'check.ok is missing'; exit 1; }"
    (task_id,) = repo.enqueue("checked", verify=check)
    plan = {"checked": ["commit", "fix"]}
    code, err = finish(repo.loop(plan=plan))
    assert code == 0, err
    task = repo.show(task_id)
    assert task["state"] == "done"
    first, second = task["runs"]
    assert (first["outcome"], first["attempt_spent"], first["check_status"]) == (
        "task_failure",
        True,
        1,
    )
    assert second["check_status"] == 0 and "all good" in second["check_tail"]
    failed = [h for h in task["history"] if h["reason"] == "failed with error"]
    assert failed and failed[0]["error"].startswith("the check failed:")
    # the second run's brief said what the check printed
    first_run, second_run = [r for r in repo.runs() if r["title"] == "checked"]
    assert "The check failed" not in first_run["prompt"]
    assert (
        "The check failed" in second_run["prompt"] and "check.ok is missing" in second_run["prompt"]
    )


def test_a_check_longer_than_the_lease_keeps_the_task(repo, tmp_path):
    """Issue 41 item 3 (P11): the check ran after the lease stopped being
    renewed, so a check longer than the lease lost the task to a reclaim.
    The run's heartbeat covers its check."""
    started, release = tmp_path / "checking", tmp_path / "release"
    check = f"touch {started}; while [ ! -e {release} ]; do sleep 0.1; done; echo all good"
    (task_id,) = repo.enqueue("long check", verify=check)
    proc = repo.loop("--lease", "3")
    try:
        poll(started.exists, timeout=120)
        checking = os.stat(started).st_mtime
        # three leases into the check: a lease not renewed since the run's end
        # has run out by now, and a reclaim takes the task
        poll(lambda: os.path.getmtime(started) + 9 < time.time(), timeout=30)
        assert os.stat(started).st_mtime == checking
        counts = repo.afk.json("reclaim", env=repo.env)
        assert counts["paused"] + counts["failed"] == 0, counts
    finally:
        release.touch()
    code, err = finish(proc)
    assert code == 0, err
    task = repo.show(task_id)
    assert task["state"] == "done", task
    (run,) = task["runs"]
    assert run["check_status"] == 0 and "all good" in run["check_tail"]
    assert not [h for h in task["history"] if "lease" in h["reason"]], task["history"]


def test_a_check_past_its_timeout_is_stopped_with_all_it_started(repo):
    """P18: the timeout killed only the check's shell; what the shell had
    started (a test server, a build) went on. The whole group is stopped."""
    check = "sleep 300 & echo $! > check.pid; echo started it; wait"
    (task_id,) = repo.enqueue("hung check", verify=check, max_attempts=1)
    repo.env["AFK_VERIFY_TIMEOUT_SECONDS"] = "2"
    code, err = finish(repo.loop())
    assert code == 0, err
    task = repo.show(task_id)
    (run,) = task["runs"]
    assert (task["state"], run["check_status"]) == ("failed", 124), task
    assert "stopped after 2s" in run["check_tail"] and "started it" in run["check_tail"]
    pid = int((Path(task["workspace"]["path"]) / "check.pid").read_text())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    poll(gone, timeout=30)


#: the loop under a parent that reports its peak memory (kB), and its children's
MEASURED = """
import resource, subprocess, sys
status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(status, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_check_that_prints_without_end_is_held_by_its_tail(repo):
    """P18: the loop held all a check printed (a test run's 200 MB of log)
    before keeping its tail. It holds a bounded tail as it reads."""
    check = "head -c 200000000 /dev/zero | tr '\\0' x; echo; echo the telling line; exit 1"
    (task_id,) = repo.enqueue("loud check", verify=check, max_attempts=1)
    loop = [*Afk.command("loop", "--agent", "w", "--"), sys.executable, str(repo.agent)]
    proc = subprocess.run(
        [sys.executable, "-c", MEASURED, *loop],
        env={**repo.env, "AGENT_PLAN": "{}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    status, peak_kb = (int(w) for w in proc.stdout.split())
    assert status == 0
    (run,) = repo.show(task_id)["runs"]
    assert run["check_status"] == 1 and run["check_tail"].rstrip().endswith("the telling line")
    assert len(run["check_tail"]) <= 4000
    # the loop's own size, not the 200 MB it was shown
    assert peak_kb < 150_000, peak_kb


def test_a_run_that_changes_nothing_is_recorded_and_may_be_required_to(repo):
    lazy, strict = repo.enqueue("lazy"), repo.enqueue("strict", require_changes=True)
    plan = {"lazy": ["nothing"], "strict": ["nothing", "commit"]}
    code, err = finish(repo.loop(plan=plan))
    assert code == 0, err
    task = repo.show(lazy[0])
    assert task["state"] == "done" and task["runs"][0]["changes"] == 0
    task = repo.show(strict[0])
    assert [r["outcome"] for r in task["runs"]] == ["task_failure", "done"]
    assert task["last_error"] is None or "no changes" in json.dumps(task["history"])


def test_show_reads_the_pull_request_through_gh(repo, tmp_path):
    (task_id,) = repo.enqueue("with a pr")
    code, err = finish(repo.loop())
    assert code == 0, err
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    answer = {"url": "https://example.invalid/pr/7", "number": 7, "state": "OPEN", "isDraft": True}
    gh.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
    gh.chmod(0o755)
    env = {**repo.env, "PATH": f"{bin_dir}{os.pathsep}{repo.env['PATH']}"}
    task = repo.afk.json("show", task_id, env=env)
    assert task["workspace"]["pr"] == answer
    assert repo.show(task_id)["workspace"]["pr"] is None  # no gh: null, no failure


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--repo", "/nonexistent/repo"], "no such folder"),
        (["--repo", "{tmp}"], "is not a git repository"),
        (["--repo", "{repo}", "--base", "no-such-ref"], "does not resolve"),
        (["--repo", "{repo}", "--branch", "bad..name"], "is not a valid branch name"),
        # P3: names git expands to another branch's (gc would delete that one)
        (["--repo", "{repo}", "--branch", "@{{-1}}"], "is not a valid branch name"),
        # P22: what could never be made stopped the night at its claim
        (["--repo", "{repo}", "--branch", "b" * 300], "longer than 200 bytes"),
        # P30: said as what they are
        (["--repo", "{repo}/README.md"], "is a file, not a folder"),
        (["--repo", "{bare}"], "is a bare repository"),
        (["--repo", "{empty}"], "has no commit to start from"),
        # P4: the user's own branch (afk would commit onto it, and gc remove it)
        (["--repo", "{repo}", "--branch", "main"], "exists in"),
        # R5: branches git can never make, and one a worktree has checked out
        (["--repo", "{repo}", "--branch", "main/sub"], "branch 'main' exists"),
        (["--repo", "{repo}", "--branch", "feature"], "branch 'feature/x' exists under it"),
        (["--repo", "{repo}", "--branch", "unborn"], "a worktree of"),
        (["--repo", "{repo}", "--verify", " "], "--verify is empty"),
        (["--branch", "x"], "go with --repo"),
    ],
)
def test_bad_workspace_input_is_one_line_exit_2_and_creates_nothing(repo, sql, args, said):
    before = sql.fingerprint()
    empty = repo.tmp / "empty"
    empty.mkdir(exist_ok=True)
    sh("git", "init", "-q", str(empty), cwd=repo.tmp)
    if "feature" in args and not repo.git("branch", "--list", "feature/x"):
        repo.git("branch", "feature/x")
    if "unborn" in args and not (repo.tmp / "linked").exists():  # on a branch with no commit
        repo.git("worktree", "add", "-q", "--detach", str(repo.tmp / "linked"))
        sh("git", "switch", "-q", "--orphan", "unborn", cwd=repo.tmp / "linked")
    args = [a.format(repo=repo.path, tmp=repo.tmp, empty=empty, bare=repo.origin) for a in args]
    proc = repo.afk("enqueue", "--agent", "w", "--title", "t", *args, env=repo.env)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


def test_a_branch_name_git_expands_is_refused(repo, sql):
    """P3: `@{-1}` names the branch checked out before: git expands it, afk
    kept the literal, and gc later deleted whatever it named by then."""
    repo.git("checkout", "-q", "-b", "tmpb")
    repo.git("checkout", "-q", "main")
    assert repo.git("check-ref-format", "--branch", "@{-1}") == "tmpb"
    before = sql.fingerprint()
    proc = repo.afk("enqueue", "--agent", "w", "--title", "t", "--repo", str(repo.path),
                    "--branch", "@{-1}", env=repo.env)  # fmt: skip
    assert proc.returncode == 2 and "is not a valid branch name" in proc.stderr, proc.stderr
    assert sql.fingerprint() == before


def test_a_branch_another_task_uses_is_refused(repo, sql):
    repo.enqueue("one", branch="feature/x")
    before = sql.fingerprint()
    proc = repo.afk(
        "enqueue", "--agent", "w", "--title", "two", "--repo", str(repo.path),
        "--branch", "feature/x", env=repo.env,
    )  # fmt: skip
    assert proc.returncode == 2 and "another task's workspace" in proc.stderr, proc.stderr
    assert sql.fingerprint() == before


def test_a_repository_gone_under_a_task_stops_the_loop_and_loses_nothing(repo):
    (task_id,) = repo.enqueue("orphaned")
    gone = repo.tmp / "gone"
    repo.path.rename(gone)
    code, err = finish(repo.loop())
    assert code == 5, err
    assert str(repo.path) in err.strip().splitlines()[-1]
    task = repo.show(task_id)
    assert (task["state"], task["attempts"]) == ("paused", 0)


def test_review_lists_the_work_and_sees_a_conflict_with_the_base(repo, dsn):
    (task_id,) = repo.enqueue("edit readme")
    plan = {"edit readme": ["commit"]}
    code, err = finish(repo.loop(plan=plan))
    assert code == 0, err
    # the agent's commit added edit-readme.txt; main gains a conflicting one
    (repo.path / "edit-readme.txt").write_text("main's own line\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "main moves on")
    (item,) = repo.afk.json("review", "--json", env=repo.env)
    assert item["id"] == task_id and item["commits"] == 1
    assert item["diffstat"] == {"files": 1, "insertions": 1, "deletions": 0}
    assert item["behind_by"] == 1 and item["base"] == "main"
    assert item["conflicts"] == ["edit-readme.txt"]
    assert repo.git("status", "--porcelain") == ""  # no checkout was touched
    text = repo.afk("review", env=repo.env).stdout
    assert "conflicts with main: edit-readme.txt" in text and "1 commit(s)" in text
    # its page shows its workspace and its commit
    service = Service(dsn)
    try:
        poll(lambda: service.health() == 200, timeout=60)
        page = service.get(f"/tasks/{task_id}")
        assert page is not None and page.status_code == 200
        assert item["branch"] in page.text and "edit readme: run 1" in page.text
        # and the gauges count it, and its bytes
        poll(lambda: service.value("afk_workspaces", state="done") == 1, timeout=60)
        assert (service.value("afk_workspace_bytes") or 0) > 0
    finally:
        service.cleanup()
    # the morning's digest has it, in every format
    for fmt in ("text", "html", "slack", "webhook"):
        digest = repo.afk("digest", "--dry-run", "--format", fmt, env=repo.env).stdout
        assert "edit-readme.txt" in digest and item["branch"] in digest, fmt


def test_afks_own_git_runs_nothing_the_repository_plants(repo, tmp_path):
    """Issue 40 item 5: a branch's .gitattributes naming filter, diff and
    merge drivers, and a .git/config (as an agent on the same machine may
    write it) defining them, with core.fsmonitor and hooks: afk's own git
    (the worktree, its lineage, the check's set-up, review, gc, restore)
    runs none of them."""
    pwned = tmp_path / "pwned"
    pwned.mkdir()

    def plant(what: str) -> str:
        return f"touch {pwned}/{what}; cat"

    (repo.path / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    repo.git("add", ".gitattributes")
    repo.git("commit", "-q", "-m", "attributes")
    for key, value in {
        "filter.evil.clean": plant("clean"),
        "filter.evil.smudge": plant("smudge"),
        "filter.evil.process": plant("process"),
        "diff.evil.textconv": plant("textconv"),
        "diff.evil.command": plant("diffcommand"),
        "merge.evil.driver": plant("merge"),
        "core.fsmonitor": plant("fsmonitor"),
        "core.pager": plant("pager"),
    }.items():
        repo.git("config", key, value)
    hooks = repo.path / ".git" / "hooks"
    for hook in ("post-checkout", "reference-transaction", "pre-commit", "post-index-change"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {pwned}/hook-{hook}\n")
        (hooks / hook).chmod(0o755)
    merged, dirty = repo.enqueue("merged one", "dirty one")
    # (the stand-in runs no git of its own: what would run is afk's alone)
    code, err = finish(repo.loop(plan={"merged one": ["nothing"], "dirty one": ["dirty"]}))
    assert code == 0, err
    assert repo.show(merged)["state"] == "done"
    assert repo.afk("review", env=repo.env).returncode == 0
    assert repo.afk("review", "--json", env=repo.env).returncode == 0
    forced = repo.afk.json("gc", "--force", "--json", env=repo.env)
    assert forced["worktrees"], forced
    assert repo.afk("restore", dirty, env=repo.env).returncode == 0
    assert sorted(p.name for p in pwned.iterdir()) == []


def test_gc_keeps_a_worktree_that_holds_an_initialised_submodule(repo, tmp_path):
    """P2: a submodule's repository lives in the worktree's git folder, which
    `git worktree remove` deletes with the agent's commits in it. gc --force
    keeps such a worktree and says why."""
    sub = tmp_path / "sub"
    sub.mkdir()
    sh("git", "init", "-q", "-b", "main", str(sub), cwd=tmp_path)
    sh("git", "commit", "-q", "--allow-empty", "-m", "sub first", cwd=sub)
    sh("git", "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(sub), "sub",
       cwd=repo.path)  # fmt: skip
    sh("git", "commit", "-q", "-m", "add sub", cwd=repo.path)
    (task_id,) = repo.enqueue("with a submodule")
    code, err = finish(repo.loop(plan={"with a submodule": ["dirty"]}))
    assert code == 0, err
    work = Path(repo.show(task_id)["workspace"]["path"])
    sh("git", "-c", "protocol.file.allow=always", "submodule", "-q", "update", "--init", cwd=work)
    (work / "sub" / "precious.txt").write_text("the agent's work\n")
    sh("git", "add", "precious.txt", cwd=work / "sub")
    sh("git", "commit", "-q", "-m", "work inside the submodule", cwd=work / "sub")
    report = repo.afk.json("gc", "--force", "--json", env=repo.env)
    (item,) = [w for w in report["worktrees"] if w["id"] == task_id]
    assert item["action"] == "kept" and "submodule" in item["why"], item
    assert (work / "sub" / "precious.txt").exists()


def test_a_worktree_git_cannot_read_is_kept_and_gc_goes_on(repo):
    """P23: a worktree whose .git link the agent removed was reviewed as
    "no changes", listed as merged and clean, and `afk gc` then stopped at
    git's refusal, for every other worktree too."""
    broken, other = repo.enqueue("broken link", "other one")
    code, err = finish(repo.loop(plan={"broken link": ["rmgit"]}))
    assert code == 0, err
    (item,) = [i for i in repo.afk.json("review", "--json", env=repo.env) if i["id"] == broken]
    assert item["error"] and "cannot be read by git" in item["error"], item
    report = repo.afk.json("gc", "--json", env=repo.env)
    by_id = {w["id"]: w for w in report["worktrees"]}
    assert by_id[broken]["action"] == "kept" and "cannot be read" in by_id[broken]["why"]
    assert other in by_id  # gc went on
    path = Path(repo.show(broken)["workspace"]["path"])
    assert (path / "precious.txt").read_text() == "precious uncommitted\n"


def test_prune_keeps_a_done_task_whose_worktree_is_still_there(repo, sql):
    """P20: prune deleted done tasks after the retention with their
    workspace rows; their worktrees stayed on disk, unseen by gc and review."""
    (kept,) = repo.enqueue("unreviewed")
    code, err = finish(repo.loop())
    assert code == 0, err
    assert repo.show(kept)["state"] == "done", (repo.show(kept), err)
    (plain,) = repo.afk.json("enqueue", "--agent", "p", "--title", "no worktree", env=repo.env)[
        "enqueued"
    ]
    task = repo.afk.json("claim", "--agent", "p", env=repo.env)
    repo.afk.json("done", plain, "--token", str(task["token"]), env=repo.env)
    env = {**repo.env, "AFK_RETENTION": "1s"}

    def pruned() -> bool:
        repo.afk("watchdog", "tick", "prune", env=env)
        return not sql("SELECT 1 FROM afk_task WHERE id = %s", plain)

    poll(pruned, timeout=60, interval=0.5)
    assert repo.show(kept)["state"] == "done"  # its worktree is there: kept
    ids = [w["id"] for w in repo.afk.json("gc", "--dry-run", "--json", env=repo.env)["worktrees"]]
    assert kept in ids


@pytest.mark.parametrize(("step", "gone"), [("rmtree", "deleted"), ("empty", "emptied")])
def test_a_run_whose_worktree_is_deleted_under_it_fails_naming_the_path(repo, step, gone):
    """Sweep round five, also measured: a worktree deleted during the run
    (by the agent, or a person) left a run that ended 0 done; R9: so did one
    replaced by an empty folder. It fails, with one line naming the path."""
    (task_id,) = repo.enqueue("deleted during", max_attempts=1)
    code, err = finish(repo.loop(plan={"deleted during": [step]}))
    assert code == 0, err
    task = repo.show(task_id)
    path = task["workspace"]["path"]
    assert task["state"] == "failed", task
    assert task["last_error"] == f"the task's worktree {path} was {gone} during the run"


def test_a_worktree_whose_git_is_garbage_is_reviewed_as_unreadable(repo):
    """R6: a .git of garbage was reviewed as "0 commit(s), 0 file(s) (no
    changes)". It is unreadable, in review's JSON and its text."""
    (task_id,) = repo.enqueue("garbage git")
    code, err = finish(repo.loop(plan={"garbage git": ["garbagegit"]}))
    assert code == 0, err
    (item,) = [i for i in repo.afk.json("review", "--json", env=repo.env) if i["id"] == task_id]
    assert item["error"] and "cannot be read by git" in item["error"], item
    text = repo.afk("review", env=repo.env).stdout
    assert "cannot be read by git" in text and "(no changes)" not in text, text


def test_a_worktree_deleted_by_hand_is_made_again_from_its_branch(repo):
    """P22: a worktree deleted by hand stayed registered with git, and the
    next run could not start ("use 'add -f' to override, or 'prune'"). It
    is made again from its branch, which holds its committed work."""
    (task_id,) = repo.enqueue("deleted under it", max_attempts=2)
    code, err = finish(repo.loop("--max-tasks", "1", plan={"deleted under it": ["commitfail"]}))
    assert code == 0, err
    path = Path(repo.show(task_id)["workspace"]["path"])
    shutil.rmtree(path)
    code, err = finish(repo.loop(plan={"deleted under it": ["commitfail", "commit"]}))
    assert code == 0, err
    task = repo.show(task_id)
    assert task["state"] == "done", (task, err)
    assert len(task["workspace"]["commits"]) == 2  # the first run's work was there


def test_a_dependent_starts_from_the_work_it_depends_on_unless_its_base_says(repo):
    """Issue 41 item 6: a task --after another with a worktree of the same
    repository started from the base, without the work it depends on. It
    starts from that task's branch tip (its base, shown as stacked in the
    review), unless --base says otherwise."""
    (first,) = repo.enqueue("first step")
    (stacked,) = repo.enqueue("second step", after=[first])
    (based,) = repo.enqueue("from main", after=[first], base="main")
    code, err = finish(repo.loop())
    assert code == 0, err
    one, two, three = (repo.show(t)["workspace"] for t in (first, stacked, based))
    assert two["base_sha"] == one["head_sha"] != one["base_sha"], (one, two)
    assert (Path(two["path"]) / "first-step.txt").exists()  # its work is there
    assert (
        three["base_sha"] == one["base_sha"]
        and not (Path(three["path"]) / "first-step.txt").exists()
    )
    assert two.get("stacked_on") == one["branch"] and three.get("stacked_on") is None
    items = {i["id"]: i for i in repo.afk.json("review", "--json", env=repo.env)}
    assert items[stacked]["stacked_on"] == one["branch"]
    text = repo.afk("review", env=repo.env).stdout
    assert f"stacked on {one['branch']}" in text


def test_a_branch_that_changes_the_agents_own_config_is_held_until_trusted(repo):
    """Issue 40 item 4: a run whose branch changed .claude/settings.json (a
    hook would run on the host at the next run) does not start: the task is
    held for a person with the file named, no attempt spent, and `afk trust`
    lets that exact content run; a later change (the repository's
    .git/config) is held again."""
    (task_id,) = repo.enqueue("planted", max_attempts=3)
    code, err = finish(repo.loop(plan={"planted": ["plant", "commit", "commit"]}))
    assert code == 0, err
    task = repo.show(task_id)
    assert (task["state"], task["attempts"]) == ("paused", 1), task
    held = [h["reason"] for h in task["history"] if h["reason"].startswith("needs input")]
    assert held and held[-1].startswith("needs input: the branch changed .claude/settings.json")
    (question,) = repo.afk.json("questions", env=repo.env)
    assert question["id"] == task_id and f"afk trust {task_id}" in question["question"]
    assert len([r for r in repo.runs() if r["title"] == "planted"]) == 1  # never ran again
    trusted = repo.afk.json("trust", task_id, env=repo.env)
    assert trusted["changed"] == [".claude/settings.json"] and trusted["state"] == "todo"
    # a later change, to the git config of the task's folder, is held again
    # (the person's own repository is no run's to write: issue 49 item 4)
    folder = Path(repo.show(task_id)["workspace"]["path"])
    repo.git("config", "core.fsmonitor", "touch fsmonitor-ran", cwd=folder)
    code, err = finish(repo.loop(plan={"planted": ["plant", "commit", "commit"]}))
    assert code == 0, err
    (question,) = repo.afk.json("questions", env=repo.env)
    assert "the branch changed .git/config" in question["question"]
    repo.afk.json("trust", task_id, env=repo.env)
    code, err = finish(repo.loop(plan={"planted": ["plant", "commit", "commit"]}))
    assert code == 0, err
    assert repo.show(task_id)["state"] == "done"
    assert len([r for r in repo.runs() if r["title"] == "planted"]) == 2
    refused = repo.afk("trust", "00000000-0000-0000-0000-000000000000", env=repo.env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr


def test_a_config_committed_through_gits_index_is_held_too(repo):
    """P13 (issue 49 item 8): the pin read the disk only. A .claude/
    settings.json committed with git plumbing (never on disk, not in the
    index after) is held at the next run as one written on disk is; and a
    task stacked on a branch that planted one is held at its first run (its
    baseline is the repository's base, not the branch it starts from)."""
    (task_id,) = repo.enqueue("plumbed", max_attempts=3)
    code, err = finish(repo.loop(plan={"plumbed": ["plantindex", "commit"]}))
    assert code == 0, err
    task = repo.show(task_id)
    assert task["state"] == "paused", task
    held = [h["reason"] for h in task["history"] if h["reason"].startswith("needs input")]
    assert held and ".claude/settings.json" in held[-1], held
    assert len([r for r in repo.runs() if r["title"] == "plumbed"]) == 1
    (first,) = repo.enqueue("planter")
    (after,) = repo.enqueue("dependent", after=[first])
    code, err = finish(repo.loop(plan={"planter": ["plantindexdone"], "dependent": ["commit"]}))
    assert code == 0, err
    assert repo.show(first)["state"] == "done"
    dependent = repo.show(after)
    assert dependent["workspace"]["stacked_on"], dependent["workspace"]
    assert dependent["state"] == "paused", dependent
    assert not [r for r in repo.runs() if r["title"] == "dependent"]


def test_gc_removes_merged_clean_worktrees_keeps_the_rest_and_restores_byte_for_byte(repo):
    merged, dirty = repo.enqueue("merged one", "dirty one")
    code, err = finish(repo.loop(plan={"dirty one": ["dirty"]}))
    assert code == 0, err
    m, d = repo.show(merged)["workspace"], repo.show(dirty)["workspace"]
    repo.git("merge", "-q", "--ff-only", m["branch"])  # the person merged it
    # a folder afk did not make, under afk's worktrees folder: never removed
    foreign = Path(d["path"]).parent / "not-afks"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine\n")
    dry = repo.afk.json("gc", "--dry-run", "--json", env=repo.env)
    by_id = {w["id"]: w for w in dry["worktrees"]}
    assert by_id[merged]["action"] == "removed" and by_id[dirty]["action"] == "kept"
    assert by_id[dirty]["why"] == "uncommitted changes" and dry["bytes"] > 0
    assert Path(m["path"]).is_dir()  # a dry run changes nothing
    # each line names its task as the loop does: short id and title (P36)
    lines = repo.afk("gc", "--dry-run", env=repo.env).stdout.splitlines()
    assert f'task {dirty[:8]} "dirty one" {d["path"]}: would be kept (uncommitted changes' in (
        "\n".join(lines)
    )
    assert any(line.startswith(f'task {merged[:8]} "merged one" ') for line in lines)
    report = repo.afk.json("gc", "--json", env=repo.env)
    assert not Path(m["path"]).exists() and Path(d["path"]).is_dir()
    assert m["branch"] not in repo.git("branch", "--list")  # deleted with -d: merged
    assert {w["id"] for w in report["worktrees"]} == {merged, dirty}
    # --force saves the dirty one first, then removes it: byte for byte, with
    # what git ignores, the modes and the empty folders (P1)
    work = Path(d["path"])
    (work / ".gitignore").write_text("debug.log\n")
    (work / "debug.log").write_text("an ignored log\n")
    (work / "key.bin").write_bytes(b"\x00secret")
    (work / "key.bin").chmod(0o600)
    (work / "empty-folder").mkdir()
    before = {p.relative_to(d["path"]): p.read_bytes() for p in Path(d["path"]).rglob("*")
              if p.is_file() and ".git" not in p.parts}  # fmt: skip
    assert Path("debug.log") in before
    forced = repo.afk.json("gc", "--force", "--json", env=repo.env)
    (gone,) = [w for w in forced["worktrees"] if w["id"] == dirty]
    assert gone["action"] == "saved and removed" and not Path(d["path"]).exists()
    assert repo.git("for-each-ref", f"refs/afk/trash/{dirty}/").count("refs/afk/trash") == 2
    assert (foreign / "keep.txt").read_text() == "mine\n"
    restored = repo.afk.json("restore", dirty, env=repo.env)
    after = {p.relative_to(restored["path"]): p.read_bytes()
             for p in Path(restored["path"]).rglob("*")
             if p.is_file() and ".git" not in p.parts}  # fmt: skip
    assert after == before
    back = Path(restored["path"])
    assert (back / "key.bin").stat().st_mode & 0o777 == 0o600
    assert (back / "empty-folder").is_dir()
    status = repo.git("status", "--porcelain", cwd=Path(restored["path"]))
    assert "dirty-one.txt" in status  # uncommitted again, as it was


def test_doctor_checks_git_once_tasks_ask_for_workspaces(repo, tmp_path):
    def git_check(path: str) -> dict[str, Any]:
        proc = repo.afk("doctor", "--json", env={**repo.env, "PATH": path})
        (found,) = [c for c in json.loads(proc.stdout) if c["check"] == "git"]
        return found

    no_git = tmp_path / "empty-bin"
    no_git.mkdir()
    assert git_check(str(no_git))["ok"]  # no task needs it yet
    assert git_check(repo.env["PATH"])["detail"].startswith("git 2.")
    repo.enqueue("needs git")
    missing = git_check(str(no_git))
    assert not missing["ok"] and "apt-get install git" in missing["fix"]


def test_claim_makes_the_worktree_and_prints_it(repo):
    (task_id,) = repo.enqueue("claimed by hand")
    claimed = repo.afk.json("claim", "--agent", "w", env=repo.env)
    ws = claimed["workspace"]
    assert claimed["id"] == task_id and Path(ws["path"]).is_dir()
    assert ws["env"]["AFK_WORKTREE"] == ws["path"] and ws["env"]["AFK_BRANCH"] == ws["branch"]
    assert ws["env"]["AFK_BASE_SHA"] == repo.git("rev-parse", "HEAD")
    assert int(ws["env"]["AFK_PORT"]) == ws["port"]
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD", cwd=Path(ws["path"])) == ws["branch"]


def test_review_shows_uncommitted_work_and_its_path_and_no_terminal_escapes(repo):
    """P9, P26, and the sweep's item 8: a title from outside (an issue, a
    prd.json) reaches the terminal with its control characters escaped; work
    left uncommitted is said, with the folder to look in, in the review and
    the morning's text; a run with no denial is not counted as denied."""
    title = "fix \x1b[31mRED\x1b]0;pwned\x07 \x1b[2J done"
    (task_id,) = repo.enqueue(title)
    code, err = finish(repo.loop(plan={title.split("\n")[0]: ["dirty"]}))
    assert code == 0, err
    (item,) = repo.afk.json("review", "--json", env=repo.env)
    assert item["id"] == task_id and item["dirty"] and item["commits"] == 0
    assert item["denied_runs"] == 0  # its one run was denied nothing
    text = repo.afk("review", env=repo.env).stdout
    assert "\x1b" not in text and "\x07" not in text, text
    assert "\\x1b[31mRED" in text  # shown, escaped: a person sees what was there
    assert f"uncommitted changes in {item['path']}" in text, text
    for fmt in ("text", "slack", "html"):
        digest = repo.afk("digest", "--dry-run", "--format", fmt, env=repo.env).stdout
        assert "uncommitted changes in" in digest and item["path"] in digest, fmt


def test_two_enqueues_racing_for_one_branch_leave_one_task(repo, queue, sql):
    """P22: the check came before the insert, each in its own statement, so
    two enqueues of one --branch both passed it. Here one holds its insert
    open in a transaction while a real `afk enqueue` runs: the second must
    wait for it, then be refused, and write nothing."""
    from watchdog.models import NewTask

    request = {"repo": os.path.realpath(repo.path), "base": None, "branch": "shared",
               "verify": None, "require_changes": False}  # fmt: skip
    with queue.db.transaction() as held:
        queue.enqueue("w", [NewTask("first", workspace=request)], conn=held)
        racer = subprocess.Popen(
            Afk.command("enqueue", "--agent", "w", "--title", "second", "--repo",
                        str(repo.path), "--branch", "shared"),
            env=repo.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

        def racer_waits() -> bool:
            if racer.poll() is not None:
                return True  # it did not wait: the assertions below say so
            return bool(
                sql.one(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            )

        poll(racer_waits, timeout=60)
    out, err = racer.communicate(timeout=60)
    assert racer.returncode == 2, (out, err)
    assert "another task's workspace" in err and "Traceback" not in err, err
    titles = [r["title"] for r in sql("SELECT title FROM afk_task")]
    assert titles == ["first"]


def test_a_task_works_in_a_git_folder_of_its_own_and_its_branch_comes_back(repo):
    """Issue 49 item 4: each task's folder is a repository of its own whose
    objects borrow the person's (read-only, through alternates), with the
    person's remotes; after each run its branch is fetched back into the
    person's repository, where review, gc and a stacked task find it; a
    keep-ref holds the base it borrows from the person's `git gc`."""
    repo.git("checkout", "-q", "-b", "side")
    (repo.path / "side.txt").write_text("side\n")
    repo.git("add", "side.txt")
    repo.git("commit", "-q", "-m", "side")
    side = repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "main")
    (task_id,) = repo.enqueue("own folder", base="side")
    code, err = finish(repo.loop())
    assert code == 0, err
    ws = repo.show(task_id)["workspace"]
    folder = Path(ws["path"])
    assert (folder / ".git").is_dir()
    lent = (folder / ".git" / "objects" / "info" / "alternates").read_text().split()
    assert lent == [str((repo.path / ".git" / "objects").resolve())]
    assert repo.git("remote", "get-url", "origin", cwd=folder) == str(repo.origin)
    # its branch, in the person's repository
    assert repo.git("rev-parse", f"refs/heads/{ws['branch']}") == ws["head_sha"]
    assert repo.git("rev-parse", f"refs/afk/keep/{task_id}") == side
    # the person drops the branch its base was on, and prunes: nothing it borrows goes
    repo.git("branch", "-D", "side")
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")
    assert repo.git("cat-file", "-t", side) == "commit"
    assert repo.git("log", "--format=%s", cwd=folder).splitlines() == [
        "own folder: run 1",
        "side",
        "first",
    ]
    # gc takes the folder (its branch saved in the person's repository) and its keep-ref
    forced = repo.afk.json("gc", "--force", "--json", env=repo.env)
    assert [w["action"] for w in forced["worktrees"]] == ["saved and removed"], forced
    assert not folder.exists()
    assert not repo.git("for-each-ref", f"refs/afk/keep/{task_id}")
    restored = repo.afk.json("restore", task_id, env=repo.env)
    assert (Path(restored["path"]) / "own-folder.txt").read_text() == "run 1 of own folder\n"


def test_an_older_tasks_linked_worktree_carries_over(repo, sql):
    """Issue 49 item 4: a task whose worktree an older afk made (a linked
    worktree of the person's repository, recorded on its workspace) goes on
    in it: it runs there, its commit is on its branch, gc saves and removes
    it, and restore brings it back as a folder of its own."""
    from watchdog.workspaces import default_branch, worktree_path

    (task_id,) = repo.enqueue("from before")
    os.environ["AFK_HOME"], before = repo.env["AFK_HOME"], os.environ.get("AFK_HOME")
    try:
        path = worktree_path(str(repo.path), uuid.UUID(task_id))
    finally:
        os.environ.pop("AFK_HOME") if before is None else os.environ.update(AFK_HOME=before)
    branch = default_branch(uuid.UUID(task_id), "from before")
    path.parent.mkdir(parents=True)
    repo.git("worktree", "add", "-q", "-b", branch, str(path), "main")
    base = repo.git("rev-parse", "main")
    sql(
        "INSERT INTO afk_workspace (task_id, repo, branch, path, base_sha, head_sha, ports)"
        " VALUES (%s, %s, %s, %s, %s, %s, 10)",
        task_id, str(repo.path), branch, str(path), base, base,
    )  # fmt: skip
    code, err = finish(repo.loop())
    assert code == 0, err
    (run,) = [r for r in repo.runs() if r["title"] == "from before"]
    assert run["cwd"] == str(path) and (path / ".git").is_file()
    task = repo.show(task_id)
    assert task["state"] == "done" and len(task["workspace"]["commits"]) == 1
    assert repo.git("log", "-1", "--format=%s", branch) == "from before: run 1"
    forced = repo.afk.json("gc", "--force", "--json", env=repo.env)
    assert [w["action"] for w in forced["worktrees"]] == ["saved and removed"], forced
    assert not path.exists() and str(path) not in repo.git("worktree", "list")
    restored = repo.afk.json("restore", task_id, env=repo.env)
    assert (Path(restored["path"]) / "from-before.txt").is_file()
    assert (Path(restored["path"]) / ".git").is_dir()


def test_a_task_folders_own_stash_and_branches_are_never_lost_to_gc(repo):
    """Point of the task's own git folder: a stash or a branch the agent made
    there lives in the folder alone (a worktree's lived in the person's
    repository). gc keeps such a folder and says why; --force saves every
    one into the person's repository before it removes the folder."""
    (task_id,) = repo.enqueue("stashes")
    code, err = finish(repo.loop())
    assert code == 0, err
    folder = Path(repo.show(task_id)["workspace"]["path"])
    (folder / "stashes.txt").write_text("stashed work\n")
    repo.git("stash", "-q", cwd=folder)
    repo.git("branch", "side-idea", cwd=folder)
    stash = repo.git("rev-parse", "refs/stash", cwd=folder)
    side = repo.git("rev-parse", "side-idea", cwd=folder)
    # merge the task's branch: only its own refs hold the folder now
    branch = repo.show(task_id)["workspace"]["branch"]
    repo.git("merge", "-q", "--ff-only", branch)
    kept = repo.afk.json("gc", "--json", env=repo.env)
    (item,) = kept["worktrees"]
    assert item["action"] == "kept" and "side-idea" in item["why"], item
    assert folder.exists()
    forced = repo.afk.json("gc", "--force", "--json", env=repo.env)
    assert [w["action"] for w in forced["worktrees"]] == ["saved and removed"], forced
    assert not folder.exists()
    saved = repo.git(
        "for-each-ref", "--format=%(objectname) %(refname)", f"refs/afk/trash/{task_id}"
    )
    assert f"{side} refs/afk/trash/{task_id}/refs/heads/side-idea" in saved, saved
    assert f"{stash} refs/afk/trash/{task_id}/stash/0" in saved, saved


def test_gc_keeps_work_under_the_paths_the_sandbox_has_git_ignore(repo):
    """Reading the change again: a sandboxed run tells its task's own git to
    ignore the engine's placeholders (.vscode, .bashrc ...); a file with
    something in it there (a later run outside the sandbox wrote it) is work
    no commit has, and plain gc must not take the folder for clean."""
    from watchdog.agents.sandbox import ready_folder

    (merged,) = repo.enqueue("merged one")
    code, err = finish(repo.loop())
    assert code == 0, err
    m = repo.show(merged)["workspace"]
    repo.git("merge", "-q", "--ff-only", m["branch"])
    work = Path(m["path"])
    ready_folder(str(work))
    (work / ".bashrc").write_text("")  # (an engine's placeholder: empty, not work)
    assert repo.afk.json("gc", "--dry-run", "--json", env=repo.env)["worktrees"][0]["action"] == (
        "removed"
    )
    (work / ".vscode").mkdir()
    (work / ".vscode" / "settings.json").write_text('{"editor.tabSize": 2}\n')
    report = repo.afk.json("gc", "--json", env=repo.env)
    (item,) = report["worktrees"]
    assert (item["action"], item["why"]) == ("kept", "uncommitted changes"), item
    assert (work / ".vscode" / "settings.json").exists()
