-- The one pause that gives the attempt back (issue 42 item 3): a running
-- task, fenced by its token, goes to p_state (paused, or todo) with its
-- attempt given back, due again at p_run_after (NULL: at once; afk_held():
-- held for a person), its lease ended, and its run ended with p_outcome and
-- p_run. Every statement that stops a task for a reason that is not the
-- task's (a pause, a Stop, a question, a release) goes through it; it
-- returns the tasks it gave back.
CREATE OR REPLACE FUNCTION afk_give_back(p_ids uuid[], p_tokens bigint[], p_state afk_state,
                                         p_run_after timestamptz, p_reason text,
                                         p_outcome text, p_run jsonb)
RETURNS SETOF afk_task LANGUAGE sql AS $$
    WITH upd AS (
        UPDATE afk_task t
           SET state = p_state, attempts = greatest(t.attempts - 1, 0),
               run_after = p_run_after, lease_until = NULL, updated_at = now(),
               change_reason = p_reason
          FROM unnest(p_ids, p_tokens) AS g(id, token)
         WHERE t.id = g.id AND t.state = 'running' AND t.lease_token = g.token
        RETURNING t.*
    ), ended AS (
        SELECT afk_end_run(id, lease_token, p_outcome, p_run, false) FROM upd
    )
    SELECT * FROM upd WHERE (SELECT count(*) FROM ended) >= 0
$$;
