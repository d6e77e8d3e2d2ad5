-- owner: watchdog/web.py
-- The status pages' statements (watchdog/web.py). Read only; each one
-- statement, bounded, on the partial indexes. The overview's failures and
-- stuck work come from the digest's own statement (digest_data).

-- name: web_overview :many retry
-- One row per agent, busiest first: those running a task, then those with a
-- failure in the last day, then the rest by name, %(limit)s at most (the
-- index page lists them all). Each with its waiting backlog and paused count
-- (the claim and paused indexes), the first waiting task's age, and its
-- running tasks with their runner, lease and last checkpoint (the lease
-- index: running rows are as many as the workers). total: every agent.
WITH running AS MATERIALIZED (
    -- (read once, not once per agent)
    SELECT id, agent_id, ordinal, title, lease_owner, lease_token, attempts, max_attempts,
           lease_until, checkpoint_at
      FROM afk_task WHERE state = 'running' ORDER BY lease_until LIMIT %(running_limit)s
), failing AS (
    SELECT DISTINCT agent_id FROM afk_task
     WHERE state = 'failed' AND updated_at > now() - interval '1 day'
), candidates AS (
    SELECT agent_id FROM running
    UNION SELECT agent_id FROM failing
    UNION (SELECT agent_id FROM afk_agent ORDER BY agent_id LIMIT %(limit)s)
), agents AS (
    SELECT c.agent_id, a.next_ordinal - 1 AS enqueued,
           EXISTS (SELECT 1 FROM running r WHERE r.agent_id = c.agent_id) AS busy,
           EXISTS (SELECT 1 FROM failing f WHERE f.agent_id = c.agent_id) AS failed
      FROM candidates c JOIN afk_agent a USING (agent_id)
     ORDER BY 3 DESC, 4 DESC, c.agent_id
     LIMIT %(limit)s
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
                   'since_checkpoint', extract(epoch FROM now() - r.checkpoint_at),
                   'last_sign', s.last_sign,
                   'since_sign', extract(epoch FROM now() - s.last_sign_at))
                 ORDER BY r.ordinal), '[]'::jsonb)
          FROM running r
          -- its supervisor's run: the agent's last sign of life (afk loop)
          LEFT JOIN afk_run s
                 ON s.task_id = r.id AND s.token = r.lease_token AND s.ended_at IS NULL
         WHERE r.agent_id = a.agent_id) AS running,
       (SELECT count(*) FROM afk_agent) AS total,
       now() AS now
  FROM agents a
 ORDER BY a.busy DESC, a.failed DESC, a.agent_id;

-- name: web_agents :many retry
-- The agent index: every agent by name, %(limit)s a page after %(after)s,
-- those whose id holds %(q)s (case-insensitive) when it is given; one row
-- more than the page says whether there is a next page. total: all matches.
SELECT agent_id, next_ordinal - 1 AS enqueued,
       (SELECT count(*) FROM afk_agent
         WHERE %(q)s::text IS NULL OR strpos(lower(agent_id), lower(%(q)s::text)) > 0) AS total
  FROM afk_agent
 WHERE (%(q)s::text IS NULL OR strpos(lower(agent_id), lower(%(q)s::text)) > 0)
   AND agent_id > %(after)s
 ORDER BY agent_id
 LIMIT %(limit)s + 1;

-- name: web_agent_tasks :many retry
-- One page of an agent's backlog in ordinal order, after %(after)s (keyset
-- paging on the (agent_id, ordinal) index), optionally of one state; one row
-- more than the page says whether there is a next page. total: the tasks of
-- the filter; prev_after: where the previous page starts (NULL on the first).
SELECT id, ordinal, left(title, 300) AS title, state::text AS state, attempts, max_attempts,
       lease_owner, lease_until, updated_at, left(last_error, 300) AS last_error,
       (SELECT count(*) FROM afk_task c
         WHERE c.agent_id = %(agent_id)s
           AND (%(state)s::text IS NULL OR c.state::text = %(state)s::text)) AS total,
       CASE WHEN %(after)s > 0 THEN coalesce(
           (SELECT p.ordinal FROM afk_task p
             WHERE p.agent_id = %(agent_id)s AND p.ordinal <= %(after)s
               AND (%(state)s::text IS NULL OR p.state::text = %(state)s::text)
             ORDER BY p.ordinal DESC OFFSET %(limit)s LIMIT 1), 0) END AS prev_after
  FROM afk_task
 WHERE agent_id = %(agent_id)s AND ordinal > %(after)s
   AND (%(state)s::text IS NULL OR state::text = %(state)s::text)
 ORDER BY ordinal
 LIMIT %(limit)s + 1;

-- name: approval_page :one retry
-- One approval request as its page shows it, with its task.
SELECT a.id, a.task_id, t.agent_id, t.title, t.state AS task_state, a.harness, a.tool_name,
       a.tool_input, a.rule, a.asked_at, a.expires_at, a.on_timeout, a.decision, a.decided_at,
       a.decided_by,
       a.decided_via, a.note
  FROM afk_approval a JOIN afk_task t ON t.id = a.task_id
 WHERE a.id = %(approval)s;

-- name: web_login_add :one
-- A person's login token (its hash): `afk web token --name NAME`.
INSERT INTO afk_web_login (name, token_hash) VALUES (%(name)s, %(hash)s)
RETURNING id, name, made_at;

-- name: web_sign_in :one
-- A sign-in with a token (its hash): a session of the login it belongs to,
-- for %(ttl)s seconds (NULL when the token is no one's, or revoked). The
-- sessions that ended are dropped on the way.
WITH who AS (
    SELECT id, name FROM afk_web_login WHERE token_hash = %(hash)s AND revoked_at IS NULL
), gone AS (
    DELETE FROM afk_web_session WHERE expires_at < now()
), made AS (
    INSERT INTO afk_web_session (id_hash, login_id, csrf, expires_at)
    SELECT %(session)s, id, %(csrf)s, now() + make_interval(secs => %(ttl)s) FROM who
    RETURNING login_id
)
SELECT w.name FROM who w JOIN made m ON m.login_id = w.id;

-- name: web_session :one retry
-- The person of a session (its hash) and its CSRF token, while it lasts.
SELECT l.name, s.csrf
  FROM afk_web_session s JOIN afk_web_login l ON l.id = s.login_id
 WHERE s.id_hash = %(session)s AND s.expires_at > now() AND l.revoked_at IS NULL;

-- name: web_sign_out :exec retry
-- A person signs out: their session (its hash) ends.
DELETE FROM afk_web_session WHERE id_hash = %(session)s;

-- name: web_task_title :one retry
-- A task's title and state, for the page that asks once more before Cancel.
SELECT id, agent_id, title, state::text AS state FROM afk_task WHERE id = %(id)s;

-- name: task_approvals :many retry
-- A task's requests waiting for a person (its page's buttons).
SELECT id, tool_name, tool_input, rule, asked_at, expires_at
  FROM afk_approval WHERE task_id = %(id)s AND decision IS NULL
 ORDER BY id;

-- name: question_page :one retry
-- One question as its link's page shows it, with its task.
SELECT q.id, q.task_id, t.agent_id, t.title, q.question, q.asked_at, q.answered_at,
       q.answered_by
  FROM afk_question q JOIN afk_task t ON t.id = q.task_id
 WHERE q.id = %(question)s;
