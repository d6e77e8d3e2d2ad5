-- owner: watchdog/operators.py
-- An operator's statements: what the backlog holds and a task's whole story
-- (status, show, what it waits for, dead), and the changes a person or the
-- watchdog makes (retry, reclaim, prune, forget an agent). With tasks.sql and
-- people.sql, the only statements that write afk_task.

-- name: status :many retry
-- The tasks per state, and 'retrying': the todo and paused tasks waiting to
-- retry after a spent attempt (migration 0041; the afk_tasks_retrying gauge's count)
SELECT s.state::text AS state, count(t.id) AS n
  FROM unnest(enum_range(NULL::afk_state)) AS s(state)
  LEFT JOIN afk_task t ON t.state = s.state
       AND (%(agent_id)s::text IS NULL OR t.agent_id = %(agent_id)s::text)
 GROUP BY s.state
UNION ALL
SELECT 'retrying', count(*) FROM afk_task
 WHERE state IN ('todo', 'paused') AND attempts > 0
   AND run_after IS DISTINCT FROM afk_held()
   AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s::text);

-- name: show :one retry
SELECT t.*,
       (SELECT coalesce(jsonb_agg(to_jsonb(e) - 'task_id' ORDER BY e.id), '[]'::jsonb)
          FROM afk_task_event e WHERE e.task_id = t.id) AS history
  FROM afk_task t
 WHERE t.id = %(id)s;

-- name: ids_in_range :many retry
-- The tasks a short id names (its range of the primary key: an index scan),
-- a few at most: one is the task, more are named to the person
SELECT id FROM afk_task WHERE id BETWEEN %(low)s AND %(high)s ORDER BY id LIMIT 4;

-- name: states_by_key :many retry
-- the state of each task a key names (afk export prd: which stories are done)
SELECT idem_key, state::text AS state FROM afk_task WHERE idem_key = ANY(%(keys)s::text[]);

-- name: task_after :many retry
-- what a task waits for (migration 0020): each ref as given, and the task it
-- names with its state (null while no task has that key)
SELECT d.ref, d.dep_id AS id, dt.title, dt.state::text AS state
  FROM afk_dependency d LEFT JOIN afk_task dt ON dt.id = d.dep_id
 WHERE d.task_id = %(id)s
 ORDER BY d.ref;

-- name: dead :many retry
SELECT * FROM afk_task
 WHERE state = 'failed'
   AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s::text)
   AND (%(since_seconds)s::float8 IS NULL
        OR updated_at >= now() - make_interval(secs => %(since_seconds)s::float8))
 ORDER BY updated_at DESC, id
 LIMIT %(limit)s;
