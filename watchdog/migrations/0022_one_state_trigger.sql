-- One trigger after a task's state changes, instead of two. The count of a
-- concurrency key (0019) and the settling of a finished dependency's
-- dependents (0020) each had a row trigger of its own, and every claim and
-- every finish paid for both conditions even when neither applied (a task
-- with no key that no one waits for): measured with pgbench, 3-7 % of the
-- claim-and-finish statements. Now one condition is asked, and the function
-- does what applies.

-- A finished dependency's blocked dependents: they fail (cancel), or become
-- claimable once every dependency of theirs is done (or failed, under run).
CREATE OR REPLACE FUNCTION afk_dependency_settle(p_id uuid, p_title text, p_failed boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- the dependents locked first, in one order: two dependencies finishing
    -- at once are serialised here, and the second sees the first (the next
    -- statement's snapshot is taken after the lock)
    PERFORM 1 FROM afk_task
      WHERE id IN (SELECT task_id FROM afk_dependency WHERE dep_id = p_id)
        AND state = 'blocked'
      ORDER BY id FOR UPDATE;
    IF p_failed THEN
        UPDATE afk_task t
           SET state = 'failed', last_error = 'dependency failed: ' || p_id || ' ' || p_title,
               updated_at = now(), change_reason = 'dependency failed',
               change_error = 'dependency failed: ' || p_id || ' ' || p_title
         WHERE t.id IN (SELECT task_id FROM afk_dependency WHERE dep_id = p_id)
           AND t.state = 'blocked' AND coalesce(t.on_dep_failure, 'cancel') = 'cancel';
    END IF;
    UPDATE afk_task t
       SET state = 'todo', updated_at = now(), change_reason = 'unblocked'
     WHERE t.id IN (SELECT task_id FROM afk_dependency WHERE dep_id = p_id)
       AND t.state = 'blocked'
       AND NOT EXISTS (
           SELECT 1 FROM afk_dependency x LEFT JOIN afk_task d ON d.id = x.dep_id
            WHERE x.task_id = t.id
              AND NOT coalesce(d.state = 'done'
                               OR (d.state = 'failed' AND t.on_dep_failure = 'run'), false));
END $$;

CREATE OR REPLACE FUNCTION afk_task_state_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- a task of a concurrency key entering or leaving 'running'
    IF NEW.concurrency_key IS NOT NULL AND 'running' IN (OLD.state, NEW.state) THEN
        IF NEW.state = 'running' THEN
            UPDATE afk_concurrency SET running = running + 1 WHERE key = NEW.concurrency_key;
        ELSE
            UPDATE afk_concurrency SET running = greatest(running - 1, 0)
             WHERE key = OLD.concurrency_key;
        END IF;
    END IF;
    -- a dependency done or failed
    IF NEW.has_dependents AND NEW.state IN ('done', 'failed') THEN
        PERFORM afk_dependency_settle(NEW.id, NEW.title, NEW.state = 'failed');
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS afk_concurrency_update ON afk_task;
DROP TRIGGER IF EXISTS afk_dependency_finished ON afk_task;
DROP FUNCTION IF EXISTS afk_dependency_finished();
DROP TRIGGER IF EXISTS afk_task_state_changed ON afk_task;
CREATE TRIGGER afk_task_state_changed AFTER UPDATE OF state ON afk_task
    FOR EACH ROW
    WHEN ((NEW.concurrency_key IS NOT NULL OR NEW.has_dependents)
          AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION afk_task_state_changed();
