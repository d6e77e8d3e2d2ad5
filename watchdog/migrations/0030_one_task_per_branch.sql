-- One task per branch of a repository (issue 41, P22): git checks a branch
-- out in one worktree only, and `afk enqueue` checked that no other task used
-- a --branch in one statement, then inserted in another, so two racing
-- enqueues both passed. The check now runs where every writer of a task
-- goes through it, under a lock per (repository, branch) held to the end of
-- the inserting transaction: the second writer waits for the first to
-- commit, then sees its task (each statement of a volatile function reads a
-- fresh snapshot) and is refused with SQLSTATE AFK22, which afk reports as
-- bad input. A task whose key exists already is let through: its insert is
-- skipped by ON CONFLICT (a plan enqueued twice changes nothing).
CREATE OR REPLACE FUNCTION afk_one_task_per_branch() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    want_repo text := NEW.workspace ->> 'repo';
    want_branch text := NEW.workspace ->> 'branch';
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('afk branch' || E'\n' || want_repo || E'\n' || want_branch, 0));
    IF EXISTS (
        SELECT 1 FROM afk_workspace w
         WHERE w.repo = want_repo AND w.branch = want_branch AND w.removed_at IS NULL
           AND w.task_id <> NEW.id
        UNION ALL
        SELECT 1 FROM afk_task t
         WHERE t.workspace ->> 'repo' = want_repo AND t.workspace ->> 'branch' = want_branch
           AND t.state <> 'done' AND t.id <> NEW.id
    ) AND NOT EXISTS (SELECT 1 FROM afk_task k WHERE k.idem_key = NEW.idem_key) THEN
        RAISE EXCEPTION '--branch % is another task''s workspace; nothing was enqueued', want_branch
            USING ERRCODE = 'AFK22';
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS afk_one_task_per_branch ON afk_task;
CREATE TRIGGER afk_one_task_per_branch BEFORE INSERT ON afk_task
    FOR EACH ROW WHEN (NEW.workspace ->> 'branch' IS NOT NULL)
    EXECUTE FUNCTION afk_one_task_per_branch();
