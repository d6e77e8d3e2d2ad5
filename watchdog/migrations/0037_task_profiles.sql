-- A task may narrow the profiles it runs under (issue 44 item 2: afk enqueue
-- --profiles max-1,max-2; --harness claude is a required label,
-- harness:claude, that a loop offers for the harnesses of its profiles). A
-- claim takes it only when the claimer offers one of them: afk_fits is the
-- one check of what a claimer offers against what a task asks for.
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS profiles text[];

CREATE OR REPLACE FUNCTION afk_fits(requires text[], profiles text[], labels text[],
                                    usable text[])
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (requires IS NULL OR coalesce(requires <@ labels, false))
       AND (profiles IS NULL OR coalesce(profiles && usable, false))
$$;

-- A run ends under the account of the profile it ran under: a loop that
-- places a task under another of its profiles than the one it claimed
-- under (the task's --profiles, its session's profile) says so in the run.
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
               attempt_spent = p_spent
         WHERE task_id = p_task AND token = p_token AND ended_at IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM ended
$$;
