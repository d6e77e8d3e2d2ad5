"""A :copy statement is run by Database.copy only, against a real database."""

from __future__ import annotations

import pytest

from watchdog import sql


def test_a_copy_statement_is_run_by_copy_only(dsn):
    from watchdog.db import Database

    assert sql.parse("-- name: x :copy\nCOPY t FROM STDIN")["x"].returns == "copy"
    db = Database(dsn)
    with db.transaction() as conn, pytest.raises(TypeError, match="is :row, not :copy"):
        db.copy("enqueue_reserve", [], conn)
    db.close()
