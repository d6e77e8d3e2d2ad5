-- A running row with no lease_until (a table created by hand from the design
-- could hold one) was invisible to the reclaim, the gauges and the digest, and
-- stayed running forever. Such rows go back to the queue as paused, with a
-- history row saying why (the attempt is given back: nobody can be working on
-- a task that no lease protects), and a CHECK keeps new ones out.
WITH fixed AS (
    UPDATE afk_task
       SET state = 'paused', attempts = greatest(attempts - 1, 0), updated_at = now()
     WHERE state = 'running' AND lease_until IS NULL
    RETURNING id, lease_owner, lease_token, attempts
)
INSERT INTO afk_task_event (task_id, from_state, to_state, reason, runner, token, attempts)
SELECT id, 'running', 'paused', 'running with no lease: paused by afk migrate', lease_owner,
       lease_token, attempts
  FROM fixed;

ALTER TABLE afk_task DROP CONSTRAINT IF EXISTS afk_task_running_has_lease;
ALTER TABLE afk_task ADD CONSTRAINT afk_task_running_has_lease
    CHECK (state <> 'running' OR lease_until IS NOT NULL);
