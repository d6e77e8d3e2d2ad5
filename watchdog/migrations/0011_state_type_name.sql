-- The state enum is called afk_state, as in the design. Versions before this
-- one named it afk_task_state, and their upgrade renamed the type of a table
-- made by hand from the design (afk_state) to that, breaking the owner's own
-- SQL that casts to afk_state. Give the name back. (Only our old name is
-- renamed, and only when afk_state is free; the column's type keeps its OID,
-- so nothing that uses it notices.)
DO $$
BEGIN
    IF (SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
         WHERE a.attrelid = 'afk_task'::regclass AND a.attname = 'state') = 'afk_task_state'
       AND to_regtype('afk_state') IS NULL THEN
        ALTER TYPE afk_task_state RENAME TO afk_state;
    END IF;
END
$$;
