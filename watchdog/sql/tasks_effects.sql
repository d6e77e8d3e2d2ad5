-- owner: watchdog/effects.py
-- The statements of effects that write afk_task (the family of writers:
-- watchdog/sql/__init__.py). Times are always the database's now().

-- name: effect_begin :one
-- Before an external side effect: fenced like every worker write, and it
-- also needs a lease that has not run out (the effect then has a whole lease
-- to finish in, since this refreshes it). Returns the recorded result when
-- the effect is done already; otherwise marks it started by %(by)s (host:pid),
-- unless it is started already under this very token: then runs is NULL and
-- started_by says by whom (the caller waits for it, or refuses).
WITH task AS (
    UPDATE afk_task
       SET lease_until = now() + make_interval(secs => coalesce(lease_seconds, %(lease_seconds)s)),
           updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s AND lease_until > now()
    RETURNING id
), prior AS (
    SELECT done, result FROM afk_task_effect WHERE task_id = %(id)s AND name = %(name)s
), started AS (
    INSERT INTO afk_task_effect AS e (task_id, name, runs, started_token, started_at, started_by)
    SELECT id, %(name)s, 1, %(token)s, now(), %(by)s FROM task
     WHERE NOT EXISTS (SELECT 1 FROM prior WHERE done)
    ON CONFLICT (task_id, name) DO UPDATE
        SET runs = e.runs + 1, started_token = EXCLUDED.started_token, started_at = now(),
            started_by = EXCLUDED.started_by
      WHERE NOT e.done AND e.started_token IS DISTINCT FROM EXCLUDED.started_token
    RETURNING runs
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held, t.idem_key,
       (SELECT count(*) > 0 FROM task) AS fenced,
       (SELECT done FROM prior) AS done, (SELECT result FROM prior) AS result,
       (SELECT runs FROM started) AS runs
  FROM afk_task t
 WHERE t.id = %(id)s;
