-- Until when a task of an agent is held while nothing of the agent can be
-- claimed (held_until, beside a claim's next_at): the end of the soonest
-- lease that holds a task of the agent (its holder may be dead: once that
-- lease runs out the task is taken back and can be claimed), and, for a task
-- of the agent due now that waits only for room under its concurrency key,
-- the end of the soonest lease of a task that holds that key. A loop looks
-- again then instead of leaving while a dead loop's lease or another agent's
-- task under its key still holds one of its tasks (issue 41 item 5). NULL:
-- nothing holds a task of the agent.
CREATE OR REPLACE FUNCTION afk_held_until(p_agent text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN least(
        (SELECT min(lease_until) FROM afk_task
          WHERE agent_id = p_agent AND state = 'running'),
        (SELECT min(h.lease_until)
           FROM afk_task t JOIN afk_task h ON h.concurrency_key = t.concurrency_key
          WHERE t.agent_id = p_agent AND t.state IN ('todo', 'paused')
            AND t.concurrency_key IS NOT NULL
            AND (t.run_after IS NULL OR t.run_after <= now())
            AND h.state = 'running'));
END $$;
