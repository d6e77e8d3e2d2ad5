"""Two workspace makers racing for a port block never share one (threads
against one real database, one holding its pick's transaction open)."""

from __future__ import annotations

from typing import Any

from helpers import poll

from watchdog import NewTask


def test_two_makers_racing_for_a_port_block_never_share_one(queue, dsn, sql):
    """The block is picked under a lock: a maker that waited for it must see
    the block the holder took (the CI once saw two worktrees on 20000)."""
    import threading

    import psycopg
    from psycopg.rows import dict_row

    from watchdog import sql as queries

    ids = [str(t) for t in queue.enqueue("w", [NewTask("a"), NewTask("b")]).enqueued]
    statement = queries.query("workspace_made")

    def params(task_id: str) -> dict[str, Any]:
        return {
            "id": task_id,
            "repo": "/r",
            "branch": f"b-{task_id}",
            "path": f"/p/{task_id}",
            "base_sha": "0" * 40,
            "ports": 10,
            "first_port": 20000,
            "last_port": 59990,
            "stacked_on": None,
        }

    holder = psycopg.connect(dsn, row_factory=dict_row)  # a transaction left open
    first = holder.execute(statement, params(ids[0])).fetchone()
    got: dict[str, Any] = {}

    def second() -> None:
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            got.update(conn.execute(statement, params(ids[1])).fetchone())

    waiter = threading.Thread(target=second)
    waiter.start()
    poll(
        lambda: sql.one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    )
    holder.commit()  # the first block is taken now; the waiter goes on
    waiter.join(30)
    holder.close()
    assert first["port"] == 20000 and got["port"] == 20010, (first, got)
