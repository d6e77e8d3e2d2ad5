-- owner: watchdog/jobs.py
-- The watchdog jobs' own statements (reclaim is the queue's).
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: gauges :row retry
-- Everything the metrics need, in one statement, through the partial indexes
-- only, so its cost does not grow with the done rows (see afk_state_counts).
-- Per-agent counts cover the open states, for the agents with most open tasks.
WITH open AS (
    SELECT agent_id, state FROM afk_task WHERE state IN ('todo', 'paused')
    UNION ALL
    SELECT agent_id, state FROM afk_task WHERE state = 'running'
    UNION ALL
    SELECT agent_id, state FROM afk_task WHERE state = 'failed'
)
SELECT
    (SELECT jsonb_object_agg(c.state, c.n) FROM afk_state_counts(%(exact_below)s) c) AS states,
    (SELECT coalesce(jsonb_agg(jsonb_build_array(agent_id, state, n)), '[]'::jsonb)
       FROM (SELECT agent_id, state::text AS state, count(*) AS n
               FROM open
              WHERE agent_id IN (SELECT agent_id FROM open GROUP BY agent_id
                                  ORDER BY count(*) DESC, agent_id LIMIT %(top_agents)s)
              GROUP BY agent_id, state) a
    ) AS agents,
    (SELECT count(*) FROM afk_task WHERE state = 'running' AND lease_until < now())
        AS expired_leases,
    (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
       FROM afk_task WHERE state IN ('todo', 'paused') AND state = 'todo') AS oldest_todo_age,
    (SELECT coalesce(extract(epoch FROM now() - min(coalesce(checkpoint_at, updated_at))), 0)::float8
       FROM afk_task WHERE state = 'running') AS since_checkpoint,
    (SELECT count(*) FROM afk_task
      WHERE state = 'failed' AND updated_at >= now() - make_interval(secs => %(poison_window)s))
        AS poison_pills,
    -- a session holding a snapshot keeps dead rows alive, and every claim then
    -- wades through them (only sessions this role may see are counted)
    (SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0)::float8
       FROM pg_stat_activity
      WHERE datname = current_database() AND backend_xmin IS NOT NULL
        AND pid <> pg_backend_pid()) AS oldest_snapshot_age,
    -- the accounts parked now, and the agent runs that ended since the last
    -- look (%(runs_since)s, NULL at the first: the counter starts at 0)
    (SELECT coalesce(jsonb_agg(jsonb_build_array(account, kind, extract(epoch FROM until))
                               ORDER BY account), '[]'::jsonb)
       FROM afk_account_park
      WHERE cleared_at IS NULL AND (until IS NULL OR until > now())) AS parked,
    -- the tasks waiting to retry after a spent attempt, for the agents with
    -- most (migration 0041's index; `afk status` counts the same)
    (SELECT coalesce(jsonb_agg(jsonb_build_array(agent_id, n) ORDER BY n DESC, agent_id),
                     '[]'::jsonb)
       FROM (SELECT agent_id, count(*) AS n FROM afk_task
              WHERE state IN ('todo', 'paused') AND attempts > 0
                AND run_after IS DISTINCT FROM afk_held()
              GROUP BY agent_id ORDER BY count(*) DESC, agent_id LIMIT %(top_agents)s) r)
        AS retrying,
    (SELECT coalesce(jsonb_object_agg(outcome, n), '{}'::jsonb)
       FROM (SELECT outcome, count(*) AS n FROM afk_run
              WHERE ended_at > coalesce(%(runs_since)s::timestamptz, now()) AND ended_at <= now()
              GROUP BY outcome) r) AS runs,
    now() AS now;

-- name: poison :many retry
-- Tasks that became failed within the window.
SELECT * FROM afk_task
 WHERE state = 'failed' AND updated_at >= now() - make_interval(secs => %(window)s)
 ORDER BY updated_at, id
 LIMIT %(limit)s;
