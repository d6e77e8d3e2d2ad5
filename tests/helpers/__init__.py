"""Helpers the tests share (no test imports another test): the CLI as a
subprocess (:class:`Afk`), plain SQL for setting up and checking
(:class:`Sql`), waiting for a condition (:func:`poll`), threads started at
once, and the system tools a test needs. The other modules here: the
watchdog service (``service``), the browser, the HTTP and SMTP receivers,
the PgBouncer/Patroni topology, the scripted APIs of the real agents and
their pinned CLIs, and the stand-in agents run as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

#: this folder, the tests' and the repository's
HELPERS = Path(__file__).parent
TESTS = HELPERS.parent
ROOT = TESTS.parent


class Sql:
    """Plain SQL on the test's database, for setting up and checking."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)

    def __call__(self, statement: str, *params: Any) -> list[dict[str, Any]]:
        cur = self.conn.execute(statement, params or None)
        return cur.fetchall() if cur.description else []

    def one(self, statement: str, *params: Any) -> Any:
        rows = self(statement, *params)
        assert len(rows) == 1, rows
        return next(iter(rows[0].values()))

    def fingerprint(self) -> str:
        """A digest of every queue table, to prove that a call changed nothing."""
        return str(
            self.one(
                "SELECT md5(concat_ws('|',"
                " (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM afk_task t),"
                " (SELECT string_agg(e::text, ',' ORDER BY e.id) FROM afk_task_event e),"
                " (SELECT string_agg(a::text, ',' ORDER BY a.agent_id) FROM afk_agent a)))"
            )
        )

    def expire(self, task_id: Any) -> None:
        """Back-date a lease instead of sleeping past it."""
        self("UPDATE afk_task SET lease_until = now() - interval '1 second' WHERE id = %s", task_id)


class Afk:
    """The afk CLI as a real subprocess against the test's database."""

    def __init__(self, dsn: str, tmp: Path | None = None) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AFK_", "CLAUDE_"))}
        self.env["AFK_DSN"] = dsn
        if tmp is not None:  # what the hooks keep per session stays with the test
            self.env["TMPDIR"] = str(tmp)
            # (not in the user's runtime folder, which every test would share)
            self.env["XDG_RUNTIME_DIR"] = str(tmp / "no-runtime-folder")

    @staticmethod
    def command(*args: str) -> list[str]:
        return [sys.executable, "-m", "watchdog.cli", *args]

    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            input=input,
            text=True,
            capture_output=True,
            env={**self.env, **(env or {})},
            timeout=60,
        )

    def json(self, *args: str, **kw: Any) -> Any:
        proc = self(*args, **kw)
        assert proc.returncode == 0, (proc.returncode, proc.stderr)
        return json.loads(proc.stdout)

    #: the watchdog service's hook socket, when the hooks go through it
    socket: str | None = None

    def hook(
        self, *args: str, input: bytes, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """`afk hook` as an agent runs it: the entry point of the ``afk``
        script. With the service answering hooks (:func:`afk_through`), each
        run meant for its database must be answered by it: the process must
        not have loaded the command line (and with it the database driver)."""
        full = {**self.env, **(env or {})}
        command = [sys.executable, "-m", "watchdog", "hook", *args]
        if self.socket is None:
            return subprocess.run(command, input=input, capture_output=True, env=full, timeout=30)
        command[1:1] = ["-X", "importtime"]
        proc = subprocess.run(command, input=input, capture_output=True, env=full, timeout=30)
        lines = proc.stderr.decode(errors="replace").splitlines(keepends=True)
        loaded = {
            line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")
        }
        proc.stderr = "".join(
            line for line in lines if not line.startswith("import time:")
        ).encode()
        from watchdog.agents.hooklink import unattended

        ours = (
            full.get("AFK_DSN") == self.env["AFK_DSN"]
            and full.get("AFK_HOOK_SOCKET") == self.socket
            and not unattended(input)  # (a StopFailure never waits on the service)
        )
        if ours:
            assert "watchdog.cli" not in loaded and "psycopg" not in loaded, (
                "the service did not answer this hook",
                proc.stderr,
            )
        return proc


def require_tool(name: str) -> str:
    """The path of a system tool a test needs. Missing in CI is a failure
    (.ci/run installs it); missing on a developer's machine, a skip."""
    import shutil

    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing in CI: .ci/run must install it")
        pytest.skip(f"{name} is not installed here")
    return path


def run_threads(target: Callable[[int], Any], n: int, timeout: float = 60) -> None:
    """Run target(0) … target(n-1) in threads at once; wait for them all."""
    import threading

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)


def poll(condition: Callable[[], Any], timeout: float = 30, interval: float = 0.05) -> Any:
    """Wait until condition() is truthy; return its value."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def require_cli(name: str, version: str, found: Path | None, module: str) -> str:
    """The path of a pinned agent CLI (``tests/helpers/MODULE.py`` fetches
    it). Missing in CI is a failure (.ci/run fetches it); here, a skip."""
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} {version} is missing in CI: .ci/run must fetch it")
        pytest.skip(f"{name} {version} is not fetched: python3 tests/helpers/{module}.py install")
    return str(found)


def forbid(monkeypatch: pytest.MonkeyPatch, tier: str, *, sockets: bool) -> None:
    """Make a test of ``tier`` fail when it starts a process (and, with
    ``sockets``, when it opens a socket or connects to a database), naming
    what it did: such a test belongs a tier up."""
    import socket

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*_: Any, **__: Any) -> Any:
            pytest.fail(f"this {tier} test {what}: move it to a tier that may", pytrace=False)

        return refused

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("started a process"))
    monkeypatch.setattr(os, "fork", refuse("forked"))
    if sockets:
        monkeypatch.setattr(socket.socket, "connect", refuse("opened a connection"))
        monkeypatch.setattr(socket.socket, "bind", refuse("listened on a socket"))
        monkeypatch.setattr(psycopg.Connection, "connect", refuse("connected to a database"))
        monkeypatch.setattr(psycopg, "connect", refuse("connected to a database"))
