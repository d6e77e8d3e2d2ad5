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
