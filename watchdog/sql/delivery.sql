-- owner: watchdog/delivery.py
-- The delivery ledger of digests and alerts, and the database clock it schedules by.
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: now :row retry
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
-- the end of the last delivered digest's window (the next one starts
-- there), and when it went out
SELECT window_end AS since, delivered_at FROM afk_digest_delivery
 WHERE kind = 'digest' AND state = 'delivered'
 ORDER BY window_end DESC, delivered_at DESC
 LIMIT 1;

-- name: digest_status :many retry
SELECT destination, kind, period, state, attempts, last_status, last_error,
       window_start, window_end, delivered_at, next_attempt_at, updated_at
  FROM afk_digest_delivery
 ORDER BY updated_at DESC
 LIMIT %(limit)s;

-- name: digest_due_retries :many retry
-- Deliveries that are not the periodic digest's own (a forced send) and whose
-- retry is due: the job retries them until they land or fail for good.
SELECT destination, kind, period FROM afk_digest_delivery
 WHERE state = 'pending' AND kind = 'forced' AND next_attempt_at <= now()
 ORDER BY period
 LIMIT 20;

-- name: questions_unalerted :many
-- Open questions the alert destinations were not told of yet, oldest first.
SELECT q.id AS question_id, q.task_id AS id, t.agent_id, left(t.title, 300) AS title,
       q.question, q.asked_at
  FROM afk_question q JOIN afk_task t ON t.id = q.task_id
 WHERE q.answered_at IS NULL AND q.alerted_at IS NULL
 ORDER BY q.asked_at, q.id
 LIMIT %(limit)s;

-- name: question_alerted :exec retry
UPDATE afk_question SET alerted_at = now() WHERE id = %(question_id)s AND alerted_at IS NULL;

-- name: approvals_unalerted :many
-- Approval requests still waiting that the alert destinations were not told
-- of yet, oldest first (issue 43).
SELECT a.id, a.task_id, t.agent_id, left(t.title, 300) AS title, a.tool_name, a.tool_input,
       a.rule, a.asked_at, a.expires_at, now() AS db_now
  FROM afk_approval a JOIN afk_task t ON t.id = a.task_id
 WHERE a.decision IS NULL AND a.alerted_at IS NULL
 ORDER BY a.asked_at, a.id
 LIMIT %(limit)s;

-- name: approval_alerted :exec retry
UPDATE afk_approval SET alerted_at = now() WHERE id = %(approval)s AND alerted_at IS NULL;

-- name: web_secret :one retry
-- The status server's own secret of %(name)s (links it signs), made at
-- random by the first replica that needs it and the same for all after.
WITH made AS (
    INSERT INTO afk_web_secret (name, value)
    VALUES (%(name)s, replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT coalesce((SELECT value FROM made),
                (SELECT value FROM afk_web_secret WHERE name = %(name)s)) AS value;

-- name: waiting_for_a_person :many retry
-- Tasks that wait for a person for a reason that is neither a question nor
-- an approval (those are told on their own): held over their budget, or
-- paused because their command (or repository) cannot run. The ledger
-- tells each hold once (its period is the hold's time).
SELECT t.id, t.agent_id, left(t.title, 300) AS title, t.updated_at, left(e.reason, 500) AS reason
  FROM afk_task t
  CROSS JOIN LATERAL (SELECT reason FROM afk_task_event
                       WHERE task_id = t.id ORDER BY id DESC LIMIT 1) e
 WHERE t.state = 'paused'
   AND ((t.run_after = afk_held() AND e.reason LIKE 'over budget:%%')
        OR (SELECT r.outcome FROM afk_run r WHERE r.task_id = t.id
             ORDER BY r.started_at DESC, r.id DESC LIMIT 1) = 'cannot_start')
 ORDER BY t.updated_at
 LIMIT %(limit)s;
