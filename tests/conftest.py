"""Fixtures: a real PostgreSQL server, a fresh database per test.

The server is the embedded one (started in a temporary folder for the test
session) unless ``AFK_TEST_DSN`` names another; the tests need to create
databases there. The schema is migrated once into a template database, and
every test gets its own clone of it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers import Afk, Sql
from psycopg.conninfo import make_conninfo

from watchdog import Queue, QueueSettings, embedded
from watchdog.db import Database

TEMPLATE = f"afk_test_template_{os.getpid()}"
_counter = itertools.count()


#: the tiers, one folder each: tests/unit, tests/integration, tests/e2e
TIERS = ("unit", "integration", "e2e")


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
    """Each test is marked with its folder's tier, so that ``-m unit`` runs
    tests/unit and nothing else. What a tier may do is guarded by its own
    folder's conftest.py, not guessed from the fixtures a test asks for."""
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier not in TIERS:
            raise pytest.UsageError(
                f"{item.nodeid}: a test lives in tests/unit, integration or e2e"
            )
        item.add_marker(getattr(pytest.mark, tier))


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


@pytest.fixture
def sql(dsn: str) -> Iterator[Sql]:
    s = Sql(dsn)
    yield s
    s.conn.close()


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
    from helpers.service import answering_hooks

    service = answering_hooks(dsn)
    try:
        a.socket = a.env["AFK_HOOK_SOCKET"] = service.socket
        yield a
    finally:
        service.cleanup()


@pytest.fixture
def receiver():
    """A real HTTP server on 127.0.0.1 recording what it is sent (tests/helpers/receiver.py)."""
    from helpers.receiver import Receiver

    r = Receiver()
    yield r
    r.close()
