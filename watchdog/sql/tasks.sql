-- owner: watchdog/queue.py
-- The queue's statements: claim, the fenced writes of a worker and of an
-- agent's hooks, pauses, a worktree's request, the demo's clean-up, and the
-- reads. With tasks_<module>.sql (producers, operators, people, effects,
-- workspaces), the one family of files that writes afk_task
-- (tests/unit/test_sql.py holds it).
-- Parameters are psycopg's %(name)s; times are always the database's now().
-- History: a write that changes a task's state or lease token names the change
-- in change_reason (with change_error, change_by where it has them); the
-- trigger afk_task_history (migration 0012) writes the afk_task_event row.

-- name: step :row retry
-- A worker's step in one round trip: finish the task it holds (%(id)s with
-- its %(token)s: done, or failed with %(error)s; %(ok)s says which), then
-- claim its next task
-- (%(claim)s). Either half can be left out: no %(id)s is a plain claim for
-- %(agent_id)s and %(runner)s, and %(claim)s false a plain finish.
-- The finish is fenced by the token. A reported failure spends the attempt:
-- below max_attempts the task is claimable again after
-- base * 2^(attempts-1) seconds (capped); at max_attempts it is failed.
-- The claim takes the runner's own in-flight task first (a restarted runner
-- resumes it), else the agent's lowest todo/paused ordinal that is not in
-- backoff. Rows held by another runner are never taken, even with an expired
-- lease: the reclaim decides that. After a finish the agent and the runner
-- are the finished task's, so a refused finish claims nothing. Each claim
-- issues a new fencing token. (The trigger afk_task_history records both
-- changes, with the change_reason set here.)
-- One row: how the finish went (`finished` is its id when it applied, else
-- cur_state and cur_token, read as they were, say why), then the task now
-- held (after a claim) or just finished (without one), if any. (The
-- shape of a plain claim has no cur_* or finished, a shape with no account
-- no parked_*, a plain finish no next_at or held_until.)
-- Accounts (migration 0013): a claim under %(account)s takes nothing while
-- that account is parked (parked_* say until when and why), and starts a run
-- of the task it takes; a finish ends the task's run under its token with
-- %(run)s, what the supervisor read of the agent. When nothing was claimed,
-- next_at is when the agent's earliest task in backoff is due, held_until
-- until when a lease or a concurrency key holds one of its tasks.
-- A shape (a claim, a finish, either under an account or not) leaves out the
-- parts it does not use (`-- without`, see watchdog/sql/__init__.py).
WITH fin AS (
    -- without id: SELECT * FROM afk_task WHERE false
    UPDATE afk_task
       SET state = CASE WHEN %(ok)s THEN 'done'
                        WHEN attempts >= max_attempts THEN 'failed'
                        ELSE 'todo' END::afk_state,
           result = CASE WHEN %(ok)s THEN %(result)s::jsonb ELSE result END,
           run_after = CASE WHEN %(ok)s OR attempts >= max_attempts THEN NULL
                            ELSE now() + make_interval(secs => least(
                                %(backoff_base)s * power(2, greatest(attempts - 1, 0)),
                                %(backoff_cap)s)) END,
           last_error = coalesce(%(error)s::text, last_error),
           lease_until = NULL, updated_at = now(),
           change_reason = CASE WHEN %(ok)s THEN 'done'
                                ELSE 'failed with error' END,
           change_error = %(error)s::text
     WHERE id = %(id)s::uuid AND state = 'running' AND lease_token = %(token)s
    RETURNING *
    -- end without id
), parked AS (
    -- the claimer's account, while parked: a claim under it takes nothing
    SELECT account, until, reason FROM afk_account_park
     WHERE %(claim)s AND account = %(account)s::text AND cleared_at IS NULL
       AND coalesce(until > now(), true)
), own AS (
    -- (scalar subqueries, not a join: the agent is then a parameter of the
    -- claim index's ordered scan, and LIMIT 1 stops at the first row)
    -- without claim: SELECT NULL::uuid AS id, true AS resumed WHERE false
    SELECT id, true AS resumed FROM afk_task
     WHERE %(claim)s
       -- without account:
       AND NOT EXISTS (SELECT 1 FROM parked)
       -- end without account
       AND agent_id = coalesce((SELECT agent_id FROM fin), %(agent_id)s::text)
       AND state = 'running'
       AND lease_owner = coalesce((SELECT lease_owner FROM fin), %(runner)s::text)
       AND id IS DISTINCT FROM %(id)s::uuid
     ORDER BY ordinal
     LIMIT 1
       FOR UPDATE SKIP LOCKED
    -- end without claim
), next AS (
    -- without claim: SELECT NULL::uuid AS id, false AS resumed WHERE false
    SELECT id, false AS resumed FROM afk_task
     WHERE %(claim)s
       AND agent_id = coalesce((SELECT agent_id FROM fin), %(agent_id)s::text)
       AND state IN ('todo', 'paused')
       AND coalesce(run_after <= now(), true)
       AND NOT EXISTS (SELECT 1 FROM own)
       -- without account:
       AND NOT EXISTS (SELECT 1 FROM parked)
       -- end without account
       -- its concurrency key (0019) has room: the key's row locked (a key
       -- another claimer holds is passed over), the finish above counted out
       AND (concurrency_key IS NULL
            OR afk_concurrency_room(concurrency_key, (SELECT concurrency_key FROM fin)))
       -- the labels it requires (0036), all of them the claimer's, and one
       -- of the profiles it names (0037) the claimer's usable ones
       -- without labels: AND requires IS NULL AND profiles IS NULL
       AND afk_fits(requires, profiles, %(labels)s, %(profiles)s)
       -- end without labels
     ORDER BY ordinal
     LIMIT 1
       FOR UPDATE SKIP LOCKED
    -- end without claim
), claimed AS (
    -- without claim: SELECT * FROM afk_task WHERE false
    UPDATE afk_task t
       SET state = 'running',
           attempts = t.attempts + CASE WHEN p.resumed THEN 0 ELSE 1 END,
           lease_owner = coalesce((SELECT lease_owner FROM fin), %(runner)s::text),
           lease_token = afk_next_token(),
           lease_seconds = %(lease_seconds)s,
           lease_until = now() + make_interval(secs => %(lease_seconds)s),
           run_after = NULL,
           checkpoint_at = now(),
           claimed_at = coalesce(CASE WHEN p.resumed THEN t.claimed_at END, now()),
           updated_at = now(),
           change_reason = CASE WHEN p.resumed THEN 'resumed' ELSE 'claimed' END,
           had_run = t.had_run OR %(account)s::text IS NOT NULL
      FROM (SELECT * FROM own UNION ALL SELECT * FROM next) p
     WHERE t.id = p.id
    RETURNING t.*
    -- end without claim
-- without account:
), run_start AS (
    -- a claim under an account (a supervisor's) starts a run of the task
    INSERT INTO afk_run (task_id, token, agent_id, runner, account)
    SELECT id, lease_token, agent_id, lease_owner, %(account)s::text
      FROM claimed WHERE %(account)s::text IS NOT NULL
-- end without account
)
SELECT
       -- without id:
       t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held, (SELECT id FROM fin) AS finished,
       -- (a finish ends its run where one is open: only a task once claimed
       -- under an account may have one, and an API worker's never was)
       CASE WHEN t.had_run
            THEN afk_end_run(%(id)s::uuid, %(token)s, CASE WHEN %(ok)s
                             THEN 'done' ELSE 'task_failure' END,
                             %(run)s::jsonb, EXISTS (SELECT 1 FROM fin)) END AS run_ended,
       -- the finished attempt, for its span when its task is traced (0031)
       (SELECT jsonb_build_object('agent', agent_id, 'attempts', attempts,
                                  'parent', trace_parent, 'since', claimed_at)
          FROM fin WHERE trace_parent IS NOT NULL) AS fin_trace,
       -- end without id
       -- without account:
       p.account AS parked_account, p.until AS parked_until, p.reason AS parked_reason,
       -- end without account
       -- without claim:
       -- nothing claimed: when the agent's earliest waiting task is due
       CASE WHEN %(claim)s AND NOT EXISTS (SELECT 1 FROM claimed) THEN
           afk_next_due(coalesce((SELECT agent_id FROM fin), %(agent_id)s::text)) END AS next_at,
       -- and until when a lease or a concurrency key holds a task of the agent
       CASE WHEN %(claim)s AND NOT EXISTS (SELECT 1 FROM claimed) THEN
           afk_held_until(coalesce((SELECT agent_id FROM fin), %(agent_id)s::text))
       END AS held_until,
       -- end without claim
       now() AS db_now,
       -- the task as Task.from_row reads it (not the columns that serve the
       -- database alone: tests/unit/test_sql.py compares the two)
       r.id, r.agent_id, r.ordinal, r.title, r.spec, r.state, r.checkpoint, r.idem_key,
       r.attempts, r.max_attempts, r.lease_until, r.lease_owner, r.lease_token, r.last_error,
       r.run_after, r.result, r.created_at, r.updated_at, r.lease_seconds, r.budget_usd,
       r.workspace, r.trace_parent, r.concurrency_key, r.on_dep_failure, r.claimed_at,
       r.ask_for, r.requires, r.profiles
  FROM (VALUES (1)) AS one
  -- without id:
  LEFT JOIN afk_task t ON t.id = %(id)s::uuid
  -- end without id
  -- without account:
  LEFT JOIN parked p ON true
  -- end without account
  LEFT JOIN (SELECT * FROM claimed UNION ALL SELECT * FROM fin WHERE NOT %(claim)s) r ON true;

-- name: touch :one retry
-- A checkpoint, or with no %(patch)s a heartbeat: fenced, it applies only
-- while the row is running under this token, and refreshes the lease. The
-- patch is merged into the checkpoint (top-level keys replaced) within the
-- size cap. A supervisor's heartbeat may carry its agent's last sign of life
-- (%(sign)s, %(sign_ago)s seconds ago), kept on the open run. The outer
-- SELECT reads the row as it was before, so a caller learns why nothing
-- changed (unknown id, lease lost, not running, too large) in the same trip.
WITH upd AS (
    UPDATE afk_task
       SET checkpoint = CASE WHEN %(patch)s::jsonb IS NULL THEN checkpoint
                             ELSE checkpoint || %(patch)s::jsonb END,
           checkpoint_at = CASE WHEN %(patch)s::jsonb IS NULL THEN checkpoint_at ELSE now() END,
           lease_until = now() + make_interval(secs => coalesce(lease_seconds, %(lease_seconds)s)),
           updated_at = now()
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
       AND (%(patch)s::jsonb IS NULL
            OR octet_length((checkpoint || %(patch)s::jsonb)::text) <= %(max_bytes)s)
    RETURNING *
), sign AS (
    UPDATE afk_run r
       SET last_sign = %(sign)s::text,
           last_sign_at = now() - make_interval(secs => %(sign_ago)s::float8)
      FROM upd
     WHERE %(sign)s::text IS NOT NULL
       AND r.task_id = upd.id AND r.token = upd.lease_token AND r.ended_at IS NULL
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held,
       CASE WHEN %(patch)s::jsonb IS NOT NULL
            THEN octet_length((t.checkpoint || %(patch)s::jsonb)::text) END AS merged_bytes,
       u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: pause_task :one retry
-- A runner's own clean stop of one task: fenced, gives the attempt back
-- (afk_give_back, migration 0038); its run ends as interrupted.
WITH upd AS (
    SELECT * FROM afk_give_back(ARRAY[%(id)s::uuid], ARRAY[%(token)s::bigint], 'paused',
                                NULL, %(reason)s, 'interrupted', NULL)
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held, u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: pause_agent :many retry
-- A Stop: every running row of the agent, or only those one runner holds.
-- A deliberate pause gives the attempt back (afk_give_back).
SELECT g.id
  FROM (SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM afk_task
         WHERE agent_id = %(agent_id)s AND state = 'running'
           AND (%(runner)s::text IS NULL OR lease_owner = %(runner)s::text)) r,
       afk_give_back(r.ids, r.tokens, 'paused', NULL, %(reason)s, 'interrupted', NULL) g;

-- name: pause_runner :many retry
-- The same for one runner across every agent (a Stop hook knows its session,
-- not always its agent).
SELECT g.id
  FROM (SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM afk_task
         WHERE state = 'running' AND lease_owner = %(runner)s) r,
       afk_give_back(r.ids, r.tokens, 'paused', NULL, %(reason)s, 'interrupted', NULL) g;

-- name: claim_batch :many
-- Up to %(limit)s of the agent's next tasks in one statement, each with a
-- fencing token of its own. (A batch does not resume a runner's in-flight
-- tasks: claim one at a time for that.)
WITH next AS (
    SELECT id FROM afk_task
     WHERE agent_id = %(agent_id)s AND state IN ('todo', 'paused')
       AND (run_after IS NULL OR run_after <= now())
       -- a batch takes no task of a concurrency key (one claim at a time
       -- keeps a key's count; a batch would take several of one key at once),
       -- nor one that requires labels (a batch claimer advertises none)
       AND concurrency_key IS NULL AND requires IS NULL AND profiles IS NULL
     ORDER BY ordinal
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE afk_task t
       SET state = 'running', attempts = t.attempts + 1, lease_owner = %(runner)s,
           lease_token = afk_next_token(), lease_seconds = %(lease_seconds)s,
           lease_until = now() + make_interval(secs => %(lease_seconds)s),
           run_after = NULL, checkpoint_at = now(), claimed_at = now(), updated_at = now(),
           change_reason = 'claimed'
      FROM next n
     WHERE t.id = n.id
    RETURNING t.*
)
SELECT * FROM upd ORDER BY ordinal;

-- name: done_batch :many
-- Finishes many tasks in one statement, each fenced by its own token; the ids
-- returned are those that were still held.
WITH input AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
), upd AS (
    UPDATE afk_task t
       SET state = 'done', lease_until = NULL, updated_at = now(), change_reason = 'done'
      FROM input i
     WHERE t.id = i.id AND t.state = 'running' AND t.lease_token = i.token
    RETURNING t.id, t.lease_token
), ended AS (
    SELECT afk_end_run(id, lease_token, 'done', NULL, true) FROM upd
)
SELECT id FROM upd WHERE (SELECT count(*) FROM ended) >= 0;

-- name: timeline :one retry
-- The timeline this server writes WAL on (what afk_next_token() puts in a
-- token's high bits): asked only to explain a refused token.
SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint AS timeline

-- name: release :one retry
-- A supervisor gives a running task back without spending its attempt, for a
-- reason that is not the task's (a usage limit, a provider outage, a login
-- that needs a person, an interrupt): to %(state)s (todo or paused), due
-- again after %(retry_in)s seconds (NULL: at once), and ends its run with
-- %(run)s. Fenced by the token, as every worker's write.
-- %(hold)s holds it for a person instead (run_after afk_held(): no claim
-- takes it until a person puts it back). %(error)s, when given, becomes its
-- last_error (a stall's last lines, migration 0042).
-- (afk_give_back; a run whose lease was lost still ends, with what it cost)
WITH upd AS (
    SELECT * FROM afk_give_back(
        ARRAY[%(id)s::uuid], ARRAY[%(token)s::bigint], %(state)s::afk_state,
        CASE WHEN %(hold)s THEN afk_held()
             WHEN %(retry_in)s::float8 IS NULL THEN NULL
             ELSE now() + make_interval(secs => %(retry_in)s::float8) END,
        %(reason)s, %(outcome)s, %(run)s::jsonb, %(error)s::text)
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held,
       CASE WHEN NOT EXISTS (SELECT 1 FROM upd)
            THEN afk_end_run(t.id, %(token)s, %(outcome)s, %(run)s::jsonb, false) END AS run_ended,
       u.*
  FROM afk_task t LEFT JOIN upd u ON true
 WHERE t.id = %(id)s;

-- name: held :one retry
-- The task a runner holds now for an agent (what a replayed finish-and-claim
-- answers, without claiming anything).
SELECT * FROM afk_task
 WHERE agent_id = %(agent_id)s AND lease_owner = %(runner)s AND state = 'running'
 ORDER BY ordinal
 LIMIT 1;

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
           -- (the files are added only while the checkpoint stays within its
           -- size cap, %(max_bytes)s: past it the agent could record nothing more)
           checkpoint = CASE WHEN cardinality(%(files)s::text[]) = 0 THEN t.checkpoint
               ELSE (SELECT CASE WHEN octet_length(n.cp::text) > %(max_bytes)s THEN t.checkpoint
                                 ELSE n.cp END
                       FROM (SELECT jsonb_set(t.checkpoint, '{files_touched}', (
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
                   ) k)) AS cp) n) END,
           checkpoint_at = CASE WHEN cardinality(%(files)s::text[]) = 0 THEN t.checkpoint_at
                                ELSE now() END,
           updated_at = now()
      FROM target g
     WHERE t.id = g.id AND t.state = 'running' AND t.lease_token = g.token
       AND (%(renew)s OR cardinality(%(files)s::text[]) > 0)
    RETURNING t.lease_until
)
SELECT g.id, g.token, t.state::text AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held,
       extract(epoch FROM coalesce((SELECT lease_until FROM upd), t.lease_until) - now())::float8
           AS lease_left,
       -- its commit does not wait for the disk (this transaction only): a
       -- lease refreshed and files noted promise nothing to anyone, and a
       -- database crash loses at most the last moment of them (the lease
       -- then runs out a little sooner), never a task's state or token
       set_config('synchronous_commit', 'off', true) AS commit_mode
  FROM target g JOIN afk_task t ON t.id = g.id;
