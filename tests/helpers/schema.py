"""The migrations' tests share these: every migration's name, the original
design's DDL, and a comparable picture of a schema."""

from __future__ import annotations

import psycopg

from helpers import TESTS
from watchdog import sql as queries

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
