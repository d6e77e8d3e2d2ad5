-- owner: watchdog/people.py
-- The statements of people that write afk_task (the family of writers:
-- watchdog/sql/__init__.py). Times are always the database's now().

-- name: ask :one
-- An agent's question: its task (fenced by the token) is held for a person
-- (paused, run_after afk_held(), the attempt given back), the question kept,
-- and the run ended as needs_input. A supervisor's later finish is refused.
WITH upd AS (
    SELECT id FROM afk_give_back(ARRAY[%(id)s::uuid], ARRAY[%(token)s::bigint], 'paused',
                                 afk_held(), 'needs input: ' || left(%(question)s, 300),
                                 'needs_input', %(run)s::jsonb)
), q AS (
    INSERT INTO afk_question (task_id, question, asked_token)
    SELECT id, %(question)s, %(token)s FROM upd
    RETURNING id, asked_at
)
SELECT t.state AS cur_state, t.lease_token AS cur_token,
       (t.run_after = afk_held()) IS TRUE AS cur_held,
       (SELECT id FROM q) AS question_id, (SELECT asked_at FROM q) AS asked_at
  FROM afk_task t
 WHERE t.id = %(id)s;

-- name: answer :one
-- A person's answer to a task's open questions: recorded, and the task put
-- back to todo (due at once). question_id is NULL when none was open.
WITH open AS (
    SELECT id FROM afk_question
     WHERE task_id = %(id)s AND answered_at IS NULL
       FOR UPDATE
), ans AS (
    UPDATE afk_question q
       SET answer = %(answer)s, answered_at = now(), answered_by = %(who)s
      FROM open o
     WHERE q.id = o.id
    RETURNING q.id
), upd AS (
    UPDATE afk_task
       SET state = 'todo', run_after = NULL, updated_at = now(),
           change_reason = 'answered', change_by = %(who)s
     WHERE id = %(id)s AND EXISTS (SELECT 1 FROM ans) AND state = 'paused'
    RETURNING id
)
SELECT t.id, t.state::text AS state, (SELECT max(id) FROM ans) AS question_id
  FROM afk_task t
 WHERE t.id = %(id)s;

-- name: rebudget :many
-- A person raises the budget of tasks held for one (or failed), and puts
-- them back to todo: all or nothing, as retry. A budget that is not above
-- what a task's runs have cost already would start a run with nothing left.
WITH req AS (
    SELECT DISTINCT unnest(%(ids)s::uuid[]) AS id
), found AS (
    SELECT t.id, t.state,
           (t.state = 'failed' OR (t.state = 'paused' AND t.run_after = afk_held()
                                   AND NOT EXISTS (SELECT 1 FROM afk_question q
                                                    WHERE q.task_id = t.id
                                                      AND q.answered_at IS NULL))) AS held,
           (SELECT coalesce(sum(r.cost_usd), 0) FROM afk_run r
             WHERE r.task_id = t.id)::float8 AS spent
      FROM afk_task t JOIN req USING (id) FOR UPDATE OF t
), verdict AS (
    SELECT (SELECT count(*) FROM found) = (SELECT count(*) FROM req)
           AND coalesce(bool_and(held AND spent < %(budget_usd)s), false) AS ok
      FROM found
), upd AS (
    UPDATE afk_task t
       SET state = 'todo', attempts = 0, run_after = NULL, lease_until = NULL,
           budget_usd = %(budget_usd)s, updated_at = now(),
           change_reason = 'budget raised to $' || %(budget_usd)s::text || ' by a human',
           change_by = %(who)s
      FROM found f, verdict v
     WHERE t.id = f.id AND v.ok
    RETURNING t.id
)
SELECT f.id, f.state::text AS state, f.held, f.spent, (SELECT ok FROM verdict) AS ok
  FROM found f;

-- name: decide_approval :one
-- A person's decision on an open request (%(decision)s: approved or denied,
-- by %(who)s through %(via)s, with %(note)s): recorded, and its task, held
-- for it, due again at once (its next run resumes the session). One that is
-- decided already, or whose task is not held for it, changes nothing: the
-- row says what it was.
WITH req AS (
    SELECT * FROM afk_approval WHERE id = %(approval)s FOR UPDATE
), dec AS (
    UPDATE afk_approval a
       SET decision = %(decision)s, decided_at = now(), decided_by = %(who)s,
           decided_via = %(via)s, note = %(note)s
      FROM req r
     WHERE a.id = r.id AND r.decision IS NULL
    RETURNING a.id, a.task_id, a.tool_name
), upd AS (
    UPDATE afk_task t
       SET state = 'todo', run_after = NULL, updated_at = now(),
           change_reason = left(%(decision)s || ': ' || d.tool_name || ' (via ' || %(via)s || ')'
                                || coalesce(': ' || %(note)s, ''), 500),
           change_by = %(who)s
      FROM dec d
     WHERE t.id = d.task_id AND t.state = 'paused' AND t.run_after = afk_held()
    RETURNING t.id
)
SELECT r.id, r.task_id, r.tool_name, r.decision AS was, (SELECT count(*) FROM dec) AS decided,
       (SELECT count(*) FROM upd) AS released
  FROM req r;

-- name: expire_approvals :many
-- The watchdog's look at requests not decided in time: under on_timeout
-- deny, denied (by the TTL) and their tasks due again (the next run's call
-- is answered no); under hold they wait on.
WITH late AS (
    UPDATE afk_approval
       SET decision = 'expired', decided_at = now(), decided_via = 'ttl',
           note = 'not decided within its time to live'
     WHERE decision IS NULL AND expires_at <= now() AND on_timeout = 'deny'
    RETURNING id, task_id, tool_name
), upd AS (
    UPDATE afk_task t
       SET state = 'todo', run_after = NULL, updated_at = now(),
           change_reason = 'approval expired: ' || l.tool_name || ' denied'
      FROM late l
     WHERE t.id = l.task_id AND t.state = 'paused' AND t.run_after = afk_held()
    RETURNING t.id
)
SELECT l.id, l.task_id, l.tool_name, EXISTS (SELECT 1 FROM upd u WHERE u.id = l.task_id) AS released
  FROM late l;
