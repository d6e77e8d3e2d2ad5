"""Fixtures: a real PostgreSQL server, a fresh database per test.

The server is the embedded one (started in a temporary folder for the test
session) unless ``AFK_TEST_DSN`` names another; the tests need to create
databases there. The schema is migrated once into a template database, and
every test gets its own clone of it.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from watchdog import Queue, QueueSettings, embedded
from watchdog.db import Database

TEMPLATE = f"afk_test_template_{os.getpid()}"
_counter = itertools.count()


#: fixtures that mean a database, and ones that mean a real subprocess
DATABASE_FIXTURES = {
    "dsn",
    "server_dsn",
    "empty_dsn",
    "other_dsn",
    "template_dsn",
    "queue",
    "sql",
}
PROCESS_FIXTURES = {"afk", "afk_through"}


#: free room a tmpfs needs before the run's temporary files go there
TMPFS_ROOM = 4 << 30


def pytest_configure(config: pytest.Config) -> None:
    """The run's temporary files (the test servers' data, ``tmp_path``, the
    clusters') go to /dev/shm when it is a tmpfs with room, unless TMPDIR
    says where. Each test's database is a fresh copy of the template, about a
    thousand files; on ext4 creating them cost some 200 ms of kernel time a
    test, a fifth of the suite's CPU (measured: 60 empty tests took 15.5 s of
    CPU on ext4, 3.7 s on tmpfs). Subprocesses inherit TMPDIR."""
    if os.environ.get("TMPDIR"):
        return
    shm = Path("/dev/shm")
    if not (shm.is_dir() and _is_tmpfs(shm) and shutil.disk_usage(shm).free > TMPFS_ROOM):
        return
    base = shm / f"afk-tests-{os.geteuid()}"
    base.mkdir(mode=0o755, exist_ok=True)
    os.environ["TMPDIR"] = str(base)
    tempfile.tempdir = str(base)


def _is_tmpfs(path: Path) -> bool:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    return any(line.split()[1:3] == [str(path), "tmpfs"] for line in mounts)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers: ``e2e`` (subprocesses, services, browsers, system tools:
    marked by the module, or implied by the ``afk`` fixture), else
    ``integration`` (a database, in-process), else ``unit``. Each tier runs
    alone with ``-m``."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("e2e") or names & PROCESS_FIXTURES:
            item.add_marker(pytest.mark.e2e)
        elif names & DATABASE_FIXTURES:
            item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)


def with_db(dsn: str, dbname: str) -> str:
    return make_conninfo(dsn, dbname=dbname)


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """A DSN to the server's maintenance database."""
    given = os.environ.get("AFK_TEST_DSN")
    if given:
        yield given
        return
    home = Path(tempfile.mkdtemp(prefix="afk-test-"))
    info = embedded.ensure_running(home)
    with psycopg.connect(info.dsn("postgres"), autocommit=True) as conn:
        # a throwaway server, removed after the run: no fsync (a test database
        # is created and dropped per test, and each drop syncs). A crash of
        # the server itself still loses nothing; only one of the machine would.
        conn.execute("ALTER SYSTEM SET fsync = off")
        # each test's database is WAL-logged as it is copied (8 MB): recycle
        # the WAL sooner than the default 1 GB, which may be memory (above)
        conn.execute("ALTER SYSTEM SET max_wal_size = '256MB'")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield info.dsn("postgres")
    finally:
        embedded.stop(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def template_dsn(server_dsn: str) -> Iterator[str]:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    dsn = with_db(server_dsn, TEMPLATE)
    db = Database(dsn)
    db.migrate()
    db.close()
    yield dsn
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')


def fresh_database(server_dsn: str, template: str | None) -> tuple[str, str]:
    name = f"afk_test_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        suffix = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{suffix}')
    return name, with_db(server_dsn, name)


def drop_database(server_dsn: str, name: str) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A fresh, migrated database for this test."""
    name, dsn = fresh_database(server_dsn, TEMPLATE)
    yield dsn
    drop_database(server_dsn, name)


@pytest.fixture
def other_dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A second fresh, migrated database, for a test about two."""
    name, dsn = fresh_database(server_dsn, TEMPLATE)
    yield dsn
    drop_database(server_dsn, name)


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database with no schema at all."""
    name, dsn = fresh_database(server_dsn, None)
    yield dsn
    drop_database(server_dsn, name)


SETTINGS = QueueSettings(backoff_base_seconds=30, backoff_cap_seconds=3600)


@pytest.fixture
def queue(dsn: str) -> Iterator[Queue]:
    q = Queue.connect(dsn, settings=SETTINGS)
    yield q
    q.close()


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


@pytest.fixture
def sql(dsn: str) -> Iterator[Sql]:
    s = Sql(dsn)
    yield s
    s.conn.close()


class Afk:
    """The afk CLI as a real subprocess against the test's database."""

    def __init__(self, dsn: str, tmp: Path | None = None) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AFK_", "CLAUDE_"))}
        self.env["AFK_DSN"] = dsn
        if tmp is not None:  # what the hooks keep per session stays with the test
            self.env["TMPDIR"] = str(tmp)

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
        ours = (
            full.get("AFK_DSN") == self.env["AFK_DSN"]
            and full.get("AFK_HOOK_SOCKET") == self.socket
        )
        if ours:
            assert "watchdog.cli" not in loaded and "psycopg" not in loaded, (
                "the service did not answer this hook",
                proc.stderr,
            )
        return proc


@pytest.fixture
def afk(dsn: str, tmp_path: Path) -> Afk:
    return Afk(dsn, tmp_path)


@pytest.fixture(params=["direct", "through the service"])
def afk_through(request: pytest.FixtureRequest, dsn: str, tmp_path: Path) -> Iterator[Afk]:
    """:func:`afk`, whose hooks run twice: straight against the database, and
    answered by a real watchdog service (the fast path)."""
    a = Afk(dsn, tmp_path)
    if request.param == "direct":
        yield a
        return
    from service_helpers import Service

    service = Service(dsn)
    try:
        poll(
            lambda: Path(service.socket).is_socket() or service.proc.poll() is not None,
            timeout=60,
        )
        assert Path(service.socket).is_socket(), service.log()
        a.socket = a.env["AFK_HOOK_SOCKET"] = service.socket
        yield a
    finally:
        service.cleanup()


@pytest.fixture
def receiver():
    """A real HTTP server on 127.0.0.1 recording what it is sent (tests/receiver.py)."""
    from receiver import Receiver

    r = Receiver()
    yield r
    r.close()


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
