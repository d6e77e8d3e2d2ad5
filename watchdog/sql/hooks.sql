-- owner: watchdog/hooks.py
-- The agent hooks' one statement.
-- Parameters are psycopg's %(name)s; times are always the database's now().

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
       extract(epoch FROM coalesce((SELECT lease_until FROM upd), t.lease_until) - now())::float8
           AS lease_left
  FROM target g JOIN afk_task t ON t.id = g.id;
