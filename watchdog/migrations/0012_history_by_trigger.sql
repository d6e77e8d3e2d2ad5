-- The history row of every change of a task's state or lease token is
-- written by one trigger, from the row before and after and from the reason
-- the writer passed in, so that no statement can forget it (each used to
-- insert its own, fourteen times over).
--
-- A writer names the change in change_reason, and where it has them in
-- change_error (the error it reports) and change_by (a person, for a change
-- no lease is part of). The trigger moves them into afk_task_event and
-- clears them: they are NULL on every stored row. A change made with none
-- (an operator's own UPDATE) is still recorded, as "changed by hand".
ALTER TABLE afk_task
    ADD COLUMN IF NOT EXISTS change_reason text,
    ADD COLUMN IF NOT EXISTS change_error  text,
    ADD COLUMN IF NOT EXISTS change_by     text;

CREATE OR REPLACE FUNCTION afk_task_history() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- the runner and the token matter where a lease is part of the change
    leased boolean := 'running' IN (OLD.state, NEW.state);
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state
       OR NEW.lease_token IS DISTINCT FROM OLD.lease_token THEN
        INSERT INTO afk_task_event
               (task_id, from_state, to_state, reason, runner, token, attempts, error)
        VALUES (NEW.id, OLD.state, NEW.state,
                coalesce(NEW.change_reason, 'changed by hand'),
                coalesce(NEW.change_by, CASE WHEN leased THEN NEW.lease_owner END,
                         CASE WHEN NEW.change_reason IS NULL THEN current_user::text END),
                CASE WHEN leased THEN NEW.lease_token END,
                NEW.attempts, NEW.change_error);
    END IF;
    NEW.change_reason := NULL;
    NEW.change_error := NULL;
    NEW.change_by := NULL;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS afk_task_history ON afk_task;
CREATE TRIGGER afk_task_history BEFORE UPDATE ON afk_task
    FOR EACH ROW
    WHEN (NEW.state IS DISTINCT FROM OLD.state
          OR NEW.lease_token IS DISTINCT FROM OLD.lease_token
          OR NEW.change_reason IS NOT NULL
          OR NEW.change_error IS NOT NULL
          OR NEW.change_by IS NOT NULL)
    EXECUTE FUNCTION afk_task_history();
