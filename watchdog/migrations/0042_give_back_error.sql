-- A stall given back keeps what it printed as the task's error (issue 53
-- item 8, R10: `afk show` said last_error null after a stalled run, whose
-- last lines were only in its run's tail). afk_give_back (0038) takes the
-- error as an eighth argument, NULL (the error as it was) by default; the
-- seven-argument form is dropped, so no call is ambiguous.
DROP FUNCTION IF EXISTS afk_give_back(uuid[], bigint[], afk_state, timestamptz, text, text, jsonb);

CREATE OR REPLACE FUNCTION afk_give_back(p_ids uuid[], p_tokens bigint[], p_state afk_state,
                                         p_run_after timestamptz, p_reason text,
                                         p_outcome text, p_run jsonb,
                                         p_error text DEFAULT NULL)
RETURNS SETOF afk_task LANGUAGE sql AS $$
    WITH upd AS (
        UPDATE afk_task t
           SET state = p_state, attempts = greatest(t.attempts - 1, 0),
               run_after = p_run_after, lease_until = NULL, updated_at = now(),
               last_error = coalesce(p_error, t.last_error),
               change_reason = p_reason, change_error = p_error
          FROM unnest(p_ids, p_tokens) AS g(id, token)
         WHERE t.id = g.id AND t.state = 'running' AND t.lease_token = g.token
        RETURNING t.*
    ), ended AS (
        SELECT afk_end_run(id, lease_token, p_outcome, p_run, false) FROM upd
    )
    SELECT * FROM upd WHERE (SELECT count(*) FROM ended) >= 0
$$;
