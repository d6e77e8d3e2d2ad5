"""`afk loop --sandbox` (issue 40 item 2): every run inside Anthropic's
sandbox runtime (the real `srt`, on bubblewrap), with a stand-in agent that
tries from inside its run what an agent steered by a hostile issue would:
read keys and afk's own files, reach the database and hosts not on the list,
write outside its worktree, and act on the queue beyond its own task."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import Afk, poll, require_cli, require_tool
from helpers.sandbox_runtime import VERSION, binary

from watchdog.agents import reach

#: the stand-in agent: tries each thing, and prints what happened as one
#: JSON line (its stdout passes through the loop)
AGENT = textwrap.dedent(
    """
    import json, os, socket, subprocess, sys, urllib.request
    tries = json.loads(os.environ["AGENT_TRIES"])
    got = {"env": sorted(os.environ)}

    def attempt(name, fn):
        try:
            got[name] = ["ok", str(fn())[:200]]
        except Exception as exc:
            got[name] = ["refused", f"{type(exc).__name__}: {exc}"[:200]]

    def read(path):
        with open(path) as f:
            return f.read()

    def write(path):
        with open(path, "w") as f:
            f.write("x")
        return path

    def connect(where):
        kind, _, address = where.partition(":")
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(3)
            s.connect(address)
        else:
            host, _, port = address.rpartition(":")
            s = socket.create_connection((host, int(port)), timeout=3)
        s.close()
        return where

    def fetch(url):
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()

    def afk(*args):
        proc = subprocess.run([sys.executable, "-m", "watchdog.cli", *args],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    for path in tries["read"]:
        attempt(f"read {path}", lambda p=path: read(p))
    for path in tries["write"]:
        attempt(f"write {path}", lambda p=path: write(p))
    for where in tries["connect"]:
        attempt(f"connect {where}", lambda w=where: connect(w))
    for url in tries["fetch"]:
        attempt(f"fetch {url}", lambda u=url: fetch(u))
    attempt("proc 1 environ", lambda: read("/proc/1/environ"))
    attempt("afk checkpoint", lambda: afk("checkpoint", "--patch", '{"inside": true}'))
    for name, args in tries.get("afk", {}).items():
        attempt(f"afk {name}", lambda a=args: afk(*a))
    attempt("afk enqueue", lambda: afk("enqueue", "--agent", "s", "--title", "sneaked in"))
    attempt("write here", lambda: write("work.txt"))
    def commit():
        who = ["-c", "user.name=a", "-c", "user.email=a@example.invalid"]
        for args in (["add", "work.txt"], [*who, "commit", "-q", "-m", "work"]):
            proc = subprocess.run(["git", *args], capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(proc.stderr.strip())
        return "committed"

    attempt("commit", commit)
    def own_git():
        for args in (["branch", "side"], ["stash", "list"], ["log", "-1", "--format=%s"],
                     ["checkout", "-q", "side"], ["checkout", "-q", "-"]):
            proc = subprocess.run(["git", *args], capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"git {args[0]}: {proc.stderr.strip()}")
        return "its own git works"

    attempt("own git", own_git)
    attempt("tmp", lambda: write(os.path.join(os.environ["TMPDIR"], "scratch")))
    print("AGENT-SAID " + json.dumps(got), flush=True)
    """
)


class Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"reached"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def http_server() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


#: what of the person's git folder a run tried to write (issue 49 item 4)
PERSONS_GIT = ("refs/heads/main", "refs/heads/planted", "index", "HEAD", "packed-refs",
               "objects/planted", "config", "hooks/post-checkout", "info/exclude",
               "modules/planted", "worktrees/planted", "description")  # fmt: skip


def persons_git(repo: Path) -> list[str]:
    """The person's git folder as a run could have changed it: its refs (but
    the task's branch and keep-ref, which afk brings back), HEAD, index, config."""
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"],
                          cwd=repo, capture_output=True, text=True, check=True).stdout  # fmt: skip
    kept = [r for r in refs.splitlines() if not r.startswith(("refs/heads/afk/", "refs/afk/"))]
    files = [(repo / ".git" / n).read_bytes().hex() for n in ("HEAD", "index", "config")]
    return [*kept, *files]


def unix_listener(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(8)
    return listener


def db_addresses(dsn: str) -> list[str]:
    from watchdog.db import addresses

    tcp, sockets = addresses(dsn)
    return [f"tcp:{a}" for a in tcp] + [f"unix:{s}" for s in sockets]


def git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def outside_shm(tmp_path):
    """A folder for what the run sees, on a disk the sandbox mounts: the
    suite's own temporary folders may be under /dev/shm, and the sandbox
    gives a run a /dev of its own."""
    import shutil
    import tempfile

    base = tmp_path if not str(tmp_path).startswith("/dev/") else None
    folder = Path(tempfile.mkdtemp(prefix="afk-sandbox-test-", dir=base or "/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def srt() -> str:
    for tool in ("bwrap", "socat", "rg"):
        require_tool(tool)
    return require_cli("the sandbox runtime", VERSION, binary(), "sandbox_runtime")


def test_a_sandboxed_run_reaches_only_its_worktree_its_hosts_and_its_own_task(
    afk, srt, outside_shm
):
    tmp_path = outside_shm
    home, afk_home = tmp_path / "home", tmp_path / "afk-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (afk_home / "worktrees" / "another-task").mkdir(parents=True)
    (afk_home / "settings.toml").write_text("dsn = 'secret'\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=repo)
    persons = persons_git(repo)
    refused, allowed = http_server(), http_server()
    # another run's broker, and a database's socket in libpq's default folder
    # that no DSN names (P3, P38): listening, so that only hiding stops them
    other_run = Path(reach.run_folder("afk-broker-"))
    free = next(p for p in range(47000, 48000) if not Path(f"/tmp/.s.PGSQL.{p}").exists())
    decoys = [
        unix_listener(other_run / "broker.sock"),
        unix_listener(Path(f"/tmp/.s.PGSQL.{free}")),
    ]
    try:
        tries = {
            "read": [str(home / ".ssh" / "id_rsa"), str(afk_home / "settings.toml")],
            "write": [str(repo / "planted.txt"), str(home / "planted.txt"),
                      str(afk_home / "worktrees" / "another-task" / "planted.txt"),
                      # the person's git folder, every part of it (P4)
                      *(str(repo / ".git" / part) for part in PERSONS_GIT)],
            "connect": [*db_addresses(afk.env["AFK_DSN"]),
                        *(f"unix:{d.getsockname()}" for d in decoys)],
            "fetch": [f"http://127.0.0.1:{refused.server_port}/",
                      f"http://127.0.0.1:{allowed.server_port}/"],
            "afk": {"once ssh": ["once", "--name", "ssh", "--", "cat",
                                 str(home / ".ssh" / "id_rsa")],
                    "once here": ["once", "--name", "here", "--", "sh", "-c",
                                  "echo once > once.txt && echo wrote"]},
        }  # fmt: skip
        env = {
            **afk.env,
            "HOME": str(home),
            "AFK_HOME": str(afk_home),
            "AFK_SRT": srt,
            "AGENT_TRIES": json.dumps(tries),
        }
        agent = tmp_path / "agent.py"
        agent.write_text(AGENT)
        enqueued = afk("enqueue", "--agent", "s", "--title", "t", "--repo", str(repo), env=env)
        assert enqueued.returncode == 0, enqueued.stderr
        (task_id,) = json.loads(enqueued.stdout)["enqueued"]
        allow = f"127.0.0.1:{allowed.server_port}"
        loop = [*Afk.command("loop", "--agent", "s", "--max-tasks", "1", "--sandbox",
                             "--allow-host", allow, "--"), sys.executable, str(agent)]  # fmt: skip
        proc = subprocess.run(loop, env=env, capture_output=True, text=True, timeout=180)
    finally:
        for server in (refused, allowed):
            server.shutdown()
            server.server_close()
        for decoy in decoys:
            os.unlink(decoy.getsockname())
            decoy.close()
        other_run.rmdir()
    assert proc.returncode == 0, proc.stderr
    said = [x for x in proc.stdout.splitlines() if x.startswith("AGENT-SAID ")]
    assert len(said) == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    (line,) = said
    got = json.loads(line.removeprefix("AGENT-SAID "))
    outcome = {k: v[0] for k, v in got.items() if k != "env"}
    # what a hostile agent tried: refused, every one
    for name in [*(f"read {p}" for p in tries["read"]), *(f"write {p}" for p in tries["write"]),
                 *(f"connect {w}" for w in tries["connect"]), "afk enqueue", "afk once ssh",
                 f"fetch http://127.0.0.1:{refused.server_port}/"]:  # fmt: skip
        assert outcome[name] == "refused", (name, got[name], got)
    assert "PRIVATE KEY" not in proc.stdout + proc.stderr
    assert "AFK_DSN" not in got["env"] and not [k for k in got["env"] if k.startswith("PG")]
    if outcome["proc 1 environ"] == "ok":
        assert afk.env["AFK_DSN"] not in got["proc 1 environ"][1]
    # what its work needs: granted
    for name in ("afk checkpoint", "write here", "commit", "own git", "tmp", "afk once here",
                 f"fetch http://127.0.0.1:{allowed.server_port}/"):  # fmt: skip
        assert outcome[name] == "ok", (name, got[name])
    assert not (repo / "planted.txt").exists() and not (home / "planted.txt").exists()
    assert persons_git(repo) == persons  # (its refs but afk's own, its index, HEAD, config)
    task = afk.json("show", task_id, env=env)
    assert task["state"] == "done" and task["checkpoint"]["inside"] is True, task
    assert len(task["workspace"]["commits"]) == 1
    (run,) = task["runs"]
    assert run["sandbox"]["engine"] == "srt" and allow in run["sandbox"]["hosts_allowed"], run
    # every host it tried, as the engine's proxy decided, with a count; the
    # engine's own log is not passed on as the agent's output
    tried = {(h["host"], h["allowed"]): h["count"] for h in run["sandbox"]["hosts_tried"]}
    assert tried.get((allow, True), 0) >= 1, tried
    assert tried.get((f"127.0.0.1:{refused.server_port}", False), 0) >= 1, tried
    assert not [h for h in tried if h[1] and h[0] != allow and "127.0.0.1" in h[0]], tried
    assert "[SandboxDebug]" not in proc.stdout + proc.stderr + json.dumps(task["runs"])
    # the denied host in the morning's story
    digest = afk("digest", "--dry-run", "--format", "text", env=env).stdout
    assert f"127.0.0.1:{refused.server_port}" in digest.split("The night:", 1)[1], digest
    # and on the task's page
    from helpers.service import Service

    service = Service(afk.env["AFK_DSN"])
    try:
        poll(lambda: service.health() == 200, timeout=60)
        page = service.get(f"/tasks/{task_id}")
        assert page is not None and page.status_code == 200
        denied = page.text.split("the sandbox denied:", 1)[1].split("</tr>", 1)[0]
        assert f"127.0.0.1:{refused.server_port}" in denied and allow not in denied, denied
    finally:
        service.cleanup()


def test_a_sandbox_engine_that_is_missing_is_said_before_anything_is_claimed(afk, tmp_path):
    (task_id,) = afk.json("enqueue", "--agent", "m", "--title", "t")["enqueued"]
    env = {"AFK_SRT": str(tmp_path / "no-such-srt")}
    proc = afk("loop", "--agent", "m", "--sandbox", "--", "true", env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "npm install -g @anthropic-ai/sandbox-runtime" in (
        proc.stderr
    )
    assert afk.json("show", task_id)["state"] == "todo"


def probes(afk: Afk, env: dict[str, str], *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    proc = afk("doctor", "--json", "--sandbox", *args, env=env)
    checks = json.loads(proc.stdout)
    return proc.returncode, {c["check"]: c for c in checks if c["check"].startswith("sandbox: ")}


def test_doctor_proves_the_boundary_with_probes_run_through_it(afk, srt, outside_shm):
    """Issue 40 item 6: `afk doctor --sandbox` runs its probes through the
    engine as a run would be: what must fail fails, the allowed host is
    reached; an engine that holds nothing (a stand-in that runs the command
    as it is) makes doctor exit 1, naming each probe that got through."""
    home, afk_home = outside_shm / "home", outside_shm / "afk-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    afk_home.mkdir()
    (afk_home / "settings.toml").write_text("dsn = 'secret'\n")
    server = http_server()
    try:
        allow = f"127.0.0.1:{server.server_port}"
        env = {"HOME": str(home), "AFK_HOME": str(afk_home), "AFK_SRT": srt}
        _, seen = probes(afk, env, "--allow-host", allow)
        assert seen and all(c["ok"] for c in seen.values()), seen
        names = " | ".join(seen)
        expected = [
            "write outside the worktree",
            f"read {home / '.ssh'}",
            f"read {afk_home}",
            "connect to the database",
            "a host not on the list",
            f"reach {allow}",
        ]
        for probe in expected:
            assert probe in names, (probe, names)
        # an engine that holds nothing: every probe that must fail gets through
        loose = outside_shm / "loose-srt"
        loose.write_text('#!/bin/sh\nshift 3\nexec "$@"\n')  # (srt --settings F -- CMD)
        loose.chmod(0o755)
        code, seen = probes(afk, {**env, "AFK_SRT": str(loose)}, "--allow-host", allow)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1
    through = [n for n, c in seen.items() if not c["ok"]]
    assert "sandbox: write outside the worktree" in through, seen
    assert f"sandbox: read {home / '.ssh'}" in through and f"sandbox: read {afk_home}" in through
    escaped = [n for n in through if seen[n]["detail"] == "got through the boundary"]
    assert len(escaped) >= 3 and f"sandbox: reach {allow}" not in escaped, seen


def test_the_sandbox_bench_runs_and_reports_what_the_boundary_adds(srt, tmp_path):
    """The bench of the boundary's cost (bench.sandbox), tiny, so that it
    cannot rot: it reports the bare and the sandboxed start, and the
    difference (measured, never asserted here: bench/reports holds it)."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.sandbox", "--runs", "2", "--out", str(out)],
        cwd=Path(__file__).parents[2],
        env={**os.environ, "AFK_SRT": srt},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["engine"].startswith("srt ") and report["runs"] == 2
    assert report["sandboxed_ms"] > report["bare_ms"] > 0


def test_doctor_says_a_missing_engine_once_and_as_doctor(afk, tmp_path):
    """P33 (issue 53): without the engine `afk doctor --sandbox` printed its
    install hint twice in one line, and "nothing was claimed", written for
    the loop."""
    env = {"AFK_SRT": str(tmp_path / "no-such-srt")}
    proc = afk("doctor", "--sandbox", env=env)
    assert proc.returncode == 1, proc.stderr
    (line,) = [x for x in (proc.stdout + proc.stderr).splitlines() if "FAIL sandbox" in x]
    assert line.count("npm install -g @anthropic-ai/sandbox-runtime") == 1, line
    assert "nothing was claimed" not in line and "no-such-srt" in line, line


#: an agent at its ordinary work: what git says of its fresh folder, then
#: everything it changed added and committed the usual way
ORDINARY = textwrap.dedent(
    """
    import json, subprocess
    def git(*args):
        proc = subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid",
                               *args], capture_output=True, text=True)
        return [proc.returncode, (proc.stdout + proc.stderr).strip()[-500:]]
    got = {"status before": git("status", "--porcelain", "--untracked-files=all")}
    with open("feature.py", "w") as f:
        f.write("print('new')\\n")
    got["add -A"] = git("add", "-A")
    got["commit"] = git("commit", "-q", "-m", "the feature")
    got["status after"] = git("status", "--porcelain", "--untracked-files=all")
    got["committed"] = git("show", "--name-only", "--format=", "HEAD")
    print("AGENT-SAID " + json.dumps(got), flush=True)
    """
)


@pytest.mark.parametrize("committed", [None, ".claude/settings.json", ".vscode/settings.json",
                                       ".mcp.json", ".codex/config.toml"])  # fmt: skip
def test_ordinary_work_commits_the_usual_way_inside_the_sandbox(afk, srt, outside_shm, committed):
    """Issue 50 item 1 (P15): the engine's placeholders for what it protects
    (.bashrc, .gitconfig, .mcp.json, .vscode, .claude/commands ...) showed in
    `git status` and made `git add -A` fail; a repository that commits
    `.claude/` could not run sandboxed at all. A fresh task folder is clean
    to git inside, `git add -A && git commit` works, and commits only the
    agent's work; what the repository commits there is read-only inside."""
    repo = outside_shm / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    if committed:
        (repo / committed).parent.mkdir(parents=True, exist_ok=True)
        (repo / committed).write_text("{}\\n")
        git("add", "-A", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=repo)
    agent = outside_shm / "agent.py"
    agent.write_text(ORDINARY)
    env = {**afk.env, "AFK_SRT": srt, "HOME": str(outside_shm / "home")}
    (task_id,) = afk.json("enqueue", "--agent", "o", "--title", "t", "--repo", str(repo),
                          env=env)["enqueued"]  # fmt: skip
    loop = [*Afk.command("loop", "--agent", "o", "--max-tasks", "1", "--sandbox", "--"),
            sys.executable, str(agent)]  # fmt: skip
    proc = subprocess.run(loop, env=env, capture_output=True, text=True, timeout=180)
    said = [x for x in proc.stdout.splitlines() if x.startswith("AGENT-SAID ")]
    assert proc.returncode == 0 and len(said) == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    got = json.loads(said[0].removeprefix("AGENT-SAID "))
    assert got["status before"] == [0, ""], got
    assert got["add -A"][0] == 0 and got["commit"][0] == 0, got
    assert got["status after"] == [0, ""], got
    assert got["committed"] == [0, "feature.py"], got
    task = afk.json("show", task_id, env=env)
    assert task["state"] == "done", task
    assert "outside its group" not in proc.stderr, proc.stderr
