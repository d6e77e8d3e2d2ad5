-- The first free block of ports for a workspace, picked under a lock that
-- lasts until the caller's transaction ends. The lock and the look are two
-- statements of a plpgsql function, so the look reads the database as it is
-- after the wait (READ COMMITTED takes a snapshot per statement): a maker
-- that waited for another sees the block the other took. In one SQL
-- statement (0017's workspace_made), the snapshot was taken before the wait,
-- and two makers could pick the same block.
CREATE OR REPLACE FUNCTION afk_free_ports(
    p_task uuid, p_first integer, p_last integer, p_ports integer
) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('afk_workspace_ports'));
    SELECT p INTO found
      FROM generate_series(p_first, p_last, p_ports) p
     WHERE NOT EXISTS (
        SELECT 1 FROM afk_workspace w
         WHERE w.removed_at IS NULL AND w.port IS NOT NULL AND w.task_id <> p_task
           AND int4range(w.port, w.port + w.ports) && int4range(p, p + p_ports))
     ORDER BY p LIMIT 1;
    RETURN found;
END $$;
