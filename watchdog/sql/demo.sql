-- owner: watchdog/demo.py
-- The demo's clean-up.
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: forget_agent :exec retry
-- Deletes an agent's whole backlog (its history and effects go with it, ON
-- DELETE CASCADE) and its ordinal counter: what `afk demo` leaves behind.
WITH gone AS (
    DELETE FROM afk_task WHERE agent_id = %(agent_id)s RETURNING 1
), counter AS (
    DELETE FROM afk_agent WHERE agent_id = %(agent_id)s
)
SELECT count(*) AS n FROM gone;
