-- Two parts of the claim statement become functions, called only where they
-- apply: as subqueries of the statement, they were set up on every claim
-- (a table and an index opened, row locks readied), some 20-40 us each of a
-- claim that needed neither (measured with EXPLAIN ANALYZE, paired).

-- When an agent's earliest task in backoff (or not before its start time) is
-- due: what a claim that took nothing says (next_at).
CREATE OR REPLACE FUNCTION afk_next_due(p_agent text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT min(run_after) FROM afk_task
             WHERE agent_id = p_agent AND state IN ('todo', 'paused')
               AND run_after > now() AND run_after < afk_held());
END $$;

-- Whether a task of concurrency key p_key may start (0019): the key's row is
-- locked until the claim commits (a key another claimer holds is passed
-- over: SKIP LOCKED), and a task of the same key finished by the same
-- statement (p_freed) is counted out.
CREATE OR REPLACE FUNCTION afk_concurrency_room(p_key text, p_freed text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM afk_concurrency c
         WHERE c.key = p_key
           AND c.running - (p_freed IS NOT DISTINCT FROM p_key)::int < c.lim
           FOR UPDATE SKIP LOCKED);
END $$;

-- A finish ends the task's run where one is open, and only a claim under an
-- account (a supervisor's) starts one. The task says whether it was ever so
-- claimed (had_run): a task that never was (an API worker's) is finished
-- without looking for a run, which cost a finish 25-35 us (a table and an
-- index opened, measured with EXPLAIN ANALYZE, paired).
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS had_run boolean NOT NULL DEFAULT false;
UPDATE afk_task SET had_run = true
 WHERE NOT had_run AND id IN (SELECT task_id FROM afk_run);
