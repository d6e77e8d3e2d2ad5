-- owner: watchdog/agents/fleet.py
-- The fleet (migration 0036): the loops that run now, each registered by
-- itself and heart-beating; a task that requires labels no live loop has.

-- name: loop_register :exec retry
INSERT INTO afk_loop (runner, agent_id, host, pid, username, labels, profiles)
VALUES (%(runner)s, %(agent_id)s, %(host)s, %(pid)s, %(username)s, %(labels)s::text[],
        %(profiles)s::text[])
ON CONFLICT (runner) DO UPDATE
   SET agent_id = EXCLUDED.agent_id, host = EXCLUDED.host, pid = EXCLUDED.pid,
       username = EXCLUDED.username, labels = EXCLUDED.labels, profiles = EXCLUDED.profiles,
       started_at = now(), seen_at = now(), task_id = NULL, profile = NULL;

-- name: loop_beat :exec retry
-- A loop's sign of life, with the task and the profile of its run (NULL between runs).
UPDATE afk_loop SET seen_at = now(), task_id = %(task_id)s, profile = %(profile)s
 WHERE runner = %(runner)s;

-- name: loop_leave :exec retry
DELETE FROM afk_loop WHERE runner = %(runner)s;

-- name: loops :many retry
-- Every registered loop, alive (a beat within %(lost_after)s seconds) or
-- lost, with its task's title and its current account's parking.
SELECT l.runner, l.agent_id, l.host, l.pid, l.username, l.labels, l.profiles, l.started_at,
       l.seen_at, l.task_id, t.title AS task_title, l.profile,
       CASE WHEN l.seen_at > now() - make_interval(secs => %(lost_after)s)
            THEN 'alive' ELSE 'lost' END AS state
  FROM afk_loop l LEFT JOIN afk_task t ON t.id = l.task_id
 ORDER BY l.agent_id, l.started_at, l.runner;

-- name: waiting_for_a_loop :many retry
-- Tasks waiting to run that ask for what no live loop of their agent offers
-- (labels it requires, one of the profiles it names: afk_fits, as a claim
-- checks) (%(agent_id)s, or every agent's with NULL).
SELECT t.id, t.agent_id, left(t.title, 300) AS title, t.requires, t.profiles
  FROM afk_task t
 WHERE (t.requires IS NOT NULL OR t.profiles IS NOT NULL) AND t.state IN ('todo', 'paused')
   AND (%(agent_id)s::text IS NULL OR t.agent_id = %(agent_id)s::text)
   AND NOT EXISTS (
       SELECT 1 FROM afk_loop l
        WHERE l.agent_id = t.agent_id AND afk_fits(t.requires, t.profiles, l.labels, l.profiles)
          AND l.seen_at > now() - make_interval(secs => %(lost_after)s))
 ORDER BY t.agent_id, t.ordinal
 LIMIT 100;
