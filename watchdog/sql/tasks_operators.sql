-- owner: watchdog/operators.py
-- The statements of operators that write afk_task (the family of writers:
-- watchdog/sql/__init__.py). Times are always the database's now().

-- name: reclaim :row retry
-- The design's watchdog statement, in pages: running rows whose lease expired
-- become paused, or failed once their attempts are spent. Keyset paging by id
-- (after_id) so a page of rows locked by others cannot strand the rest; the
-- row lock re-checks the lease, so a lease refreshed since the scan is kept.
WITH expired AS (
    SELECT id FROM afk_task
     WHERE state = 'running' AND lease_until < now() AND id > %(after_id)s
     ORDER BY id
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE afk_task t
       SET state = CASE WHEN t.attempts >= t.max_attempts THEN 'failed'
                        ELSE 'paused' END::afk_state,
           last_error = coalesce(t.last_error, 'lease expired'),
           lease_until = NULL, updated_at = now(),
           change_reason = 'lease expired', change_error = 'lease expired'
      FROM expired e
     -- no second look at the lease here: the row lock taken above already
     -- re-checked it against the row's latest version, and holds it
     WHERE t.id = e.id
    RETURNING t.id, t.state, t.lease_token, t.agent_id, t.attempts, t.trace_parent, t.claimed_at
), ended AS (
    -- the runs of the dead: lease lost, their attempt spent
    SELECT afk_end_run(id, lease_token, 'lease_lost', NULL, true) FROM upd
)
SELECT (SELECT id FROM expired ORDER BY id DESC LIMIT 1) AS last_id,
       (SELECT count(*) FROM expired) AS scanned,
       (SELECT count(*) FROM ended) AS runs_ended,
       count(*) FILTER (WHERE state = 'paused') AS paused,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       -- the attempts lost, for their spans when their tasks are traced (0031)
       jsonb_agg(jsonb_build_object('agent', agent_id, 'id', id, 'attempts', attempts,
                                    'parent', trace_parent, 'since', claimed_at))
           FILTER (WHERE trace_parent IS NOT NULL) AS traced, now() AS db_now
  FROM upd;

-- name: retry :many
-- A human's retry of failed tasks: all or nothing. Back to todo with the
-- attempts reset and the checkpoint kept; a dependent whose dependencies are
-- not all done (or failed, under --on-dep-failure run) back to blocked, as at
-- its enqueue (P13), until they are.
WITH req AS (
    SELECT DISTINCT unnest(%(ids)s::uuid[]) AS id
), found AS (
    SELECT t.id, t.state FROM afk_task t JOIN req USING (id) FOR UPDATE OF t
), verdict AS (
    SELECT (SELECT count(*) FROM found) = (SELECT count(*) FROM req)
           AND coalesce(bool_and(state = 'failed'), false) AS ok
      FROM found
), upd AS (
    UPDATE afk_task t
       SET state = CASE WHEN EXISTS (
                            SELECT 1 FROM afk_dependency x LEFT JOIN afk_task d ON d.id = x.dep_id
                             WHERE x.task_id = t.id
                               AND NOT coalesce(d.state = 'done' OR (d.state = 'failed'
                                                AND t.on_dep_failure = 'run'), false))
                        THEN 'blocked' ELSE 'todo' END::afk_state,
           attempts = 0, run_after = NULL, lease_until = NULL, updated_at = now(),
           change_reason = 'retried by a human', change_by = %(who)s
      FROM found f, verdict v
     WHERE t.id = f.id AND v.ok
    RETURNING t.id
)
SELECT f.id, f.state, (SELECT ok FROM verdict) AS ok FROM found f;

-- name: cancel :many
-- A person's cancel of tasks not yet ended (todo, paused, blocked): all or
-- nothing. Failed for good, the reason kept; their dependents that cancel on
-- a failed dependency fail with them (the trigger afk_dependency_finished).
-- A running task is not cancelled here: its holder would not know.
WITH req AS (
    SELECT DISTINCT unnest(%(ids)s::uuid[]) AS id
), found AS (
    SELECT t.id, t.state FROM afk_task t JOIN req USING (id) FOR UPDATE OF t
), verdict AS (
    SELECT (SELECT count(*) FROM found) = (SELECT count(*) FROM req)
           AND coalesce(bool_and(state IN ('todo', 'paused', 'blocked')), false) AS ok
      FROM found
), upd AS (
    UPDATE afk_task t
       SET state = 'failed', run_after = NULL, lease_until = NULL, updated_at = now(),
           last_error = %(error)s, change_reason = 'cancelled by a person',
           change_error = %(error)s, change_by = %(who)s
      FROM found f, verdict v
     WHERE t.id = f.id AND v.ok
    RETURNING t.id
)
SELECT f.id, f.state, (SELECT ok FROM verdict) AS ok FROM found f;

-- name: prune :one retry
-- Done rows older than the retention, a batch at a time; their history goes
-- with them (the trigger afk_task_history_forget, 0023), and their runs,
-- questions, effects and worktree rows (ON DELETE CASCADE).
WITH old AS (
    -- (not one whose worktree is still there: its work would be forgotten
    -- by afk gc and review, and left on disk, P20)
    SELECT id FROM afk_task t
     WHERE state = 'done' AND updated_at < now() - make_interval(secs => %(retention)s)
       AND NOT EXISTS (SELECT 1 FROM afk_workspace w
                        WHERE w.task_id = t.id AND w.removed_at IS NULL)
     ORDER BY updated_at
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM afk_task t USING old WHERE t.id = old.id RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: forget_agent :exec retry
-- Deletes an agent's whole backlog (its history goes with it, by the trigger
-- afk_task_history_forget, and its effects, ON DELETE CASCADE) and its
-- ordinal counter: what `afk demo` leaves behind.
WITH gone AS (
    DELETE FROM afk_task WHERE agent_id = %(agent_id)s RETURNING 1
), counter AS (
    DELETE FROM afk_agent WHERE agent_id = %(agent_id)s
)
SELECT count(*) AS n FROM gone;
