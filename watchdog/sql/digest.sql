-- owner: watchdog/digest.py
-- What one digest shows.
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: digest_data :row retry
-- Everything one digest shows, for a window, in one statement.
WITH failed AS (
    SELECT id, agent_id, ordinal, title, attempts, max_attempts, idem_key, updated_at,
           -- the head and the tail of a long error: a traceback names its
           -- exception on its last line
           CASE WHEN length(last_error) > 2000
                THEN left(last_error, 497) || E'\n…\n' || right(last_error, 1500)
                ELSE coalesce(last_error, '') END AS last_error,
           (SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb)
              FROM jsonb_object_keys(checkpoint) AS k) AS checkpoint_keys
      FROM afk_task
     WHERE state = 'failed' AND updated_at >= %(start)s AND updated_at < %(end)s
     ORDER BY updated_at DESC
     LIMIT %(limit)s
), retrying AS (
    -- failing, retrying (issue 53 item 1): the tasks that spent an attempt
    -- in the window (a failure, an expired lease) and are not done: waiting
    -- for their next try, todo or paused (migration 0041's index), or trying again now
    SELECT t.id, t.agent_id, left(t.title, 300) AS title, t.state::text AS state,
           t.attempts - CASE WHEN t.state = 'running' THEN 1 ELSE 0 END AS spent,
           t.max_attempts, t.run_after AS next_at, t.updated_at,
           CASE WHEN length(t.last_error) > 2000
                THEN left(t.last_error, 497) || E'\n…\n' || right(t.last_error, 1500)
                ELSE coalesce(t.last_error, '') END AS last_error
      FROM (SELECT * FROM afk_task
             WHERE state IN ('todo', 'paused') AND attempts > 0
               AND run_after IS DISTINCT FROM afk_held()
            UNION ALL
            SELECT * FROM afk_task WHERE state = 'running' AND attempts > 1) t
     WHERE EXISTS (SELECT 1 FROM afk_task_event e
                    WHERE e.task_id = t.id AND e.at >= %(start)s AND e.at < %(end)s
                      AND e.reason IN ('failed with error', 'lease expired'))
)
SELECT
    (SELECT coalesce(jsonb_agg(to_jsonb(f)), '[]'::jsonb) FROM failed f) AS failed,
    (SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY r.spent DESC, r.updated_at), '[]'::jsonb)
       FROM (SELECT * FROM retrying ORDER BY spent DESC, updated_at LIMIT 50) r) AS retrying,
    (SELECT count(*) FROM retrying) AS retrying_total,
    (SELECT count(*) FROM afk_task
      WHERE state = 'failed' AND updated_at >= %(start)s AND updated_at < %(end)s)
        AS failed_total,
    (SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]'::jsonb) FROM (
        SELECT id, agent_id, title, lease_owner, lease_until, attempts FROM afk_task
         WHERE state = 'running' AND lease_until < now() ORDER BY lease_until LIMIT 50) x)
        AS expired,
    (SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]'::jsonb) FROM (
        SELECT id, agent_id, title, updated_at, attempts FROM afk_task
         WHERE state = 'paused' AND updated_at < now() - make_interval(secs => %(paused_after)s)
         ORDER BY updated_at LIMIT 50) x)
        AS paused,
    (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.created_at), '[]'::jsonb) FROM (
        SELECT DISTINCT ON (agent_id) id, agent_id, title, created_at FROM afk_task
         WHERE state IN ('todo', 'paused') AND state = 'todo'
           AND created_at < now() - make_interval(secs => %(todo_late_after)s)
         ORDER BY agent_id, created_at, ordinal LIMIT 50) x)
        AS oldest_todo,
    (SELECT jsonb_object_agg(c.state, c.n) FROM afk_state_counts(%(exact_below)s) c)
        AS totals,
    (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.agent_id), '[]'::jsonb) FROM (
        SELECT agent_id, count(*) FILTER (WHERE state = 'done') AS done,
               count(*) FILTER (WHERE state = 'failed') AS failed
          FROM (SELECT agent_id, state FROM afk_task
                 -- the status page skips this part (count_done false): its
                 -- cost is the window's finishes, not the live work
                 WHERE %(count_done)s AND state = 'done'
                   AND updated_at >= %(start)s AND updated_at < %(end)s
                UNION ALL
                SELECT agent_id, state FROM afk_task
                 WHERE state = 'failed' AND updated_at >= %(start)s AND updated_at < %(end)s) w
         GROUP BY agent_id) x)
        AS per_agent,
    -- the accounts parked in the window (migration 0013): for how long, why,
    -- how many tasks waited for them, and the attempts those runs spent
    -- (a limit or an outage spends none: this says so from the record)
    (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.account), '[]'::jsonb) FROM (
        SELECT p.account,
               array_agg(DISTINCT p.kind ORDER BY p.kind) AS kinds,
               (array_agg(p.reason ORDER BY p.parked_at DESC))[1] AS reason,
               sum(greatest(extract(epoch FROM least(p.cleared_at, p.until, now(), %(end)s)
                                             - greatest(p.parked_at, %(start)s)), 0))::float8
                   AS parked_seconds,
               bool_or(p.cleared_at IS NULL AND p.until IS NULL) AS needs_person,
               -- when the parking in force ends (null: none in force, or a person's)
               (array_agg(p.until ORDER BY p.parked_at DESC)
                  FILTER (WHERE p.cleared_at IS NULL AND p.until > now()))[1] AS until,
               (SELECT count(DISTINCT r.task_id) FROM afk_run r
                 WHERE r.account = p.account
                   AND r.outcome = ANY(%(parking)s::text[])
                   AND r.ended_at >= %(start)s AND r.ended_at < %(end)s) AS tasks_waited,
               (SELECT count(*) FROM afk_run r
                 WHERE r.account = p.account AND r.outcome = ANY(%(resets)s::text[])
                   AND r.attempt_spent
                   AND r.ended_at >= %(start)s AND r.ended_at < %(end)s) AS attempts_spent
          FROM afk_account_park p
         WHERE p.parked_at < %(end)s
           AND least(p.cleared_at, p.until, 'infinity'::timestamptz) > %(start)s
         GROUP BY p.account) x)
        AS accounts,
    -- the tasks held for a person: a question (with its text) or a budget
    (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.updated_at), '[]'::jsonb) FROM (
        SELECT t.id, t.agent_id, left(t.title, 300) AS title, t.updated_at,
               t.budget_usd::float8 AS budget_usd,
               (SELECT q.question FROM afk_question q
                 WHERE q.task_id = t.id AND q.answered_at IS NULL
                 ORDER BY q.asked_at DESC LIMIT 1) AS question,
               (SELECT e.reason FROM afk_task_event e
                 WHERE e.task_id = t.id ORDER BY e.id DESC LIMIT 1) AS reason,
               -- the request it waits on, when a tool call waits for approval
               (SELECT a.id FROM afk_approval a
                 WHERE a.task_id = t.id AND a.decision IS NULL
                 ORDER BY a.id LIMIT 1) AS approval
          FROM afk_task t
         WHERE t.state = 'paused' AND t.run_after = afk_held()
         ORDER BY t.updated_at LIMIT 50) x)
        AS waiting,
    -- what the runs that ended in the window cost, per agent (null: no run said)
    (SELECT coalesce(jsonb_object_agg(agent_id, cost), '{}'::jsonb) FROM (
        SELECT agent_id, sum(cost_usd)::float8 AS cost FROM afk_run
         WHERE ended_at >= %(start)s AND ended_at < %(end)s AND cost_usd IS NOT NULL
         GROUP BY agent_id) c)
        AS costs,
    -- the runs a supervisor stopped as hung in the window, per agent: how
    -- many (stalled, or timed out) and the seconds they took
    (SELECT coalesce(jsonb_object_agg(agent_id, jsonb_build_object('runs', n, 'seconds', s)),
                     '{}'::jsonb) FROM (
        SELECT agent_id, count(*) AS n,
               sum(extract(epoch FROM ended_at - started_at))::float8 AS s
          FROM afk_run
         WHERE ended_at >= %(start)s AND ended_at < %(end)s
           AND outcome IN ('stalled', 'timed_out')
         GROUP BY agent_id) h)
        AS hung,
    -- the runs a supervisor saw done in the window, per agent (from the runs'
    -- index: the status page's count of the day's finishes, which it does not
    -- count from the tasks)
    (SELECT coalesce(jsonb_object_agg(agent_id, n), '{}'::jsonb) FROM (
        SELECT agent_id, count(*) AS n FROM afk_run
         WHERE ended_at >= %(start)s AND ended_at < %(end)s AND outcome = 'done'
         GROUP BY agent_id) d)
        AS runs_done,
    -- the hosts a sandbox denied to the runs that ended in the window, per
    -- agent: {agent: {host: times}} (runs[].sandbox.hosts_tried, issue 40)
    (SELECT coalesce(jsonb_object_agg(agent_id, hosts), '{}'::jsonb) FROM (
        SELECT agent_id, jsonb_object_agg(host, n) AS hosts FROM (
            SELECT r.agent_id, h ->> 'host' AS host, sum((h ->> 'count')::bigint) AS n
              FROM afk_run r
                   CROSS JOIN LATERAL jsonb_array_elements(
                       CASE WHEN jsonb_typeof(r.sandbox -> 'hosts_tried') = 'array'
                            THEN r.sandbox -> 'hosts_tried' ELSE '[]'::jsonb END) h
             WHERE r.ended_at >= %(start)s AND r.ended_at < %(end)s
               AND r.sandbox IS NOT NULL AND (h ->> 'allowed') = 'false'
             GROUP BY 1, 2) x
         GROUP BY agent_id) y)
        AS denied_hosts,
    -- the night per profile (issue 44): its runs, what they cost, the hours
    -- its account was parked, and the runs whose task went on under another
    -- profile after a limit or an outage
    (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.profile), '[]'::jsonb) FROM (
        SELECT r.profile, count(*) AS runs, sum(r.cost_usd)::float8 AS cost,
               count(*) FILTER (WHERE r.outcome = ANY(%(resets)s::text[]) AND EXISTS (
                   SELECT 1 FROM afk_run n
                    WHERE n.task_id = r.task_id AND n.started_at >= r.ended_at
                      AND n.profile IS DISTINCT FROM r.profile)) AS moved,
               coalesce((SELECT sum(greatest(extract(epoch FROM
                                    least(p.cleared_at, p.until, now(), %(end)s)
                                    - greatest(p.parked_at, %(start)s)), 0))::float8
                           FROM afk_account_park p
                          WHERE p.account = coalesce((SELECT account FROM afk_profile f
                                                       WHERE f.name = r.profile), r.profile)
                            AND p.parked_at < %(end)s
                            AND least(p.cleared_at, p.until, 'infinity'::timestamptz) > %(start)s),
                        0) AS parked_seconds
          FROM afk_run r
         WHERE r.profile IS NOT NULL AND r.ended_at >= %(start)s AND r.ended_at < %(end)s
         GROUP BY r.profile) x)
        AS profiles,
    now() AS now;
