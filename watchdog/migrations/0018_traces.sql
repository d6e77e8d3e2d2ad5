-- Traces (watchdog/tracing.py, with the otel extra and an OTLP endpoint):
-- a task keeps the W3C traceparent of the span that enqueued it, so that
-- its first attempt is that span's child and a retry links to it; a run
-- keeps the id of its attempt's trace (afk show, the task page's link).
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS trace_parent text;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS trace_id text;

-- The end of a run (0013) with all that a supervisor now records of it: the
-- tools denied (0016), the workspace's lineage and check (0017), the trace.

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
               before_sha = p_run ->> 'before_sha',
               after_sha = p_run ->> 'after_sha',
               changes = (p_run ->> 'changes')::integer,
               check_status = (p_run ->> 'check_status')::integer,
               check_tail = p_run ->> 'check_tail',
               trace_id = coalesce(p_run ->> 'trace_id', trace_id),
               attempt_spent = p_spent
         WHERE task_id = p_task AND token = p_token AND ended_at IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM ended
$$;
