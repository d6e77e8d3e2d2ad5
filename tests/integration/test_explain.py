"""The claim and the reclaim stay on their partial indexes as done rows pile
up, and from the start: on a queue just filled, where every task is todo."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from watchdog import sql as queries


def plan_of(dsn: str, name: str, params: dict[str, object], generic: bool = False) -> str:
    """The plan of a statement: custom (for these values), or generic (what
    a prepared statement may switch to after five runs)."""
    with psycopg.connect(dsn) as conn:
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        statement = queries.checked(name, params)
        row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
        conn.rollback()
    return json.dumps(row[0])


STEP = {"id": None, "token": None, "ok": None, "result": None, "error": None, "account": None,
        "run": None, "labels": None, "profiles": None}  # fmt: skip
STEP |= {"backoff_base": 30, "backoff_cap": 3600, "lease_seconds": 60}


def fill(sql) -> None:
    sql("""INSERT INTO afk_task (agent_id, ordinal, title, state)
           SELECT 'agent-' || (i % 50), i, 't', 'done' FROM generate_series(1, 50000) i""")
    sql("""INSERT INTO afk_task (agent_id, ordinal, title, state, lease_until)
           SELECT 'agent-' || (i % 50), 100000 + i, 't',
                  CASE WHEN i % 2 = 0 THEN 'todo' ELSE 'running' END::afk_state,
                  CASE WHEN i % 2 = 1 THEN now() END
             FROM generate_series(1, 200) i""")
    sql("ANALYZE afk_task")


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("finish", [False, True], ids=["claim", "finish-and-claim"])
@pytest.mark.parametrize("account", [None, "max-1"], ids=["no-account", "account"])
def test_claim_uses_its_partial_index(sql, dsn, generic, finish, account):
    fill(sql)
    held = sql("SELECT id, lease_token FROM afk_task WHERE state = 'running' LIMIT 1")[0]
    params = STEP | {"claim": True, "agent_id": "agent-2", "runner": "r", "account": account}
    if finish:
        params |= {
            "id": held["id"],
            "token": held["lease_token"],
            "ok": True,
            "agent_id": None,
            "runner": None,
        }
    plan = plan_of(dsn, "step", params, generic)
    assert "afk_task_claim_idx" in plan
    assert '"Node Type": "Seq Scan"' not in plan


def fill_fresh(sql) -> None:
    """A backlog just enqueued and analyzed (as autovacuum would after the
    fill): no task done yet, so the claim index holds every row, and the
    planner's two (agent_id, ordinal) indexes cost the same. A plan made now
    is kept by a prepared statement (a loop's, all night) until the next
    analyze; on the unique index, each claim walks past the agent's tasks
    done since, one heap visit each."""
    sql("""INSERT INTO afk_task (agent_id, ordinal, title)
           SELECT 'agent-' || (i % 4), i, 't' FROM generate_series(1, 4000) i""")
    sql("ANALYZE afk_task")


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("finish", [False, True], ids=["claim", "finish-and-claim"])
def test_claim_uses_its_partial_index_on_a_fresh_backlog(sql, dsn, generic, finish):
    fill_fresh(sql)
    params = STEP | {"claim": True, "agent_id": "agent-2", "runner": "r"}
    if finish:
        held = sql("""UPDATE afk_task SET state = 'running', lease_until = now() + interval '1 h',
                             lease_token = 7
                       WHERE agent_id = 'agent-2' AND ordinal = 2 RETURNING id""")[0]
        params |= {"id": held["id"], "token": 7, "ok": True, "agent_id": None, "runner": None}
    plan = plan_of(dsn, "step", params, generic)
    assert "afk_task_claim_idx" in plan
    assert "afk_task_agent_ordinal_key" not in plan


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_batch_claim_uses_its_partial_index_on_a_fresh_backlog(sql, dsn, generic):
    fill_fresh(sql)
    params = {"agent_id": "agent-2", "runner": "r", "limit": 50, "lease_seconds": 60}
    plan = plan_of(dsn, "claim_batch", params, generic)
    assert "afk_task_claim_idx" in plan
    assert "afk_task_agent_ordinal_key" not in plan


def test_reclaim_uses_the_lease_index(sql, dsn):
    fill(sql)
    plan = plan_of(dsn, "reclaim", {"after_id": uuid.UUID(int=0), "batch": 500})
    assert "afk_task_lease_idx" in plan
    assert '"Node Type": "Seq Scan"' not in plan
