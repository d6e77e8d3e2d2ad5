-- owner: watchdog/web.py
-- The status pages' statements (watchdog/web.py). Read only; each one
-- statement, bounded, on the partial indexes. The overview's failures and
-- stuck work come from the digest's own statement (digest_data).

-- name: web_overview :many retry
-- One row per agent (the first %(limit)s by name): its waiting backlog and
-- paused count (the claim and paused indexes), the first waiting task's age,
-- and its running tasks with their runner, lease and last checkpoint (the
-- lease index: running rows are as many as the workers).
WITH agents AS (
    SELECT agent_id, next_ordinal - 1 AS enqueued
      FROM afk_agent ORDER BY agent_id LIMIT %(limit)s
), running AS MATERIALIZED (
    -- (read once, not once per agent)
    SELECT id, agent_id, ordinal, title, lease_owner, lease_token, attempts, max_attempts,
           lease_until, checkpoint_at
      FROM afk_task WHERE state = 'running' ORDER BY lease_until LIMIT %(running_limit)s
)
SELECT a.agent_id, a.enqueued,
       (SELECT count(*) FROM afk_task t
         WHERE t.agent_id = a.agent_id AND t.state IN ('todo', 'paused')) AS waiting,
       (SELECT count(*) FROM afk_task t
         WHERE t.agent_id = a.agent_id AND t.state = 'paused') AS paused,
       (SELECT t.created_at FROM afk_task t
         WHERE t.agent_id = a.agent_id AND t.state IN ('todo', 'paused')
         ORDER BY t.ordinal LIMIT 1) AS first_waiting_at,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', r.id, 'title', left(r.title, 300), 'runner', r.lease_owner,
                   'token', r.lease_token, 'attempts', r.attempts,
                   'max_attempts', r.max_attempts,
                   'lease_left', extract(epoch FROM r.lease_until - now()),
                   'since_checkpoint', extract(epoch FROM now() - r.checkpoint_at))
                 ORDER BY r.ordinal), '[]'::jsonb)
          FROM running r WHERE r.agent_id = a.agent_id) AS running,
       now() AS now
  FROM agents a
 ORDER BY a.agent_id;

-- name: web_agent_tasks :many retry
-- One page of an agent's backlog in ordinal order, after %(after)s (keyset
-- paging on the (agent_id, ordinal) index), optionally of one state; one row
-- more than the page says whether there is a next page.
SELECT id, ordinal, left(title, 300) AS title, state::text AS state, attempts, max_attempts,
       lease_owner, lease_until, updated_at, left(last_error, 300) AS last_error
  FROM afk_task
 WHERE agent_id = %(agent_id)s AND ordinal > %(after)s
   AND (%(state)s::text IS NULL OR state::text = %(state)s::text)
 ORDER BY ordinal
 LIMIT %(limit)s + 1;
