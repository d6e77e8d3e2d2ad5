-- When an agent's earliest task in backoff (or not before its start time) is
-- due: what a claim that took nothing says (next_at). A function, called
-- only then: as a subquery of the claim statement, it was set up on every
-- claim, one that took a task too (an index and a table opened, a bitmap
-- readied), some 20-40 us of each (measured with EXPLAIN ANALYZE, paired).
CREATE OR REPLACE FUNCTION afk_next_due(p_agent text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT min(run_after) FROM afk_task
             WHERE agent_id = p_agent AND state IN ('todo', 'paused')
               AND run_after > now() AND run_after < afk_held());
END $$;
