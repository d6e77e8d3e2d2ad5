-- owner: watchdog/effects.py
-- The side-effect ledger (EffectLedger, the door Queue.effect).
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: effect_record :one
-- After an external side effect succeeded: fenced by the token.
WITH task AS (
    SELECT id FROM afk_task
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
       FOR UPDATE
), rec AS (
    UPDATE afk_task_effect e
       SET done = true, result = %(result)s::jsonb, recorded_token = %(token)s,
           recorded_at = now()
      FROM task
     WHERE e.task_id = task.id AND e.name = %(name)s AND NOT e.done
    RETURNING e.runs
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held, (SELECT runs FROM rec) AS runs
  FROM afk_task t
 WHERE t.id = %(id)s;

-- name: effect_lock :one
-- A transactional effect's first statement: locks the task row (fenced) for
-- the rest of the caller's transaction and reads the effect's record.
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held, t.idem_key,
       (t.state = 'running' AND t.lease_token = %(token)s) AS fenced,
       e.done, e.result
  FROM afk_task t
  LEFT JOIN afk_task_effect e ON e.task_id = t.id AND e.name = %(name)s
 WHERE t.id = %(id)s
   FOR UPDATE OF t;

-- name: effect_commit :exec
-- In the same transaction as the effect's own writes.
INSERT INTO afk_task_effect AS e (task_id, name, done, result, runs, started_token, started_at,
                                  recorded_token, recorded_at)
VALUES (%(id)s, %(name)s, true, %(result)s::jsonb, 1, %(token)s, now(), %(token)s, now())
ON CONFLICT (task_id, name) DO UPDATE
    SET done = true, result = EXCLUDED.result, runs = e.runs + 1,
        started_token = EXCLUDED.started_token, started_at = now(),
        recorded_token = EXCLUDED.recorded_token, recorded_at = now()
  WHERE NOT e.done;

-- name: effect_abandon :exec retry
-- An external effect whose call failed (it raised, or its command exited
-- non-zero): it did not happen, so the same token may start it again.
UPDATE afk_task_effect
   SET started_token = NULL, started_by = NULL
 WHERE task_id = %(id)s AND name = %(name)s AND started_token = %(token)s AND NOT done;

-- name: effect_forget :exec retry
-- An effect whose first call could not even start (its program could not be
-- executed): nothing happened, so no trace of a start is kept.
DELETE FROM afk_task_effect
 WHERE task_id = %(id)s AND name = %(name)s AND NOT done AND started_token IS NULL
   AND runs = 1;

-- name: effect_state :one retry
-- An effect as it is now: what a second caller waits on.
SELECT done, result, started_by, started_token, started_at
  FROM afk_task_effect WHERE task_id = %(id)s AND name = %(name)s;

-- name: effects :many retry
SELECT name, done, result, runs, started_at, recorded_at
  FROM afk_task_effect WHERE task_id = %(id)s ORDER BY coalesce(recorded_at, started_at), name;
