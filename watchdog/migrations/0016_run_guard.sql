-- What a supervisor sees of a run while it goes and when it ends.
--
-- permission_denials: the tools the agent was denied (Claude Code's -p mode
-- cannot ask for a permission: it lists them in its JSON result), each
-- {tool_name, tool_input}; a run that did not end done with denials is held
-- for a person instead of retried blindly.
--
-- last_sign, last_sign_at: the agent's last sign of life (its last line of
-- output, or a hook it fired), written with the supervisor's heartbeat, so
-- that the status page says what a running task last did and how long ago.
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS permission_denials jsonb;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS last_sign text;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS last_sign_at timestamptz;

CREATE OR REPLACE FUNCTION afk_end_run(
    p_task uuid, p_token bigint, p_outcome text, p_run jsonb, p_spent boolean
) RETURNS integer
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
               attempt_spent = p_spent
         WHERE task_id = p_task AND token = p_token AND ended_at IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM ended
$$;
