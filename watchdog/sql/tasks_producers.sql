-- owner: watchdog/producers.py
-- How tasks enter the queue: one statement for a batch, or for a large plain
-- batch its ordinals reserved, a COPY, and the ids read back. One of the
-- family of files that writes afk_task (see tasks.sql).
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: enqueue :many
-- Inserts a batch for one agent. The upsert of the agent's counter row takes
-- its lock, so concurrent batches for one agent get disjoint ordinals; keys
-- that exist already (or are inserted concurrently) are skipped by ON CONFLICT.
-- A spec over the size cap refuses the whole batch: nothing is written and the
-- first such task's position comes back in too_big; so does a task id named
-- in `after` that no task has (missing_ref). (Creation is on the row,
-- created_at; the history records the state changes after it.)
-- Dependencies (migration 0020): a task's `after` refs are task ids or keys;
-- it is blocked while one is not done (a key no task has yet, or a task of
-- this batch, is not done), failed at once when one has failed under
-- on_dep_failure cancel, and todo otherwise. The tasks it names are marked
-- has_dependents under their row lock, and their state is read from that
-- update (the newest version): a finish racing this enqueue either comes
-- before it (and is seen) or after it (and its trigger sees the dependent).
WITH input AS (
    SELECT x.n, x.title, coalesce(x.spec, '{}'::jsonb) AS spec, x.idem_key,
           coalesce(x.max_attempts, %(default_max_attempts)s) AS max_attempts, x.budget_usd,
           x.workspace, x.trace_parent,
           -- not claimable before then (--not-before): a time, or seconds from now
           coalesce(now() + make_interval(secs => x.not_before_in), x.not_before_at)
               AS run_after,
           x.concurrency_key, x.concurrency_limit, coalesce(x.after, '{}') AS after,
           x.on_dep_failure, x.ask_for, x.requires, x.profiles
      FROM jsonb_to_recordset(%(tasks)s::jsonb)
           AS x(n int, title text, spec jsonb, idem_key text, max_attempts int,
                budget_usd numeric, workspace jsonb, trace_parent text,
                not_before_in float8, not_before_at timestamptz,
                concurrency_key text, concurrency_limit int, after text[],
                on_dep_failure text, ask_for text[], requires text[], profiles text[])
), too_big AS (
    SELECT min(n) AS n FROM input WHERE octet_length(spec::text) > %(max_bytes)s
), refs AS (
    SELECT i.n, r.ref, coalesce(di.id, dk.id) AS dep_id, u.is_id
      FROM input i CROSS JOIN LATERAL unnest(i.after) AS r(ref)
      CROSS JOIN LATERAL (SELECT r.ref ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                 AS is_id) u
      LEFT JOIN afk_task di ON di.id = CASE WHEN u.is_id THEN r.ref::uuid END
      LEFT JOIN afk_task dk ON dk.idem_key = r.ref
), missing AS (
    SELECT min(n) AS n FROM refs WHERE is_id AND dep_id IS NULL
), fresh AS (
    SELECT i.* FROM input i
     WHERE (SELECT n FROM too_big) IS NULL AND (SELECT n FROM missing) IS NULL
       AND (i.idem_key IS NULL
            OR NOT EXISTS (SELECT 1 FROM afk_task t WHERE t.idem_key = i.idem_key))
), marked AS (
    -- the tasks named, locked and marked; their newest state comes back
    UPDATE afk_task t SET has_dependents = true
     WHERE t.id IN (SELECT r.dep_id FROM refs r JOIN fresh f ON f.n = r.n)
    RETURNING t.id, t.state, t.title
), deps AS (
    SELECT r.n,
           count(*) FILTER (WHERE m.state IS NULL OR m.state NOT IN ('done', 'failed'))
               AS pending,
           min(m.id::text || ' ' || m.title) FILTER (WHERE m.state = 'failed') AS failed
      FROM refs r LEFT JOIN marked m ON m.id = r.dep_id
     GROUP BY r.n
), counter AS (
    INSERT INTO afk_agent AS a (agent_id, next_ordinal)
    SELECT %(agent_id)s, 1 + count(*) FROM fresh HAVING count(*) > 0
    ON CONFLICT (agent_id) DO UPDATE
        SET next_ordinal = a.next_ordinal + EXCLUDED.next_ordinal - 1
    RETURNING next_ordinal - (SELECT count(*) FROM fresh) AS first
), keys AS (
    -- each concurrency key's limit: the first enqueued stands (migration 0019)
    INSERT INTO afk_concurrency (key, lim)
    SELECT DISTINCT ON (concurrency_key) concurrency_key, coalesce(concurrency_limit, 1)
      FROM fresh WHERE concurrency_key IS NOT NULL
     ORDER BY concurrency_key, n
    ON CONFLICT (key) DO NOTHING
), placed AS (
    SELECT f.*, c.first + row_number() OVER (ORDER BY f.n) - 1 AS ordinal,
           CASE WHEN d.failed IS NOT NULL AND coalesce(f.on_dep_failure, 'cancel') = 'cancel'
                    THEN 'failed'
                WHEN d.pending > 0 OR (d.failed IS NOT NULL AND f.on_dep_failure = 'hold')
                    THEN 'blocked'
                ELSE 'todo' END::afk_state AS state,
           CASE WHEN d.failed IS NOT NULL THEN 'dependency failed: ' || d.failed END AS dep_error
      FROM fresh f CROSS JOIN counter c LEFT JOIN deps d ON d.n = f.n
), ins AS (
    INSERT INTO afk_task (agent_id, ordinal, title, spec, idem_key, max_attempts, budget_usd,
                          workspace, trace_parent, run_after, concurrency_key, state,
                          on_dep_failure, last_error, ask_for, requires, profiles)
    SELECT %(agent_id)s, p.ordinal, p.title, p.spec, p.idem_key, p.max_attempts, p.budget_usd,
           p.workspace, p.trace_parent, p.run_after, p.concurrency_key, p.state,
           CASE WHEN cardinality(p.after) > 0 THEN coalesce(p.on_dep_failure, 'cancel') END,
           CASE WHEN p.state = 'failed' THEN p.dep_error END, p.ask_for, p.requires, p.profiles
      FROM placed p
    ON CONFLICT (idem_key) DO NOTHING
    RETURNING id, idem_key, ordinal
), dep_rows AS (
    -- a ref to a key no task has yet (or one of this batch) keeps dep_id
    -- null: the trigger afk_dependency_resolve fills it in
    INSERT INTO afk_dependency (task_id, ref, dep_id)
    SELECT DISTINCT ON (i.id, r.ref) i.id, r.ref, r.dep_id
      FROM ins i JOIN placed p ON p.ordinal = i.ordinal JOIN refs r ON r.n = p.n
)
SELECT id, idem_key, ordinal, NULL::int AS too_big, NULL::int AS missing_ref FROM ins
UNION ALL
SELECT NULL, NULL, NULL, n, NULL FROM too_big WHERE n IS NOT NULL
UNION ALL
SELECT NULL, NULL, NULL, NULL, n FROM missing WHERE n IS NOT NULL
ORDER BY ordinal;

-- name: dependency_graph :many retry
-- The tasks a batch's refs name and every task they wait for, transitively,
-- each with its own refs: what the enqueue's cycle check walks.
WITH RECURSIVE walk(id) AS (
    SELECT id FROM afk_task WHERE id = ANY(%(ids)s::uuid[]) OR idem_key = ANY(%(keys)s::text[])
    UNION
    SELECT d.dep_id FROM afk_dependency d JOIN walk w ON d.task_id = w.id
     WHERE d.dep_id IS NOT NULL
)
SELECT t.id, t.idem_key, t.title,
       coalesce(jsonb_agg(jsonb_build_object('ref', d.ref, 'dep_id', d.dep_id))
                    FILTER (WHERE d.ref IS NOT NULL), '[]'::jsonb) AS deps
  FROM walk w JOIN afk_task t ON t.id = w.id
  LEFT JOIN afk_dependency d ON d.task_id = t.id
 GROUP BY t.id;

-- The same for a large batch, in three steps inside one transaction (a
-- savepoint of the caller's): reserve the ordinals, COPY the rows straight
-- into afk_task, read their ids back with the size check. COPY has no ON
-- CONFLICT: a key that exists already makes it fail, and the caller then
-- rolls back to the savepoint and uses `enqueue`, which skips and reports it.

-- name: enqueue_reserve :row
-- %(n)s ordinals for the agent; the counter row stays locked until commit,
-- so concurrent batches for one agent get disjoint ranges. (Numbers are cast
-- to bigint: a parameter is typed by its value, and two smallints would be
-- added as one.)
INSERT INTO afk_agent AS a (agent_id, next_ordinal) VALUES (%(agent_id)s, 1 + %(n)s::bigint)
ON CONFLICT (agent_id) DO UPDATE SET next_ordinal = a.next_ordinal + %(n)s::bigint
RETURNING next_ordinal - %(n)s::bigint AS first;

-- name: enqueue_copy :copy
COPY afk_task (agent_id, ordinal, title, spec, idem_key, max_attempts, budget_usd, workspace,
               trace_parent)
FROM STDIN;

-- name: enqueue_copied :row
-- The ids of the rows copied, in order, and the offset of the first whose
-- spec is over the size cap (measured as `enqueue` measures it), if any.
SELECT array_agg(id ORDER BY ordinal) AS ids,
       min(ordinal) FILTER (WHERE octet_length(spec::text) > %(max_bytes)s) - %(first)s::bigint
           AS too_big
  FROM afk_task
 WHERE agent_id = %(agent_id)s
   AND ordinal >= %(first)s::bigint AND ordinal < %(first)s::bigint + %(n)s::bigint;
