-- Every runtime statement of the queue, one named block each. A block runs as
-- one statement, in one round trip. Parameters are psycopg's %(name)s.
-- Times are always the database's now().

-- name: enqueue :many
-- Inserts a batch for one agent. The upsert of the agent's counter row takes
-- its lock, so concurrent batches for one agent get disjoint ordinals; keys
-- that exist already (or are inserted concurrently) are skipped by ON CONFLICT.
-- A spec over the size cap refuses the whole batch: nothing is written and the
-- first such task's position comes back in too_big. (Creation is on the row,
-- created_at; the history records the state changes after it.)
WITH input AS (
    SELECT x.n, x.title, coalesce(x.spec, '{}'::jsonb) AS spec, x.idem_key,
           coalesce(x.max_attempts, %(default_max_attempts)s) AS max_attempts
      FROM jsonb_to_recordset(%(tasks)s::jsonb)
           AS x(n int, title text, spec jsonb, idem_key text, max_attempts int)
), too_big AS (
    SELECT min(n) AS n FROM input WHERE octet_length(spec::text) > %(max_bytes)s
), fresh AS (
    SELECT i.* FROM input i
     WHERE (SELECT n FROM too_big) IS NULL
       AND (i.idem_key IS NULL
            OR NOT EXISTS (SELECT 1 FROM afk_task t WHERE t.idem_key = i.idem_key))
), counter AS (
    INSERT INTO afk_agent AS a (agent_id, next_ordinal)
    SELECT %(agent_id)s, 1 + count(*) FROM fresh HAVING count(*) > 0
    ON CONFLICT (agent_id) DO UPDATE
        SET next_ordinal = a.next_ordinal + EXCLUDED.next_ordinal - 1
    RETURNING next_ordinal - (SELECT count(*) FROM fresh) AS first
), ins AS (
    INSERT INTO afk_task (agent_id, ordinal, title, spec, idem_key, max_attempts)
    SELECT %(agent_id)s, c.first + row_number() OVER (ORDER BY f.n) - 1,
           f.title, f.spec, f.idem_key, f.max_attempts
      FROM fresh f CROSS JOIN counter c
    ON CONFLICT (idem_key) DO NOTHING
    RETURNING id, idem_key, ordinal
)
SELECT id, idem_key, ordinal, NULL::int AS too_big FROM ins
UNION ALL
SELECT NULL, NULL, NULL, n FROM too_big WHERE n IS NOT NULL
ORDER BY ordinal;

-- name: claim :one retry
-- The runner's own in-flight task first (a restarted runner resumes it), else
-- the agent's lowest todo/paused ordinal that is not in backoff. Rows held by
-- another runner are never taken, even with an expired lease: the reclaim
-- decides that, and records it. Each claim issues a new fencing token.
WITH own AS (
    SELECT id, true AS resumed FROM afk_task
     WHERE agent_id = %(agent_id)s AND state = 'running' AND lease_owner = %(runner)s
     ORDER BY ordinal
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), next AS (
    SELECT id, false AS resumed FROM afk_task
     WHERE agent_id = %(agent_id)s AND state IN ('todo', 'paused')
       AND (run_after IS NULL OR run_after <= now())
       AND NOT EXISTS (SELECT 1 FROM own)
     ORDER BY ordinal
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT * FROM own UNION ALL SELECT * FROM next
), old AS (
    SELECT t.id, t.state, p.resumed FROM afk_task t JOIN picked p USING (id)
), upd AS (
    UPDATE afk_task t
       SET state = 'running',
           attempts = t.attempts + CASE WHEN o.resumed THEN 0 ELSE 1 END,
           lease_owner = %(runner)s,
           lease_token = afk_next_token(),
           lease_seconds = %(lease_seconds)s,
           lease_until = now() + make_interval(secs => %(lease_seconds)s),
           run_after = NULL,
           checkpoint_at = now(),
           updated_at = now()
      FROM old o
     WHERE t.id = o.id
    RETURNING t.*, o.state AS from_state, o.resumed
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, from_state, 'running', CASE WHEN resumed THEN 'resumed' ELSE 'claimed' END,
           lease_owner, lease_token, attempts
      FROM upd
)
SELECT * FROM upd;

-- name: checkpoint :one retry
-- Fenced: applies only while the row is running under this token. The outer
-- SELECT reads the row as it was before, so a caller learns why nothing
-- changed (unknown id, lease lost, not running, too large) in the same trip.
WITH upd AS (
    UPDATE afk_task
       SET checkpoint = checkpoint || %(patch)s::jsonb,
           lease_until = now() + make_interval(secs => coalesce(lease_seconds, %(lease_seconds)s)),
           checkpoint_at = now(),
           updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
       AND octet_length((checkpoint || %(patch)s::jsonb)::text) <= %(max_bytes)s
    RETURNING *
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       octet_length((t.checkpoint || %(patch)s::jsonb)::text) AS merged_bytes, u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: heartbeat :one retry
WITH upd AS (
    UPDATE afk_task
       SET lease_until = now() + make_interval(secs => coalesce(lease_seconds, %(lease_seconds)s)),
           updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING *
)
SELECT t.state AS cur_state, t.lease_token AS cur_token, u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: done :one retry
WITH upd AS (
    UPDATE afk_task
       SET state = 'done', result = %(result)s::jsonb, lease_until = NULL, updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING *
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, 'running', 'done', 'done', lease_owner, lease_token, attempts FROM upd
)
SELECT t.state AS cur_state, t.lease_token AS cur_token, u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: fail :one retry
-- A reported failure spends the attempt: below max_attempts the task is
-- claimable again after base * 2^(attempts-1) seconds (capped); at
-- max_attempts it is failed for good.
WITH upd AS (
    UPDATE afk_task
       SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'todo' END::afk_state,
           run_after = CASE WHEN attempts >= max_attempts THEN NULL
                            ELSE now() + make_interval(secs => least(
                                %(backoff_base)s * power(2, greatest(attempts - 1, 0)),
                                %(backoff_cap)s)) END,
           last_error = %(error)s, lease_until = NULL, updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING *
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts, error)
    SELECT id, 'running', state, 'failed with error', lease_owner, lease_token, attempts, last_error
      FROM upd
)
SELECT t.state AS cur_state, t.lease_token AS cur_token, u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: finish_claim :one retry
-- A worker loop's step in one round trip: finish the held task (done, or
-- failed with %(error)s, exactly as `done` and `fail` do) and claim the same
-- runner's next task of the same agent, exactly as `claim` does. The claim
-- reads the finished row, so a refused finish claims nothing. One row: how
-- the finish went (`finished` is the id when it applied, else cur_state and
-- cur_token say why, as for `done` and `fail`), then the task now held, if any.
WITH fin AS (
    UPDATE afk_task
       SET state = CASE WHEN %(error)s::text IS NULL THEN 'done'
                        WHEN attempts >= max_attempts THEN 'failed'
                        ELSE 'todo' END::afk_state,
           result = CASE WHEN %(error)s::text IS NULL THEN %(result)s::jsonb ELSE result END,
           run_after = CASE WHEN %(error)s::text IS NULL OR attempts >= max_attempts THEN NULL
                            ELSE now() + make_interval(secs => least(
                                %(backoff_base)s * power(2, greatest(attempts - 1, 0)),
                                %(backoff_cap)s)) END,
           last_error = coalesce(%(error)s::text, last_error),
           lease_until = NULL, updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING *
), fin_ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts, error)
    SELECT id, 'running', state,
           CASE WHEN %(error)s::text IS NULL THEN 'done' ELSE 'failed with error' END,
           lease_owner, lease_token, attempts, %(error)s::text
      FROM fin
), own AS (
    -- (scalar subqueries, not a join: the agent is then a parameter of the
    -- claim index's ordered scan, and LIMIT 1 stops at the first row)
    SELECT id, true AS resumed FROM afk_task
     WHERE agent_id = (SELECT agent_id FROM fin) AND state = 'running'
       AND lease_owner = (SELECT lease_owner FROM fin) AND id <> %(id)s
     ORDER BY ordinal
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), next AS (
    SELECT id, false AS resumed FROM afk_task
     WHERE agent_id = (SELECT agent_id FROM fin) AND state IN ('todo', 'paused')
       AND (run_after IS NULL OR run_after <= now())
       AND NOT EXISTS (SELECT 1 FROM own)
     ORDER BY ordinal
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT * FROM own UNION ALL SELECT * FROM next
), old AS (
    SELECT t.id, t.state, p.resumed FROM afk_task t JOIN picked p USING (id)
), upd AS (
    UPDATE afk_task t
       SET state = 'running',
           attempts = t.attempts + CASE WHEN o.resumed THEN 0 ELSE 1 END,
           lease_owner = (SELECT lease_owner FROM fin),
           lease_token = afk_next_token(),
           lease_seconds = %(lease_seconds)s,
           lease_until = now() + make_interval(secs => %(lease_seconds)s),
           run_after = NULL,
           checkpoint_at = now(),
           updated_at = now()
      FROM old o
     WHERE t.id = o.id
    RETURNING t.*, o.state AS from_state, o.resumed
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, from_state, 'running', CASE WHEN resumed THEN 'resumed' ELSE 'claimed' END,
           lease_owner, lease_token, attempts
      FROM upd
)
SELECT t.state AS cur_state, t.lease_token AS cur_token, f.id AS finished, u.*
  FROM afk_task t LEFT JOIN (SELECT id FROM fin) f ON true LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: pause_task :one retry
-- A runner's own clean stop of one task: fenced, gives the attempt back.
WITH upd AS (
    UPDATE afk_task
       SET state = 'paused', attempts = greatest(attempts - 1, 0),
           lease_until = NULL, updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING *
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, 'running', 'paused', %(reason)s, lease_owner, lease_token, attempts FROM upd
)
SELECT t.state AS cur_state, t.lease_token AS cur_token, u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: pause_agent :many retry
-- A Stop: every running row of the agent, or only those one runner holds.
-- A deliberate pause gives the attempt back.
WITH upd AS (
    UPDATE afk_task
       SET state = 'paused', attempts = greatest(attempts - 1, 0),
           lease_until = NULL, updated_at = now()
     WHERE agent_id = %(agent_id)s AND state = 'running'
       AND (%(runner)s::text IS NULL OR lease_owner = %(runner)s::text)
    RETURNING *
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, 'running', 'paused', %(reason)s, lease_owner, lease_token, attempts FROM upd
)
SELECT id FROM upd;

-- name: pause_runner :many retry
-- The same for one runner across every agent (a Stop hook knows its session,
-- not always its agent).
WITH upd AS (
    UPDATE afk_task
       SET state = 'paused', attempts = greatest(attempts - 1, 0),
           lease_until = NULL, updated_at = now()
     WHERE state = 'running' AND lease_owner = %(runner)s
    RETURNING *
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, 'running', 'paused', %(reason)s, lease_owner, lease_token, attempts FROM upd
)
SELECT id FROM upd;

-- name: reclaim :one retry
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
           lease_until = NULL, updated_at = now()
      FROM expired e
     -- no second look at the lease here: the row lock taken above already
     -- re-checked it against the row's latest version, and holds it
     WHERE t.id = e.id
    RETURNING t.id, t.state, t.lease_owner, t.lease_token, t.attempts
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts, error)
    SELECT id, 'running', state, 'lease expired', lease_owner, lease_token, attempts, 'lease expired'
      FROM upd
)
SELECT (SELECT id FROM expired ORDER BY id DESC LIMIT 1) AS last_id,
       (SELECT count(*) FROM expired) AS scanned,
       count(*) FILTER (WHERE state = 'paused') AS paused,
       count(*) FILTER (WHERE state = 'failed') AS failed
  FROM upd;

-- name: retry :many
-- A human's retry of failed tasks: all or nothing. Back to todo with the
-- attempts reset and the checkpoint kept.
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
       SET state = 'todo', attempts = 0, run_after = NULL, lease_until = NULL, updated_at = now()
      FROM found f, verdict v
     WHERE t.id = f.id AND v.ok
    RETURNING t.id
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, attempts)
    SELECT id, 'failed', 'todo', 'retried by a human', %(who)s, 0 FROM upd
)
SELECT f.id, f.state, (SELECT ok FROM verdict) AS ok FROM found f;

-- name: status :many retry
SELECT s.state::text AS state, count(t.id) AS n
  FROM unnest(enum_range(NULL::afk_state)) AS s(state)
  LEFT JOIN afk_task t ON t.state = s.state
       AND (%(agent_id)s::text IS NULL OR t.agent_id = %(agent_id)s::text)
 GROUP BY s.state;

-- name: show :one retry
SELECT t.*,
       (SELECT coalesce(jsonb_agg(to_jsonb(e) - 'task_id' ORDER BY e.id), '[]'::jsonb)
          FROM afk_task_event e WHERE e.task_id = t.id) AS history
  FROM afk_task t
 WHERE t.id = %(id)s;

-- name: dead :many retry
SELECT * FROM afk_task
 WHERE state = 'failed'
   AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s::text)
   AND (%(since_seconds)s::float8 IS NULL
        OR updated_at >= now() - make_interval(secs => %(since_seconds)s::float8))
 ORDER BY updated_at DESC, id
 LIMIT %(limit)s;

-- name: gauges :one retry
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
        AND pid <> pg_backend_pid()) AS oldest_snapshot_age;

-- name: poison :many retry
-- Tasks that became failed within the window.
SELECT * FROM afk_task
 WHERE state = 'failed' AND updated_at >= now() - make_interval(secs => %(window)s)
 ORDER BY updated_at, id
 LIMIT %(limit)s;

-- name: prune :one retry
-- Done rows older than the retention, a batch at a time; their history goes
-- with them (ON DELETE CASCADE).
WITH old AS (
    SELECT id FROM afk_task
     WHERE state = 'done' AND updated_at < now() - make_interval(secs => %(retention)s)
     ORDER BY updated_at
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM afk_task t USING old WHERE t.id = old.id RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: effect_begin :one
-- Before an external side effect: fenced like every worker write, and it
-- also needs a lease that has not run out (the effect then has a whole lease
-- to finish in, since this refreshes it). Returns the recorded result when
-- the effect is done already; otherwise marks it started.
WITH task AS (
    UPDATE afk_task
       SET lease_until = now() + make_interval(secs => coalesce(lease_seconds, %(lease_seconds)s)),
           updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s AND lease_until > now()
    RETURNING id
), prior AS (
    SELECT done, result FROM afk_task_effect WHERE task_id = %(id)s AND name = %(name)s
), started AS (
    INSERT INTO afk_task_effect AS e (task_id, name, runs, started_token, started_at)
    SELECT id, %(name)s, 1, %(token)s, now() FROM task
     WHERE NOT EXISTS (SELECT 1 FROM prior WHERE done)
    ON CONFLICT (task_id, name) DO UPDATE
        SET runs = e.runs + 1, started_token = EXCLUDED.started_token, started_at = now()
      WHERE NOT e.done
    RETURNING runs
)
SELECT t.state AS cur_state, t.lease_token AS cur_token, t.idem_key,
       (SELECT count(*) > 0 FROM task) AS fenced,
       (SELECT done FROM prior) AS done, (SELECT result FROM prior) AS result,
       (SELECT runs FROM started) AS runs
  FROM afk_task t
 WHERE t.id = %(id)s;

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
SELECT t.state AS cur_state, t.lease_token AS cur_token, (SELECT runs FROM rec) AS runs
  FROM afk_task t
 WHERE t.id = %(id)s;

-- name: effect_lock :one
-- A transactional effect's first statement: locks the task row (fenced) for
-- the rest of the caller's transaction and reads the effect's record.
SELECT t.state AS cur_state, t.lease_token AS cur_token, t.idem_key,
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

-- name: effects :many retry
SELECT name, done, result, runs, started_at, recorded_at
  FROM afk_task_effect WHERE task_id = %(id)s ORDER BY coalesce(recorded_at, started_at), name;

-- name: now :one retry
SELECT now() AS now;

-- name: digest_claim :one
-- Claim the delivery of one period to one destination: a new row, a pending
-- one whose retry is due, or one whose sender's lease ran out. Earlier periods
-- still waiting are superseded: this digest's window covers them, since it
-- starts where the last delivered one ended.
WITH superseded AS (
    UPDATE afk_digest_delivery
       SET state = 'superseded', lease_until = NULL, updated_at = now()
     WHERE destination = %(destination)s AND kind = %(kind)s AND period < %(period)s
       AND (state = 'pending' OR (state = 'sending' AND lease_until < now()))
), prev AS (
    SELECT max(window_end) AS since FROM afk_digest_delivery
     WHERE destination = %(destination)s AND kind = %(kind)s AND state = 'delivered'
)
INSERT INTO afk_digest_delivery AS d
       (destination, kind, period, state, attempts, lease_token, lease_until,
        window_start, window_end)
VALUES (%(destination)s, %(kind)s, %(period)s, 'sending', 1, afk_next_token(),
        now() + make_interval(secs => %(lease)s),
        coalesce((SELECT since FROM prev), now() - make_interval(secs => %(first_window)s)),
        now())
ON CONFLICT (destination, kind, period) DO UPDATE
   SET state = 'sending', attempts = d.attempts + 1,
       lease_token = afk_next_token(),
       lease_until = now() + make_interval(secs => %(lease)s), updated_at = now()
 WHERE (d.state = 'pending' AND d.next_attempt_at <= now())
    OR (d.state = 'sending' AND d.lease_until < now())
RETURNING *;

-- name: digest_finish :one
-- Fenced by the claim's token: a sender whose claim expired cannot overwrite
-- the outcome of the one that took over.
UPDATE afk_digest_delivery
   SET state = %(state)s, last_status = %(status)s, last_error = %(error)s,
       delivered_at = CASE WHEN %(state)s = 'delivered' THEN now() END,
       next_attempt_at = CASE WHEN %(state)s = 'pending'
                              THEN now() + make_interval(secs => %(retry_in)s) END,
       lease_until = NULL, updated_at = now()
 WHERE destination = %(destination)s AND kind = %(kind)s AND period = %(period)s
   AND lease_token = %(token)s AND state = 'sending'
RETURNING state;

-- name: digest_last_delivered :one retry
SELECT max(window_end) AS since FROM afk_digest_delivery
 WHERE kind = 'digest' AND state = 'delivered';

-- name: digest_status :many retry
SELECT destination, kind, period, state, attempts, last_status, last_error,
       window_start, window_end, delivered_at, next_attempt_at, updated_at
  FROM afk_digest_delivery
 ORDER BY updated_at DESC
 LIMIT %(limit)s;

-- name: digest_data :one retry
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
)
SELECT
    (SELECT coalesce(jsonb_agg(to_jsonb(f)), '[]'::jsonb) FROM failed f) AS failed,
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
                 WHERE state = 'done' AND updated_at >= %(start)s AND updated_at < %(end)s
                UNION ALL
                SELECT agent_id, state FROM afk_task
                 WHERE state = 'failed' AND updated_at >= %(start)s AND updated_at < %(end)s) w
         GROUP BY agent_id) x)
        AS per_agent,
    now() AS now;

-- name: claim_batch :many
-- Up to %(limit)s of the agent's next tasks in one statement, each with a
-- fencing token of its own. (A batch does not resume a runner's in-flight
-- tasks: claim one at a time for that.)
WITH next AS (
    SELECT id, state FROM afk_task
     WHERE agent_id = %(agent_id)s AND state IN ('todo', 'paused')
       AND (run_after IS NULL OR run_after <= now())
     ORDER BY ordinal
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE afk_task t
       SET state = 'running', attempts = t.attempts + 1, lease_owner = %(runner)s,
           lease_token = afk_next_token(), lease_seconds = %(lease_seconds)s,
           lease_until = now() + make_interval(secs => %(lease_seconds)s),
           run_after = NULL, checkpoint_at = now(), updated_at = now()
      FROM next n
     WHERE t.id = n.id
    RETURNING t.*, n.state AS from_state
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, from_state, 'running', 'claimed', lease_owner, lease_token, attempts FROM upd
)
SELECT * FROM upd ORDER BY ordinal;

-- name: done_batch :many
-- Finishes many tasks in one statement, each fenced by its own token; the ids
-- returned are those that were still held.
WITH input AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
), upd AS (
    UPDATE afk_task t
       SET state = 'done', lease_until = NULL, updated_at = now()
      FROM input i
     WHERE t.id = i.id AND t.state = 'running' AND t.lease_token = i.token
    RETURNING t.id, t.lease_owner, t.lease_token, t.attempts
), ev AS (
    INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
    SELECT id, 'running', 'done', 'done', lease_owner, lease_token, attempts FROM upd
)
SELECT id FROM upd;

-- name: hook_touch :one retry
-- An agent hook's look at the session's task, in one round trip. The task is
-- the one given (%(id)s with its token: a supervisor's claim), else the one
-- the session itself holds (lease_owner = %(runner)s). Fenced by the token, it
-- refreshes the lease when the session holds the task itself (%(renew)s: a
-- supervisor keeps its own lease, so that an orphaned agent cannot keep a dead
-- supervisor's task alive) and adds edited files to checkpoint.files_touched
-- (unique, the newest %(max_files)s kept). The row comes back as it is now,
-- so a lost lease is seen in the same trip.
WITH target AS (
    (SELECT id, lease_token AS token FROM afk_task
      WHERE %(id)s::uuid IS NULL AND state = 'running' AND lease_owner = %(runner)s::text
      ORDER BY ordinal
      LIMIT 1)
    UNION ALL
    SELECT %(id)s::uuid, %(token)s::bigint WHERE %(id)s::uuid IS NOT NULL
), upd AS (
    UPDATE afk_task t
       SET lease_until = CASE WHEN %(renew)s THEN now() + make_interval(
                                  secs => coalesce(t.lease_seconds, %(lease_seconds)s))
                              ELSE t.lease_until END,
           checkpoint = CASE WHEN cardinality(%(files)s::text[]) = 0 THEN t.checkpoint
               ELSE jsonb_set(t.checkpoint, '{files_touched}', (
                   SELECT coalesce(jsonb_agg(to_jsonb(k.f) ORDER BY k.pos), '[]'::jsonb) FROM (
                       SELECT f, max(pos) AS pos FROM (
                           SELECT e.value #>> '{}' AS f, e.pos FROM jsonb_array_elements(
                                  CASE WHEN jsonb_typeof(t.checkpoint -> 'files_touched') = 'array'
                                       THEN t.checkpoint -> 'files_touched' ELSE '[]'::jsonb END)
                                  WITH ORDINALITY AS e(value, pos)
                           UNION ALL
                           SELECT u.f, 1000000 + u.pos
                             FROM unnest(%(files)s::text[]) WITH ORDINALITY AS u(f, pos)
                       ) every_file
                        GROUP BY f ORDER BY max(pos) DESC LIMIT %(max_files)s
                   ) k)) END,
           checkpoint_at = CASE WHEN cardinality(%(files)s::text[]) = 0 THEN t.checkpoint_at
                                ELSE now() END,
           updated_at = now()
      FROM target g
     WHERE t.id = g.id AND t.state = 'running' AND t.lease_token = g.token
       AND (%(renew)s OR cardinality(%(files)s::text[]) > 0)
    RETURNING t.lease_until
)
SELECT g.id, g.token, t.state::text AS cur_state, t.lease_token AS cur_token,
       extract(epoch FROM coalesce((SELECT lease_until FROM upd), t.lease_until) - now())::float8
           AS lease_left
  FROM target g JOIN afk_task t ON t.id = g.id;

-- name: forget_agent :exec retry
-- Deletes an agent's whole backlog (its history and effects go with it, ON
-- DELETE CASCADE) and its ordinal counter: what `afk demo` leaves behind.
WITH gone AS (
    DELETE FROM afk_task WHERE agent_id = %(agent_id)s RETURNING 1
), counter AS (
    DELETE FROM afk_agent WHERE agent_id = %(agent_id)s
)
SELECT count(*) AS n FROM gone;

-- name: digest_due_retries :many retry
-- Deliveries that are not the periodic digest's own (a forced send) and whose
-- retry is due: the job retries them until they land or fail for good.
SELECT destination, kind, period FROM afk_digest_delivery
 WHERE state = 'pending' AND kind = 'forced' AND next_attempt_at <= now()
 ORDER BY period
 LIMIT 20;

-- name: leader_take :one retry
-- Take the leader lease if it is free or expired, or renew it if we hold it;
-- no row back means another replica holds it. The token grows with every
-- change of holder.
INSERT INTO afk_leader AS l (name, holder, token, elected_at, expires_at)
VALUES (%(name)s, %(holder)s, 1, now(), now() + make_interval(secs => %(ttl)s))
ON CONFLICT (name) DO UPDATE
   SET holder = EXCLUDED.holder,
       token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > now()
                    THEN l.token ELSE l.token + 1 END,
       elected_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > now()
                         THEN l.elected_at ELSE now() END,
       expires_at = EXCLUDED.expires_at
 WHERE l.holder = EXCLUDED.holder OR l.expires_at <= now()
RETURNING token, elected_at

-- name: leader_release :exec retry
-- A clean stop hands over at once: the next replica's check takes it.
UPDATE afk_leader SET expires_at = now()
 WHERE name = %(name)s AND holder = %(holder)s AND expires_at > now()

-- name: timeline :one retry
-- The timeline this server writes WAL on (what afk_next_token() puts in a
-- token's high bits): asked only to explain a refused token.
SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint AS timeline
