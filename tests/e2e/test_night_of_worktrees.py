"""The night of worktrees, end to end (issue 41): thirteen tasks on one
repository and two `afk loop`s running a stand-in Claude Code that fires its
hooks as the real one does (tests/helpers/standin_claude.py): one loop with
afk's command hooks installed the README's way (into the checkout, where no
worktree sees them), one with HTTP hooks through the watchdog service and
``--output-format json`` (nothing printed until the end). Dependencies, a
concurrency key, a check that fails then passes, a usage limit, a 529, a
hung session and a ``kill -9`` of a loop. Nothing is done twice, no agent
outlives its loop, no worktree is lost, the checkout is untouched, and the
review and the digest say what happened. (The real Claude Code CLI's night
is in the real-client tier.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import HELPERS, Afk, poll, require_tool
from helpers.service import Service, free_port

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Night",
    "GIT_AUTHOR_EMAIL": "night@example.invalid",
    "GIT_COMMITTER_NAME": "Night",
    "GIT_COMMITTER_EMAIL": "night@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}
TOKEN = "night-hook-token-0123456789"
BUSY = 4.0  # each run works longer than --stall-after, saying nothing


def commit(title: str, *, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A run that works (tool calls only), writes its file and commits it."""
    return [
        {"busy": BUSY},
        *(extra or []),
        {"write": f"{title}.txt", "content": f"{title}\n"},
        {"bash": f"git add -A && git commit -q -m '{title}: work'"},
        {"say": f"{title}: done"},
    ]


PLAN: dict[str, Any] = {
    "schema": commit("schema"),
    "api": commit("api"),
    "ui": commit("ui"),
    "migrate-a": commit("migrate-a"),
    "migrate-b": commit("migrate-b"),
    # its check (test -f check.ok) fails after the first run, passes after the second
    "parser": {"runs": [commit("parser"), commit("parser", extra=[{"write": "check.ok"}])]},
    "limited": {"runs": [[{"ends": "Claude AI usage limit reached|{epoch+4}"}], commit("limited")]},
    "overloaded": {
        "runs": [
            [
                {
                    "ends": "API Error: 529 Overloaded. This is a server-side issue, "
                    "usually temporary",
                    "api_error_status": 529,
                }
            ],
            commit("overloaded"),
        ]
    },
    "hung": {"runs": [[{"think": 300}], commit("hung")]},
    # the run its loop is SIGKILLed under; the retry finishes it
    "long": {"runs": [[{"busy": 120}], commit("long")]},
    "docs": commit("docs"),
    "tests": commit("tests"),
    "cleanup": commit("cleanup"),
}


def git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, **GIT_ENV}, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


class NightOfWorktrees:
    def __init__(self, afk: Afk, dsn: str, tmp: Path) -> None:
        require_tool("git")
        self.afk, self.tmp = afk, tmp
        self.repo = tmp / "repo"
        self.repo.mkdir()
        git("init", "-q", "-b", "main", cwd=self.repo)
        (self.repo / "README.md").write_text("# app\n")
        git("add", "-A", cwd=self.repo)
        git("commit", "-q", "-m", "first", cwd=self.repo)
        self.base = git("rev-parse", "HEAD", cwd=self.repo)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        self.claude = bin_dir / "claude"  # (afk loop gives `claude` its hooks)
        self.claude.write_text(
            f"#!{sys.executable}\nimport runpy\n"
            f"runpy.run_path({str(HELPERS / 'standin_claude.py')!r}, run_name='__main__')\n"
        )
        self.claude.chmod(0o755)
        self.log = tmp / "claude.jsonl"
        self.log.write_text("")
        plan = tmp / "plan.json"
        plan.write_text(json.dumps(PLAN))
        self.http = f"127.0.0.1:{free_port()}"
        self.env = {
            **afk.env,
            **GIT_ENV,
            "AFK_HOME": str(tmp / "afk-home"),
            "AFK_HOOK_SOCKET": str(tmp / "hook.sock"),
            "AFK_HOOK_HTTP": self.http,
            "AFK_HOOK_TOKEN": TOKEN,
            "AFK_BACKOFF_BASE_SECONDS": "1",
            "AFK_BACKOFF_CAP_SECONDS": "1",
            "AFK_LIMIT_PROBE_FIRST_SECONDS": "5",
            "STANDIN_PLAN": str(plan),
            "STANDIN_LOG": str(self.log),
        }
        self.service = Service(dsn, **{k: v for k, v in self.env.items() if k.startswith("AFK_")})
        self.loops: dict[str, subprocess.Popen[bytes]] = {}

    def afk_ok(self, *args: str, env: dict[str, str] | None = None) -> str:
        proc = self.afk(*args, env={**self.env, **(env or {})})
        assert proc.returncode == 0, proc.stderr
        return str(proc.stdout)

    def enqueue(self, title: str, *options: str) -> str:
        out = self.afk_ok(
            "enqueue", "--agent", "night", "--title", title, "--repo", str(self.repo), *options
        )
        (task_id,) = json.loads(out)["enqueued"]
        return str(task_id)

    def start(self, name: str) -> None:
        """Loop "a": command hooks, text output; loop "b": HTTP hooks from
        its user's settings, JSON output."""
        home = self.tmp / f"home-{name}"
        command = [str(self.claude), "-p"]
        if name == "b":
            command += ["--output-format", "json"]
        env = {**self.env, "HOME": str(home)}
        with (self.tmp / f"loop-{name}.err").open("ab") as err:
            self.loops[name] = subprocess.Popen(
                Afk.command(
                    "loop", "--agent", "night", "--account", f"max-{name}",
                    "--stall-after", "3s", "--lease", "10", "--", *command,
                ),
                env=env, cwd=self.repo, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

    def said(self, name: str) -> str:
        return (self.tmp / f"loop-{name}.err").read_text()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def loop_of(self, pid: int) -> str | None:
        """The loop whose run ``pid`` is (its ancestor)."""
        mine = {p.pid: name for name, p in self.loops.items()}
        while pid > 1:
            if pid in mine:
                return mine[pid]
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return None

    def cleanup(self) -> None:
        for proc in self.loops.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.service.cleanup()


@pytest.fixture
def night(afk, dsn, tmp_path):
    n = NightOfWorktrees(afk, dsn, tmp_path)
    try:
        yield n
    finally:
        n.cleanup()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_night_of_worktrees_with_two_loops_loses_nothing_and_does_nothing_twice(night, sql):
    # the README's way: afk's hooks into the checkout (an uncommitted file, in
    # no worktree), and HTTP hooks into loop b's user settings
    night.afk_ok("hooks", "claude", "--install", str(night.repo / ".claude" / "settings.json"))
    user_b = night.tmp / "home-b" / ".claude" / "settings.json"
    night.afk_ok("hooks", "claude", "--transport", "http", "--install", str(user_b))
    poll(lambda: "answering HTTP hooks on" in night.service.log(), timeout=60)

    ids: dict[str, str] = {}
    ids["schema"] = night.enqueue("schema")
    ids["api"] = night.enqueue("api", "--after", ids["schema"])
    ids["ui"] = night.enqueue("ui", "--after", ids["api"])
    for title in ("migrate-a", "migrate-b"):
        ids[title] = night.enqueue(title, "--concurrency-key", "db")
    ids["parser"] = night.enqueue("parser", "--verify", "test -f check.ok")
    for title in ("limited", "overloaded", "hung", "long", "docs", "tests", "cleanup"):
        ids[title] = night.enqueue(title)
    assert len(ids) == 13

    night.start("a")
    night.start("b")
    # the long run's loop is SIGKILLed while its agent works
    started = poll(
        lambda: [e for e in night.events() if e.get("event") == "tool" and e["title"] == "long"],
        timeout=180,
    )
    victim_pid = started[0]["pid"]
    victim = night.loop_of(victim_pid)
    assert victim is not None, started
    night.loops[victim].send_signal(signal.SIGKILL)
    night.loops[victim].wait()
    poll(lambda: not alive(victim_pid), timeout=30)  # its agent dies with it
    # the watchdog's minute, at once: the dead loop's lease is reclaimed
    sql.expire(ids["long"])
    night.afk_ok("reclaim")
    night.start(victim)

    for name, proc in night.loops.items():
        assert proc.wait(timeout=300) == 0, night.said(name)

    tasks = {title: json.loads(night.afk_ok("show", i)) for title, i in ids.items()}
    assert {t: task["state"] for t, task in tasks.items()} == dict.fromkeys(ids, "done")
    # done once each: one run that finished it, one commit of its work
    for title, task in tasks.items():
        outcomes = [r["outcome"] for r in task["runs"]]
        assert outcomes.count("done") == 1, (title, outcomes)
        ws = task["workspace"]
        subjects = [c["subject"] for c in ws["commits"]]
        assert subjects.count(f"{title}: work") == (2 if title == "parser" else 1), subjects
        assert Path(ws["path"]).is_dir() and (Path(ws["path"]) / f"{title}.txt").is_file()
    # what was not the task's own doing spent no attempt
    for title, first in (("limited", "usage_limit"), ("overloaded", "outage"), ("hung", "stalled")):
        run = tasks[title]["runs"][0]
        assert (run["outcome"], run["attempt_spent"]) == (first, False), (title, run)
        assert tasks[title]["attempts"] == 1, (title, tasks[title]["runs"])
    # the check failed once, then passed: one attempt each
    parser = [(r["outcome"], r["attempt_spent"]) for r in tasks["parser"]["runs"]]
    assert parser == [("task_failure", True), ("done", True)], parser
    # the killed loop's run: lost with its lease, then done by the loop started again
    assert [r["outcome"] for r in tasks["long"]["runs"]] == ["lease_lost", "done"]

    events = night.events()
    # a busy agent that says nothing is alive by its hooks, command or HTTP:
    # only the hung one was stopped as stalled
    stalled = [
        (t, r) for t, task in tasks.items() for r in task["runs"] if r["outcome"] == "stalled"
    ]
    assert [t for t, _ in stalled] == ["hung"], stalled
    # afk's hooks reached every worktree: each run that started got its brief
    starts = [e for e in events if e.get("event") == "start"]
    briefed = {e["session"] for e in events if e.get("event") == "context"}
    unbriefed = [s["session"] for s in starts if s["session"] not in briefed]
    assert not unbriefed, [e for e in events if e.get("session") in unbriefed]
    kinds = {e["type"] for e in events if e.get("event") == "PostToolUse"}
    assert kinds == {"command", "http"}, kinds
    assert all(
        e["hook_exit"] == 0 for e in events if e.get("event") in ("PreToolUse", "PostToolUse")
    )
    # the dependencies and the key held: api after schema was done, ui after
    # api; the two tasks of one key never ran at once
    runs_of = {
        t: sorted((r["started_at"], r["ended_at"]) for r in task["runs"])
        for t, task in tasks.items()
    }
    assert runs_of["api"][0][0] >= runs_of["schema"][-1][1]
    assert runs_of["ui"][0][0] >= runs_of["api"][-1][1]
    a, b = runs_of["migrate-a"][-1], runs_of["migrate-b"][-1]
    assert a[1] <= b[0] or b[1] <= a[0], (a, b)
    # no agent outlived its loop
    poll(lambda: not any(alive(s["pid"]) for s in starts), timeout=30)
    # the checkout is as it was: on main, its one commit, only the hooks' file new
    assert git("rev-parse", "HEAD", cwd=night.repo) == night.base
    assert git("branch", "--show-current", cwd=night.repo) == "main"
    assert git("status", "--porcelain", cwd=night.repo) == "?? .claude/"
    # the morning: every task in the review with its work, the night's story
    review = json.loads(night.afk_ok("review", "--agent", "night", "--json"))
    reviewed = {t["title"]: t for t in review}
    assert set(reviewed) == set(ids)
    assert all(t["commits"] and not t["error"] for t in reviewed.values()), reviewed
    assert reviewed["parser"]["check"]["status"] == 0, reviewed["parser"]
    digest = night.afk_ok("digest", "--dry-run", "--format", "text")
    story = digest.split("The night:", 1)[1]
    assert "night: 13 done, 0 failed" in story and "1 hung run(s) stopped" in story, story
    parked = story.split("Accounts parked:", 1)[1]
    assert "(usage limit)" in parked and "0 attempt(s) spent on limits" in parked, parked
