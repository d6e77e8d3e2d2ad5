"""Migrations: idempotent, safe from two processes at once, and an in-place
upgrade of a table created with the original design's DDL."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import psycopg
from helpers import ROOT, TESTS
from psycopg.rows import dict_row

from watchdog import NewTask, Queue
from watchdog import sql as queries
from watchdog.db import Database

ALL = [name for _, name, _ in queries.migrations()]

ORIGINAL = (TESTS / "fixtures" / "original_design.sql").read_text()

SCHEMA = """
SELECT 'column' AS kind, table_name || '.' || column_name || ' ' || data_type || ' '
       || udt_name || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS what
  FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'constraint', conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'type', t.typname || ' ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
  FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname
UNION ALL
SELECT 'trigger', tgrelid::regclass || ' ' || tgname FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'sequence', sequence_name FROM information_schema.sequences
 WHERE sequence_schema = 'public'
ORDER BY 1, 2
"""


def schema_of(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return [(r[0], r[1]) for r in conn.execute(SCHEMA)]


def versions(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM afk_schema_version ORDER BY 1")]


def test_migrate_is_idempotent(empty_dsn):
    db = Database(empty_dsn)
    first = db.migrate()
    assert first == ALL and len(ALL) >= 3
    assert db.migrate() == []
    assert db.schema_version() == len(ALL)
    db.close()


def test_two_processes_migrate_at_once(empty_dsn):
    cmd = [sys.executable, "-m", "watchdog.cli", "--dsn", empty_dsn, "migrate"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    applied = sorted(len(__import__("json").loads(out)["applied"]) for out, _ in outs)
    assert applied == [0, len(ALL)]
    assert versions(empty_dsn) == list(range(1, len(ALL) + 1))


def test_upgrade_of_the_original_table_keeps_every_row(empty_dsn, template_dsn):
    with psycopg.connect(empty_dsn, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(ORIGINAL)
        # rows as the original design leaves them, including the duplicate
        # ordinals its unlocked MAX(ordinal)+1 hands out under concurrency
        conn.execute("""
            INSERT INTO afk_task (agent_id, ordinal, title, state, checkpoint, idem_key,
                                  attempts, lease_until, last_error, created_at)
            VALUES ('a', 1, 'one', 'done', '{"s": 1}', 'k1', 1, NULL, NULL, now() - interval '3 h'),
                   ('a', 2, 'two', 'running', '{"s": 2}', 'k2', 1, now() + interval '1 h',
                    NULL, now() - interval '2 h'),
                   ('a', 2, 'two again', 'todo', '{}', 'k3', 0, NULL, NULL, now() - interval '1 h'),
                   ('a', 3, 'three', 'failed', '{}', 'k4', 5, NULL, 'boom', now()),
                   ('b', 1, 'other', 'paused', '{"x": [1]}', NULL, 2, NULL, NULL, now())
        """)
        before = conn.execute(
            "SELECT id, agent_id, title, state::text, checkpoint, idem_key, attempts, last_error"
            " FROM afk_task ORDER BY id"
        ).fetchall()

    q = Queue.connect(empty_dsn)
    assert q.migrate() == ALL

    with psycopg.connect(empty_dsn, row_factory=dict_row) as conn:
        after = conn.execute(
            "SELECT id, agent_id, title, state::text, checkpoint, idem_key, attempts, last_error"
            " FROM afk_task ORDER BY id"
        ).fetchall()
        ordinals = conn.execute(
            "SELECT title, ordinal FROM afk_task WHERE agent_id = 'a' ORDER BY ordinal"
        ).fetchall()
        imported = conn.execute(
            "SELECT count(*) AS n FROM afk_task_event WHERE reason = 'imported'"
        ).fetchone()
    assert after == before
    assert [r["title"] for r in ordinals] == ["one", "two", "two again", "three"]
    assert len({r["ordinal"] for r in ordinals}) == 4
    assert imported["n"] == 5
    assert schema_of(empty_dsn) == schema_of(template_dsn)

    # and the upgraded queue works: new ordinals continue after the old ones
    q.enqueue("a", [NewTask("four", key="k5")])
    assert q.enqueue("a", [NewTask("dup", key="k1")]).duplicates == ["k1"]
    task = q.claim("a", runner="r")
    assert task is not None and task.title == "two again"
    assert q.status("a")["todo"] == 1
    with psycopg.connect(empty_dsn) as conn:
        assert (
            conn.execute("SELECT max(ordinal) FROM afk_task WHERE agent_id = 'a'").fetchone()[0]
            == 5
        )
    q.close()


# -- the schema of record, and the enum's name --------------------------------

SCHEMA_SQL = ROOT / "schema.sql"


def dump(dsn: str) -> str:
    """pg_dump --schema-only, without what varies between runs and servers
    (comments, SET lines, pg_dump 18's \\restrict key, blank lines, and the
    column versions Debian's PostgreSQL 15.20 keeps as a pg_attver option:
    the server's own bookkeeping, not the schema we made)."""
    from watchdog.embedded import bin_dir

    out = subprocess.run(
        [
            str(bin_dir() / "pg_dump"),
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            "--exclude-table=afk_schema_version",
            "--dbname",
            dsn,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    keep = []
    for line in out.stdout.splitlines():
        if not line.strip() or line.startswith(
            ("--", "SET ", "SELECT pg_catalog.", "\\restrict", "\\unrestrict")
        ):
            continue
        if ATTVER.fullmatch(line.strip()):
            continue
        keep.append(line.rstrip())
    return "\n".join(keep) + "\n"


#: ALTER TABLE ONLY public.t ALTER COLUMN c SET (pg_attver=2406285936);
ATTVER = re.compile(r"ALTER TABLE ONLY \S+ ALTER COLUMN \S+ SET \(pg_attver=\d+\);")


def test_a_fresh_install_is_the_checked_in_schema(empty_dsn):
    """schema.sql is what `afk migrate` makes of an empty database. To
    refresh it after a migration: AFK_WRITE_SCHEMA=1 pytest -k checked_in_schema."""
    Database(empty_dsn).migrate()
    fresh = dump(empty_dsn)
    if os.environ.get("AFK_WRITE_SCHEMA"):
        SCHEMA_SQL.write_text(
            "-- The schema `afk migrate` makes of an empty database (pg_dump "
            "--schema-only, normalised).\n-- Checked by "
            "tests/e2e/test_migrations.py; do not edit by hand.\n" + fresh
        )
    recorded = (
        "\n".join(line for line in SCHEMA_SQL.read_text().splitlines() if not line.startswith("--"))
        + "\n"
    )
    assert fresh == recorded


def test_an_upgrade_of_the_design_table_is_the_checked_in_schema(empty_dsn):
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ORIGINAL.replace("task_state", "afk_state"))
    Database(empty_dsn).migrate()
    recorded = (
        "\n".join(line for line in SCHEMA_SQL.read_text().splitlines() if not line.startswith("--"))
        + "\n"
    )
    assert dump(empty_dsn) == recorded


def test_a_design_table_keeps_its_afk_state_type(empty_dsn):
    """A table made by hand from the design names its enum afk_state: the
    upgrade leaves that type alone, so the owner's own SQL still casts to it."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ORIGINAL.replace("task_state", "afk_state"))
        oid = conn.execute("SELECT 'afk_state'::regtype::oid").fetchone()[0]
    Database(empty_dsn).migrate()
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT 'afk_state'::regtype::oid").fetchone()[0] == oid
        assert (
            conn.execute(
                "SELECT count(*) FROM afk_task WHERE state = 'todo'::afk_state"
            ).fetchone()[0]
            == 0
        )
        assert conn.execute("SELECT to_regtype('afk_task_state')").fetchone()[0] is None


def test_an_install_by_an_earlier_version_gets_the_designs_name_back(empty_dsn):
    db = Database(empty_dsn)
    db.migrate()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # as versions before 0011 left it
        conn.execute("ALTER TYPE afk_state RENAME TO afk_task_state")
        conn.execute("DELETE FROM afk_schema_version WHERE version >= 11")
    assert db.migrate() == [n for n in ALL if int(n[:4]) >= 11]
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regtype('afk_state') IS NOT NULL").fetchone()[0]
        assert conn.execute("SELECT to_regtype('afk_task_state')").fetchone()[0] is None
    q = Queue.connect(empty_dsn)
    q.enqueue("a", [NewTask("works")])
    assert q.claim("a", runner="r") is not None
    q.close()
    db.close()
