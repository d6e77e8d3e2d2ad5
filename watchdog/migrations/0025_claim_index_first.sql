-- The claim scans its own index from a backlog's first night on.
-- afk_task_claim_idx, (agent_id, ordinal) of the todo and paused tasks, and
-- the unique afk_task_agent_ordinal_key (0002), (agent_id, ordinal) of all,
-- cost the planner the same while every task is todo or paused: a backlog
-- just enqueued and analyzed. Of two such indexes the planner takes the one
-- created last, here the unique key, and a prepared claim keeps that plan
-- until the next analyze: each claim then walked past every task of the
-- agent done since, one heap visit each (some 10 % of the benchmark's
-- claim-and-finish loops). Rebuilt here, the claim index is the newer one
-- (seen on PostgreSQL 15 and 18; tests/integration/test_explain.py fails
-- where the planner would take the unique key).
DROP INDEX IF EXISTS afk_task_claim_idx;
CREATE INDEX afk_task_claim_idx ON afk_task (agent_id, ordinal) WHERE state IN ('todo', 'paused');
