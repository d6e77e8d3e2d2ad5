-- Dependencies (afk enqueue --after REF [--on-dep-failure cancel|run|hold]):
-- a task waits, in the state `blocked` that no claim takes, until every task
-- it names is done. REF is a task id or an idempotency key; a key may name a
-- task not enqueued yet (the row keeps the ref, and dep_id is filled in when
-- a task of that key is enqueued).
--
-- The finish that completes a task's last dependency unblocks it in the same
-- transaction (afk_dependency_finished, a trigger): no watchdog tick, no poll.
-- When a dependency fails, the dependent's on_dep_failure decides: `cancel`
-- (the default) fails it with "dependency failed: <id> <title>" (and so on
-- down the chain), `run` lets it run, `hold` keeps it blocked until a person
-- retries the dependency and it is done.
--
-- (A value added to an enum cannot be used in the transaction that adds it:
-- only the bodies of plpgsql functions, read when they run, name 'blocked'.)
ALTER TYPE afk_state ADD VALUE IF NOT EXISTS 'blocked';

ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS on_dep_failure text
    CHECK (on_dep_failure IN ('cancel', 'run', 'hold'));
-- whether a task is some task's dependency: the finish trigger's condition,
-- so a finish of a task no one waits for pays nothing
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS has_dependents boolean NOT NULL DEFAULT false;

CREATE TABLE IF NOT EXISTS afk_dependency (
    task_id  uuid NOT NULL REFERENCES afk_task (id) ON DELETE CASCADE,  -- the one waiting
    ref      text NOT NULL,  -- as given: a task id, or a key
    dep_id   uuid REFERENCES afk_task (id) ON DELETE SET NULL,  -- what it waits for
    PRIMARY KEY (task_id, ref)
);
CREATE INDEX IF NOT EXISTS afk_dependency_dep ON afk_dependency (dep_id);
CREATE INDEX IF NOT EXISTS afk_dependency_forward ON afk_dependency (ref) WHERE dep_id IS NULL;

-- A task enqueued with a key that others named before it existed: theirs now.
CREATE OR REPLACE FUNCTION afk_dependency_resolve() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH resolved AS (
        UPDATE afk_dependency d SET dep_id = n.id
          FROM new_rows n
         WHERE d.dep_id IS NULL AND n.idem_key IS NOT NULL AND d.ref = n.idem_key
        RETURNING d.dep_id
    )
    UPDATE afk_task SET has_dependents = true WHERE id IN (SELECT dep_id FROM resolved);
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS afk_dependency_resolve ON afk_task;
CREATE TRIGGER afk_dependency_resolve AFTER INSERT ON afk_task
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION afk_dependency_resolve();

-- A dependency finished: its blocked dependents fail (cancel), or become
-- claimable once every dependency of theirs is done (or failed, under run).
CREATE OR REPLACE FUNCTION afk_dependency_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- the dependents locked first, in one order: two dependencies finishing
    -- at once are serialised here, and the second sees the first (the next
    -- statement's snapshot is taken after the lock)
    PERFORM 1 FROM afk_task
      WHERE id IN (SELECT task_id FROM afk_dependency WHERE dep_id = NEW.id)
        AND state = 'blocked'
      ORDER BY id FOR UPDATE;
    IF NEW.state = 'failed' THEN
        UPDATE afk_task t
           SET state = 'failed', last_error = 'dependency failed: ' || NEW.id || ' ' || NEW.title,
               updated_at = now(), change_reason = 'dependency failed',
               change_error = 'dependency failed: ' || NEW.id || ' ' || NEW.title
         WHERE t.id IN (SELECT task_id FROM afk_dependency WHERE dep_id = NEW.id)
           AND t.state = 'blocked' AND coalesce(t.on_dep_failure, 'cancel') = 'cancel';
    END IF;
    UPDATE afk_task t
       SET state = 'todo', updated_at = now(), change_reason = 'unblocked'
     WHERE t.id IN (SELECT task_id FROM afk_dependency WHERE dep_id = NEW.id)
       AND t.state = 'blocked'
       AND NOT EXISTS (
           SELECT 1 FROM afk_dependency x LEFT JOIN afk_task d ON d.id = x.dep_id
            WHERE x.task_id = t.id
              AND NOT coalesce(d.state = 'done'
                               OR (d.state = 'failed' AND t.on_dep_failure = 'run'), false));
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS afk_dependency_finished ON afk_task;
CREATE TRIGGER afk_dependency_finished AFTER UPDATE OF state ON afk_task
    FOR EACH ROW
    WHEN (NEW.has_dependents AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('done', 'failed'))
    EXECUTE FUNCTION afk_dependency_finished();

-- The state counts of the gauges and the digest (0006), with blocked.
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
    SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'blocked';
    state := 'blocked'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
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
