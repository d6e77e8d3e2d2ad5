-- A task's history rows are written by its own trigger (afk_task_history,
-- 0012) in the statement that changes it, while the task's row is held: the
-- task exists by construction, so the foreign key that checked it again on
-- every history row goes. That check was a query per change, some 40 % of
-- what the history costs a claim or a finish (measured per row on batches of
-- 50: 6-7 us of 16). What the key also did, taking a task's history with it
-- when the task is deleted (a prune, `afk demo`'s clean-up, an operator's
-- own DELETE), is one statement-level trigger now, paid by deletes only.
ALTER TABLE afk_task_event DROP CONSTRAINT IF EXISTS afk_task_event_task_id_fkey;

CREATE OR REPLACE FUNCTION afk_task_history_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM afk_task_event e USING gone WHERE e.task_id = gone.id;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS afk_task_history_forget ON afk_task;
CREATE TRIGGER afk_task_history_forget AFTER DELETE ON afk_task
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION afk_task_history_forget();
