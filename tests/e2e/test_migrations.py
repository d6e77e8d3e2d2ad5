"""Migrations: idempotent, safe from two processes at once, and an in-place
upgrade of a table created with the original design's DDL."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import psycopg
from helpers import ROOT
from helpers.schema import ALL, ORIGINAL, versions

from watchdog.db import Database


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
