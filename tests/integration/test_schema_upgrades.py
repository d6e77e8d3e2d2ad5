"""Migrations in-process: idempotent, and an in-place upgrade of a table
created with the original design's DDL, or by an earlier version (two
processes migrating at once, and the checked-in schema's dump, are in
tests/e2e/test_migrations.py)."""

from __future__ import annotations

import psycopg
import pytest
from helpers import TESTS, Sql
from helpers.schema import ALL, ORIGINAL, schema_of
from psycopg.rows import dict_row

from watchdog import NewTask, Queue
from watchdog.db import Database


def test_migrate_is_idempotent(empty_dsn):
    db = Database(empty_dsn)
    first = db.migrate()
    assert first == ALL and len(ALL) >= 3
    assert db.migrate() == []
    assert db.schema_version() == len(ALL)
    db.close()


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


def test_running_rows_without_a_lease_come_back_after_migrate(empty_dsn):
    design = (TESTS / "fixtures" / "original_design.sql").read_text()
    raw = Sql(empty_dsn)
    raw(design)
    raw(
        "INSERT INTO afk_task (agent_id, ordinal, title, state, attempts) "
        "VALUES ('a', 1, 'stuck', 'running', 1)"
    )
    from watchdog.db import Database

    Database(empty_dsn).migrate()
    row = raw("SELECT state::text AS state, lease_until FROM afk_task")[0]
    assert row["state"] == "paused" and row["lease_until"] is None
    reason = raw("SELECT reason FROM afk_task_event ORDER BY id DESC LIMIT 1")[0]["reason"]
    assert "no lease" in reason
    with pytest.raises(Exception, match="lease"):
        raw("UPDATE afk_task SET state = 'running', lease_until = NULL")
    raw.conn.close()


def test_an_upgrade_marks_the_tasks_that_had_a_run(empty_dsn):
    """Migration 0024: a finish looks for an open run only on a task once
    claimed under an account (had_run); the upgrade marks those that were,
    so that a run open across the upgrade still ends with its task."""
    db = Database(empty_dsn)
    db.migrate()
    q = Queue.connect(empty_dsn)
    q.enqueue("a", [NewTask("supervised"), NewTask("api")])
    supervised = q.claim("a", runner="loop-1", account="acct")
    api = q.claim("a", runner="worker")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # as versions before 0024 left it
        conn.execute("ALTER TABLE afk_task DROP COLUMN had_run")
        conn.execute("DELETE FROM afk_schema_version WHERE version >= 24")
    assert db.migrate() == [n for n in ALL if int(n[:4]) >= 24]
    q.done(supervised)
    q.done(api)
    with psycopg.connect(empty_dsn, row_factory=dict_row) as conn:
        rows = conn.execute("SELECT title, had_run FROM afk_task ORDER BY title").fetchall()
        assert [(r["title"], r["had_run"]) for r in rows] == [("api", False), ("supervised", True)]
        run = conn.execute("SELECT outcome, ended_at FROM afk_run").fetchone()
        assert run is not None and run["outcome"] == "done" and run["ended_at"] is not None
    q.close()
    db.close()


def test_an_upgrade_makes_a_cursor_agent_profile_a_cursor_one(empty_dsn):
    """Migration 0039: `afk profile add -- cursor-agent` recorded the
    program's name as the harness, which no `--harness cursor` task fits."""
    db = Database(empty_dsn)
    db.migrate()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for name, harness in (("cur", "cursor-agent"), ("cl", "claude")):
            conn.execute(
                "INSERT INTO afk_profile (name, harness, command, account) "
                "VALUES (%s, %s, ARRAY['x'], %s)",
                (name, harness, name),
            )
        conn.execute("DELETE FROM afk_schema_version WHERE version >= 39")
    assert db.migrate() == [n for n in ALL if int(n[:4]) >= 39]
    with psycopg.connect(empty_dsn) as conn:
        got = conn.execute("SELECT name, harness FROM afk_profile ORDER BY name").fetchall()
    assert got == [("cl", "claude"), ("cur", "cursor")]
    db.close()
