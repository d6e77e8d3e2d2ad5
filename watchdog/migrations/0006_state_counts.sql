-- Task counts per state that stay cheap as done rows pile up: the open states
-- (todo, running, paused, failed) are counted exactly through their partial
-- indexes; done is counted exactly while the table is small, and from the
-- planner's row estimate (pg_class.reltuples, kept by autovacuum) beyond
-- exact_below rows, where an exact count would scan the whole table.

CREATE OR REPLACE FUNCTION afk_state_counts(exact_below bigint DEFAULT 200000)
RETURNS TABLE (state text, n bigint, exact boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    estimate bigint;
    open_total bigint := 0;
    c bigint;
BEGIN
    SELECT count(*) INTO c FROM afk_task t WHERE t.state IN ('todo', 'paused') AND t.state = 'todo';
    state := 'todo'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state IN ('todo', 'paused') AND t.state = 'paused';
    state := 'paused'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'running';
    state := 'running'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'failed';
    state := 'failed'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT reltuples::bigint INTO estimate FROM pg_class WHERE oid = 'afk_task'::regclass;
    state := 'done';
    IF estimate IS NULL OR estimate < exact_below THEN
        SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'done';
        n := c; exact := true;
    ELSE
        n := greatest(estimate - open_total, 0); exact := false;
    END IF;
    RETURN NEXT;
END
$$;
