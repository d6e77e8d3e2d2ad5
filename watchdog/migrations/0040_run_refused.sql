-- What a run's broker refused it (issue 49 item 3): another task's id or
-- token by any route, a command no agent runs, an option that reaches past
-- its task. Kept on the run, so that `afk show` says what the agent tried.
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS refused jsonb;

CREATE OR REPLACE FUNCTION afk_end_run(p_task uuid, p_token bigint, p_outcome text, p_run jsonb, p_spent boolean) RETURNS integer
LANGUAGE sql AS $$
    WITH ended AS (
        UPDATE afk_run
           SET ended_at = now(),
               outcome = coalesce(p_run ->> 'outcome', p_outcome),
               exit_status = (p_run ->> 'exit_status')::integer,
               output_tail = p_run ->> 'output_tail',
               session_id = p_run ->> 'session_id',
               cost_usd = (p_run ->> 'cost_usd')::numeric,
               turns = (p_run ->> 'turns')::integer,
               usage = p_run -> 'usage',
               permission_denials = p_run -> 'permission_denials',
               before_sha = p_run ->> 'before_sha',
               after_sha = p_run ->> 'after_sha',
               changes = (p_run ->> 'changes')::integer,
               check_status = (p_run ->> 'check_status')::integer,
               check_tail = p_run ->> 'check_tail',
               trace_id = coalesce(p_run ->> 'trace_id', trace_id),
               sandbox = p_run -> 'sandbox',
               profile = coalesce(p_run ->> 'profile', profile),
               account = coalesce(p_run ->> 'account', account),
               refused = p_run -> 'refused',
               attempt_spent = p_spent
         WHERE task_id = p_task AND token = p_token AND ended_at IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM ended
$$;
