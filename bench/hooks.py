"""The cost of `afk hook` to the agent, in one run.

1. Process start to exit, as Claude Code runs the installed hook command before
   and after every tool call: answered by the running watchdog service (the
   fast path), and straight against the database (no service: the fallback),
   beside `python -c pass` and beside `psql -c` running the hook's statement.
2. What users feel: sessions of the real Claude Code CLI (tests/helpers/claude_code.py
   pins it) against a scripted Messages API (tests/helpers/messages_api.py), each
   making CALLS (and three times CALLS) Bash calls, without afk's hooks, with
   them through the service (command and HTTP), with HTTP hooks answered by a
   server that does nothing (the client's own cost of an HTTP hook), and with
   command hooks and no service; the time each hook pair adds to a tool call.
   Skipped (and said) when the client is not fetched.

3. With ``--sandbox``: the same hook commands run by a driver inside one
   session of the sandbox engine (``afk loop --sandbox``'s boundary, the real
   srt), as a sandboxed agent's harness runs them, against the same driver
   outside, round after round: what the boundary adds to each tool call.

    python -m bench.hooks [--dsn DSN] [--runs 40] [--sessions 5] [--calls 20] [--sandbox]
                          [--out FILE]

With no DSN it starts a private embedded server in a temporary folder.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg

from watchdog import sql
from watchdog.agents.harnesses import HOOK_CODE
from watchdog.db import Database
from watchdog.models import NewTask, Task
from watchdog.queue import Queue

ROOT = Path(__file__).parent.parent
AFK = str(Path(sys.executable).parent / "afk")


def timed(
    command: list[str],
    runs: int,
    stdin: bytes | Callable[[], bytes] | None = None,
    env: dict[str, str] | None = None,
) -> list[float]:
    out = []
    for _ in range(runs):
        data = stdin() if callable(stdin) else stdin
        started = time.perf_counter()
        proc = subprocess.run(command, input=data, capture_output=True, env=env)
        out.append((time.perf_counter() - started) * 1000)
        assert proc.returncode == 0, proc.stderr
    return out


#: a command, its stdin (or what makes a fresh one each run), its environment
Contender = tuple[list[str], bytes | Callable[[], bytes] | None, dict[str, str] | None]


def together(contenders: dict[str, Contender], runs: int) -> dict[str, list[float]]:
    """Each contender once a round, round after round: a machine that slows
    down or speeds up during the run (a shared host does) does so for all of
    them alike, and their ratios hold."""
    out: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, (command, stdin, env) in contenders.items():
            out[name] += timed(command, 1, stdin, env)
    return out


def row(name: str, ms: list[float], base: float, python: float) -> str:
    p50 = statistics.median(ms)
    p95 = sorted(ms)[int(0.95 * (len(ms) - 1))]
    return f"| {name} | {p50:.1f} | {p95:.1f} | {p50 / base:.2f}x | {p50 / python:.2f}x |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--sandbox", action="store_true", help="also inside the sandbox")
    parser.add_argument("--out")
    args = parser.parse_args()
    home = None
    dsn = args.dsn
    if dsn is None:
        from watchdog import embedded

        home = Path(tempfile.mkdtemp(prefix="afk-bench-hooks-"))
        dsn = embedded.ensure_running(home).dsn()
    try:
        report = run(dsn, args.runs, args.sessions, args.calls, args.sandbox)
    finally:
        if home is not None:
            from watchdog import embedded

            embedded.stop(home)
            shutil.rmtree(home, ignore_errors=True)
    print(report)
    if args.out:
        Path(args.out).write_text(report)


#: times a hook command ``N`` times, each with a payload of a new session
#: (PreToolUse asks the database) and then of one session (PostToolUse), as
#: a harness runs it; prints the milliseconds (JSON)
DRIVER = """
import json, subprocess, sys, time, uuid
hook, n = json.loads(sys.argv[1]), int(sys.argv[2])
out = {"PreToolUse": [], "PostToolUse": []}
for _ in range(n):
    for event in out:
        body = json.dumps({"session_id": str(uuid.uuid4()) if event == "PreToolUse" else "s",
                           "cwd": "/w", "hook_event_name": event, "tool_name": "Write",
                           "tool_input": {"file_path": "/w/a.py"}}).encode()
        began = time.perf_counter()
        subprocess.run(hook, input=body, capture_output=True, check=True)
        out[event].append((time.perf_counter() - began) * 1000)
print(json.dumps(out))
"""


def sandboxed(hook: list[str], env: dict[str, str], runs: int) -> str:
    """The hook commands inside one session of the sandbox and outside it,
    by the same driver, rounds taking turns: the p50 of each and the difference."""
    from watchdog.agents import reach, sandbox

    engine = sandbox.locate(os.environ.get("AFK_SRT", ""), os.environ)
    boundary = sandbox.Boundary(engine=engine, version=sandbox.version(engine))
    work = tempfile.mkdtemp(prefix="afk-bench-hooks-box-", dir="/tmp")
    driver = [sys.executable, "-c", DRIVER, json.dumps(hook), "5"]
    got: dict[str, dict[str, list[float]]] = {"outside": {}, "inside": {}}
    try:
        for _ in range(max(runs // 5, 1)):
            run_dir = reach.run_folder()
            try:
                os.mkdir(os.path.join(run_dir, "tmp"))
                for where, argv in (
                    ("outside", driver),
                    ("inside", boundary.wrap(driver, None, env, work, run_dir, None)),
                ):
                    done = subprocess.run(
                        argv, env=env, cwd=work, capture_output=True, text=True, check=True
                    )
                    for event, ms in json.loads(done.stdout.splitlines()[-1]).items():
                        got[where].setdefault(event, []).extend(ms)
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        f"Inside the sandbox ({sandbox.ENGINE} {boundary.version}): the hook command, as "
        "`afk hooks` installs it, run by one driver inside one sandbox session and by the "
        "same driver outside, through the service, rounds taking turns "
        f"({len(got['inside']['PreToolUse'])} calls of each):\n",
        "| hook | outside p50 ms | inside p50 ms | added ms |",
        "|---|---|---|---|",
    ]
    for event in ("PreToolUse", "PostToolUse"):
        out, inside = (statistics.median(got[w][event]) for w in ("outside", "inside"))
        lines.append(f"| {event} | {out:.1f} | {inside:.1f} | {inside - out:+.1f} |")
    return "\n\n" + "\n".join(lines) + "\n"


#: the HTTP hooks' token in the benchmark (the service's and the client's)
HTTP_TOKEN = "bench-hook-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def service(dsn: str, folder: Path, http_port: int) -> Iterator[str]:
    """`afk watchdog run` answering hooks on a socket of its own, and over
    HTTP on ``http_port``."""
    path = str(folder / "hook.sock")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AFK_")}
    env.update(AFK_DSN=dsn, AFK_HOOK_SOCKET=path, AFK_METRICS_ADDR=f"127.0.0.1:{port}")
    env.update(AFK_HOOK_HTTP=f"127.0.0.1:{http_port}", AFK_HOOK_TOKEN=HTTP_TOKEN)
    log = open(folder / "service.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([AFK, "watchdog", "run"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while "answering HTTP hooks on" not in (folder / "service.log").read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the service did not start"
            time.sleep(0.05)
        yield path
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def run(dsn: str, runs: int, sessions: int, calls: int, boxed: bool = False) -> str:
    db = Database(dsn)
    db.migrate()
    q = Queue(db)
    q.enqueue("bench-hooks", [NewTask("t")])
    task = q.claim("bench-hooks", runner="bench-supervisor", lease_seconds=3600)
    assert task is not None
    folder = Path(tempfile.mkdtemp(prefix="afk-bench-"))
    base_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AFK_")},
        "AFK_DSN": dsn,
        "AFK_TASK_ID": str(task.id),
        "AFK_TASK_TOKEN": str(task.token),
        "TMPDIR": str(folder),
    }

    def payload(event: str, session: str = "bench-session") -> bytes:
        return json.dumps(
            {
                "session_id": session,
                "cwd": "/w",
                "hook_event_name": event,
                "tool_name": "Write",
                "tool_input": {"file_path": "/w/a.py"},
            }
        ).encode()

    def fresh(event: str) -> Callable[[], bytes]:
        return lambda: payload(event, session=str(uuid.uuid4()))

    with psycopg.ClientCursor(psycopg.connect(dsn)) as cur:
        statement = cur.mogrify(
            sql.query("hook_touch"),
            {
                "id": task.id,
                "token": task.token,
                "runner": "bench-session",
                "renew": False,
                "files": ["/w/a.py"],
                "max_files": 200,
                "max_bytes": 1 << 20,
                "lease_seconds": 3600,
            },
        )
    psql = shutil.which("psql")
    if psql is None:
        from watchdog.embedded import bin_dir

        psql = str(bin_dir() / "psql")
    # the hook as `afk hooks` installs it: afk's entry point, isolated
    hook = [sys.executable, "-I", "-c", HOOK_CODE, "hook"]
    bare = ([sys.executable, "-c", "pass"], None, None)
    results: dict[str, list[float]] = {}
    http_port = free_port()
    http_ms: list[float] = []
    with service(dsn, folder, http_port) as path:
        env = {**base_env, "AFK_HOOK_SOCKET": path}
        http_ms = http_round_trips(http_port, task, payload("PreToolUse"), 200)
        results |= together(
            {
                "python -c pass": bare,
                "psql -c (the hook's statement)": ([psql, dsn, "-qAtc", statement], None, None),
                "**service** PreToolUse, asking the database": (hook, fresh("PreToolUse"), env),
                "**service** PreToolUse, verdict cached (< 2 s old)": (
                    hook,
                    payload("PreToolUse"),
                    env,
                ),
                "**service** PostToolUse (Write: files_touched)": (
                    hook,
                    payload("PostToolUse"),
                    env,
                ),
            },
            runs,
        )
        sessions_table = claude_sessions(base_env, path, http_port, folder, sessions, calls)
        if boxed:
            sessions_table += sandboxed(hook, env, runs)
    env = {**base_env, "AFK_HOOK_SOCKET": "off"}
    results |= together(
        {
            "no service: PreToolUse, asking the database": (hook, fresh("PreToolUse"), env),
            "no service: PreToolUse, verdict cached (< 2 s old)": (
                hook,
                payload("PreToolUse"),
                env,
            ),
            "no service: PostToolUse (Write: files_touched)": (hook, payload("PostToolUse"), env),
        },
        runs,
    )
    base = statistics.median(results["psql -c (the hook's statement)"])
    python = statistics.median(results["python -c pass"])
    lines = [
        "| process start to exit | p50 ms | p95 ms | p50 / psql -c | p50 / python -c pass |",
        "|---|---|---|---|---|",
    ]
    lines += [row(name, ms, base, python) for name, ms in results.items()]
    q.close()
    shutil.rmtree(folder, ignore_errors=True)
    http_ms.sort()
    http = (
        f"Claude Code's HTTP hook through the service (PreToolUse, verdict cached; a new "
        f"connection each, {len(http_ms)} round trips): p50 {statistics.median(http_ms):.2f} ms, "
        f"p99 {http_ms[int(len(http_ms) * 0.99) - 1]:.2f} ms (target p50 <= 5 ms).\n\n"
    )
    return (
        "\n".join(lines)
        + f"\n\n{runs} runs each, the contenders of a table taking turns (one run of each, "
        "round after round), on one machine, with the hook command as `afk hooks` "
        "installs it.\n\n" + http + sessions_table
    )


def http_round_trips(port: int, task: Task, body: bytes, n: int) -> list[float]:
    """An HTTP hook as Claude Code posts it, ``n`` times: milliseconds each."""
    import http.client

    headers = {
        "Authorization": f"Bearer {HTTP_TOKEN}",
        "Content-Type": "application/json",
        "X-Afk-Task-Id": str(task.id),
        "X-Afk-Task-Token": str(task.token),
    }
    took = []
    for _ in range(n):
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/hooks/claude", body=body, headers=headers)
        answer = conn.getresponse()
        answer.read()
        conn.close()
        assert answer.status == 200, answer.status
        took.append((time.perf_counter() - started) * 1000)
    return took


class _Floor(BaseHTTPRequestHandler):
    """Answers every hook ``{}`` at once, on connections kept alive: what
    Claude Code's HTTP hooks cost with nothing behind them."""

    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # (one write a reply)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def floor_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Floor)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def claude_sessions(
    env: dict[str, str], socket_path: str, http_port: int, folder: Path, sessions: int, calls: int
) -> str:
    """Sessions of the real client, interleaved: no hooks, command hooks
    through the service, HTTP hooks, HTTP hooks answered by a server that
    does nothing (the client's own cost), command hooks with no service. Each
    at two lengths, ``calls`` and three times as many Bash calls: the time
    added per tool call is read both from the first length alone (what is
    added to a session, over its tool calls) and from the slope between the
    two (a tool call's own cost, without what a session pays once: its
    SessionStart command, its Stop)."""
    sys.path.insert(0, str(ROOT / "tests"))  # the real client's pin, its scripted API
    claude_code = importlib.import_module("helpers.claude_code")
    MessagesAPI = importlib.import_module("helpers.messages_api").MessagesAPI
    VERSION = claude_code.VERSION

    claude = claude_code.binary()
    if claude is None:
        return (
            f"Claude Code {VERSION} is not fetched (python3 tests/helpers/claude_code.py install): "
            "no sessions measured.\n"
        )
    home = folder / "claude-home"
    home.mkdir()

    def install(name: str, *transport: str, port: int = http_port) -> Path:
        cwd = folder / name
        cwd.mkdir()
        installed = subprocess.run(
            [AFK, "hooks", "claude", *transport, "--install",
             str(cwd / ".claude" / "settings.json")],
            env={**env, "AFK_HOOK_HTTP": f"127.0.0.1:{port}", "AFK_HOOK_TOKEN": HTTP_TOKEN},
            capture_output=True,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        return cwd

    bare = folder / "bare"
    bare.mkdir()
    hooked = install("hooked")
    over_http = install("over-http", "--transport", "http")
    lengths = (calls, 3 * calls)
    with floor_server() as floor_port:
        variants = {
            "without afk's hooks": (bare, {}),
            "command hooks, through the service": (hooked, {"AFK_HOOK_SOCKET": socket_path}),
            "HTTP hooks (SessionStart a command)": (
                over_http,
                {"AFK_HOOK_SOCKET": socket_path, "AFK_HOOK_TOKEN": HTTP_TOKEN},
            ),
            "HTTP hooks to a server answering `{}` at once (the client's own cost)": (
                install("floor", "--transport", "http", port=floor_port),
                {"AFK_HOOK_SOCKET": socket_path, "AFK_HOOK_TOKEN": HTTP_TOKEN},
            ),
            "command hooks, no service": (hooked, {"AFK_HOOK_SOCKET": "off"}),
        }
        took: dict[tuple[str, int], list[float]] = {
            (name, n): [] for name in variants for n in lengths
        }
        api = MessagesAPI()
        try:
            for _ in range(sessions):
                for n in lengths:
                    for name, (cwd, extra) in variants.items():
                        api.script = [*["bash:true"] * n, "text:done"]
                        client = {
                            **env,
                            **extra,
                            "HOME": str(home),
                            "ANTHROPIC_BASE_URL": api.url,
                            "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key",
                            "CLAUDE_CODE_MAX_RETRIES": "1",
                            "DISABLE_AUTOUPDATER": "1",
                            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                        }
                        started = time.perf_counter()
                        done = subprocess.run(
                            [str(claude), "-p", "go", "--allowedTools", "Bash"],
                            env=client,
                            cwd=cwd,
                            capture_output=True,
                            timeout=600,
                        )
                        took[(name, n)].append(time.perf_counter() - started)
                        assert done.returncode == 0, done.stdout + done.stderr
        finally:
            api.close()
    median = {key: statistics.median(seconds) for key, seconds in took.items()}
    short, long = lengths
    bare_name = "without afk's hooks"
    lines = [
        f"Real Claude Code {VERSION} sessions of {short} and of {long} Bash calls (median of "
        f"{sessions} each, interleaved):",
        "",
        f"| session | median s, {short} calls | median s, {long} calls "
        f"| added per tool call ({short} calls) | added per tool call (the slope) |",
        "|---|---|---|---|---|",
    ]
    for name in variants:
        s, s3 = median[(name, short)], median[(name, long)]
        added = slope = ""
        if name != bare_name:
            b, b3 = median[(bare_name, short)], median[(bare_name, long)]
            added = f"{(s - b) / short * 1000:.0f} ms"
            slope = f"{((s3 - s) - (b3 - b)) / (long - short) * 1000:.1f} ms"
        lines.append(f"| {name} | {s:.2f} | {s3:.2f} | {added} | {slope} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
