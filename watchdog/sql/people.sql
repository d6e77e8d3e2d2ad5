-- owner: watchdog/people.py
-- What the people around the agents see and do: an agent's question and a
-- person's answer (each holds or frees the task), what a task's runs cost and
-- a raised budget, and the runs themselves. With tasks.sql, the only
-- statements that write afk_task.

-- name: runs :many retry
-- The runs of a task, oldest first.
SELECT id, token, runner, account, started_at, ended_at, outcome, exit_status, output_tail,
       session_id, cost_usd::float8 AS cost_usd, turns, usage, attempt_spent,
       permission_denials, last_sign, last_sign_at, before_sha, after_sha, changes,
       check_status, check_tail, trace_id, sandbox, profile, refused
  FROM afk_run WHERE task_id = %(id)s
 ORDER BY started_at, id;

-- name: questions :many retry
-- Open questions (all agents, or one), oldest first.
SELECT q.task_id AS id, t.agent_id, t.title, q.question, q.asked_at
  FROM afk_question q JOIN afk_task t ON t.id = q.task_id
 WHERE q.answered_at IS NULL
   AND (%(agent_id)s::text IS NULL OR t.agent_id = %(agent_id)s::text)
 ORDER BY q.asked_at, q.id;

-- name: task_questions :many retry
-- A task's questions and their answers, in order (for its brief and page).
SELECT question, asked_at, answer, answered_at, answered_by
  FROM afk_question WHERE task_id = %(id)s
 ORDER BY asked_at, id;

-- name: task_cost :one retry
-- What a task's runs cost so far, and its budget.
SELECT (SELECT sum(cost_usd)::float8 FROM afk_run WHERE task_id = %(id)s) AS spent,
       budget_usd::float8 AS budget_usd
  FROM afk_task WHERE id = %(id)s;

-- name: run_lost :one
-- What a supervisor read of a run whose lease it lost (reclaimed, paused or
-- claimed again since): kept on that run, which is ended as lease_lost if
-- nothing ended it yet; what its ending statement wrote is kept.
UPDATE afk_run
   SET ended_at = coalesce(ended_at, now()),
       outcome = coalesce(outcome, 'lease_lost'),
       exit_status = coalesce(exit_status, (%(run)s::jsonb ->> 'exit_status')::integer),
       output_tail = coalesce(output_tail, %(run)s::jsonb ->> 'output_tail'),
       session_id = coalesce(session_id, %(run)s::jsonb ->> 'session_id'),
       cost_usd = coalesce(cost_usd, (%(run)s::jsonb ->> 'cost_usd')::numeric),
       turns = coalesce(turns, (%(run)s::jsonb ->> 'turns')::integer),
       usage = coalesce(usage, %(run)s::jsonb -> 'usage'),
       permission_denials = coalesce(permission_denials, %(run)s::jsonb -> 'permission_denials'),
       trace_id = coalesce(trace_id, %(run)s::jsonb ->> 'trace_id'),
       sandbox = coalesce(sandbox, %(run)s::jsonb -> 'sandbox'),
       refused = coalesce(refused, %(run)s::jsonb -> 'refused'),
       attempt_spent = coalesce(attempt_spent, false)
 WHERE task_id = %(id)s AND token = %(token)s
RETURNING id;

-- name: approval_for_call :row
-- A PreToolUse of a call that an --ask-for rule names, in the run of task
-- %(id)s under %(token)s (issue 43), in one round trip: the call's request
-- as it stands (by %(hash)s, the call's tool and exact input), made pending
-- now when there is none, and what the hook answers: 'lost' (the run no
-- longer holds its task: the fence answers), 'allow' (a person approved
-- this very call, not used yet: used now), 'deny' (denied, or not decided in
-- time under on_timeout deny: used now), 'defer' (still waiting).
WITH held AS (
    SELECT id FROM afk_task
     WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
), found AS (
    SELECT * FROM afk_approval
     WHERE task_id = %(id)s AND call_hash = %(hash)s AND used_at IS NULL
       AND EXISTS (SELECT 1 FROM held)
     ORDER BY id DESC
     LIMIT 1
       FOR UPDATE
), judged AS (
    SELECT f.*,
           CASE WHEN f.decision = 'approved' THEN 'allow'
                WHEN f.decision IN ('denied', 'expired') THEN 'deny'
                WHEN f.expires_at <= now() AND f.on_timeout = 'deny' THEN 'deny'
                ELSE 'defer' END AS action
      FROM found f
), used AS (
    UPDATE afk_approval a
       SET used_at = now(),
           decision = coalesce(a.decision, 'expired'),
           decided_at = coalesce(a.decided_at, now()),
           decided_via = coalesce(a.decided_via, 'ttl')
      FROM judged j
     WHERE a.id = j.id AND j.action IN ('allow', 'deny')
    RETURNING a.id
), made AS (
    INSERT INTO afk_approval (task_id, session_id, transcript, harness, tool_name, tool_input,
                              call_hash, rule, asked_token, expires_at, on_timeout)
    SELECT id, %(session)s, %(transcript)s, %(harness)s, %(tool)s, %(input)s::jsonb, %(hash)s,
           %(rule)s, %(token)s, now() + make_interval(secs => %(ttl)s), %(on_timeout)s
      FROM held WHERE NOT EXISTS (SELECT 1 FROM found)
    RETURNING id
)
SELECT coalesce((SELECT id FROM judged), (SELECT id FROM made)) AS approval_id,
       CASE WHEN NOT EXISTS (SELECT 1 FROM held) THEN 'lost'
            ELSE coalesce((SELECT action FROM judged), 'defer') END AS action,
       (SELECT decision FROM judged) AS decision, (SELECT note FROM judged) AS note,
       (SELECT decided_by FROM judged) AS decided_by,
       (SELECT decided_via FROM judged) AS decided_via,
       (SELECT count(*) FROM used) AS used;

-- name: approvals :many retry
-- The approval requests (the open ones, or all), oldest first, with their
-- task, for `afk approvals` and the digest.
SELECT a.id, a.task_id, t.agent_id, t.title, a.harness, a.tool_name, a.tool_input, a.rule,
       a.session_id, a.asked_at, a.expires_at, a.on_timeout, a.decision, a.decided_at,
       a.decided_by, a.decided_via, a.note, a.used_at
  FROM afk_approval a JOIN afk_task t ON t.id = a.task_id
 WHERE (%(all)s OR a.decision IS NULL)
   AND (%(agent_id)s::text IS NULL OR t.agent_id = %(agent_id)s::text)
 ORDER BY a.asked_at, a.id;

-- name: approval_to_resume :one retry
-- The session a task's next run resumes: its latest decided request whose
-- call has not come back yet (NULL: none), and the profile of the run that
-- asked (its session is that profile's: issue 44).
SELECT id, session_id, transcript, harness, rule, decision, tool_name, tool_input, note,
       (SELECT r.profile FROM afk_run r
         WHERE r.task_id = a.task_id AND r.token = a.asked_token) AS profile
  FROM afk_approval a
 WHERE task_id = %(id)s AND decision IN ('approved', 'denied') AND used_at IS NULL
   AND session_id IS NOT NULL
 ORDER BY decided_at DESC, id DESC
 LIMIT 1;

-- name: approval_decisions :many retry
-- A task's decided requests whose call has not come back yet, in order.
SELECT tool_name, tool_input, decision, decided_by, note FROM afk_approval
 WHERE task_id = %(id)s AND decision IS NOT NULL AND used_at IS NULL
 ORDER BY decided_at, id;

-- name: approvals_waiting_for :one retry
-- How many requests of an agent's tasks wait for a person: its loop stays
-- for them (issue 50 item 3) instead of ending with "nothing left".
SELECT count(*) AS n FROM afk_approval a JOIN afk_task t ON t.id = a.task_id
 WHERE a.decision IS NULL AND t.agent_id = %(agent_id)s;

-- name: outstanding_calls :many retry
-- What a run left of a task's calls, read once after it: its requests still
-- waiting for a person (decision NULL), and its approved calls that never
-- came back to its hook (never ran: issue 50 item 2).
SELECT id, tool_name, tool_input, rule, decision FROM afk_approval
 WHERE task_id = %(id)s
   AND (decision IS NULL OR (decision = 'approved' AND used_at IS NULL))
 ORDER BY id;
