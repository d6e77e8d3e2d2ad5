-- Concurrency keys (afk enqueue --concurrency-key KEY [--concurrency-limit N]):
-- at most `lim` tasks of one key run at a time, across every agent and
-- runner. afk_concurrency keeps each key's limit (the first enqueued limit
-- stands: a key is one shared thing, a repository or a staging database, and
-- its limit is that thing's, not a task's) and how many of its tasks run now.
--
-- The count is kept by the triggers below as tasks enter and leave
-- 'running' (a claim, a finish, a pause, a reclaim, a deletion), so no writer
-- of afk_task has to remember it. A claim takes a task of a key only with the
-- key's row locked FOR UPDATE SKIP LOCKED and below its limit: a key another
-- claimer is taking at that instant is passed over, and a claimer whose
-- snapshot predates another's commit re-reads the row's newest version under
-- the lock (READ COMMITTED's re-check), so two claims can never both see room.
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS concurrency_key text;

CREATE TABLE IF NOT EXISTS afk_concurrency (
    key      text PRIMARY KEY,
    lim      integer NOT NULL CHECK (lim >= 1),
    running  integer NOT NULL DEFAULT 0 CHECK (running >= 0)
);

CREATE OR REPLACE FUNCTION afk_concurrency_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = 'running' THEN
        UPDATE afk_concurrency SET running = running + 1 WHERE key = NEW.concurrency_key;
        RETURN NEW;
    END IF;
    -- a task leaving 'running' (an update), or deleted while running
    UPDATE afk_concurrency SET running = greatest(running - 1, 0)
     WHERE key = OLD.concurrency_key;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS afk_concurrency_update ON afk_task;
CREATE TRIGGER afk_concurrency_update AFTER UPDATE OF state ON afk_task
    FOR EACH ROW
    WHEN (NEW.concurrency_key IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
          AND (OLD.state = 'running' OR NEW.state = 'running'))
    EXECUTE FUNCTION afk_concurrency_count();

DROP TRIGGER IF EXISTS afk_concurrency_delete ON afk_task;
CREATE TRIGGER afk_concurrency_delete AFTER DELETE ON afk_task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL AND OLD.state = 'running')
    EXECUTE FUNCTION afk_concurrency_count();
