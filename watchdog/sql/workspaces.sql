-- owner: watchdog/workspaces.py
-- Each task's git worktree (migration 0017): made at its first claim, kept
-- for its retries and reclaims, and its block of ports.

-- name: workspace_of :one retry
-- A task's workspace request, and the worktree it has, if any.
SELECT t.id AS task_id, t.title, t.workspace AS request, w.repo, w.branch, w.path,
       w.base_sha, w.head_sha, w.port, w.ports, w.made_at, w.removed_at, w.trash_ref
  FROM afk_task t LEFT JOIN afk_workspace w ON w.task_id = t.id
 WHERE t.id = %(id)s;

-- name: workspace_adopt :one
-- A supervisor's default (afk loop --repo) for a task that asked for none:
-- written once, never over a task's own request.
UPDATE afk_task SET workspace = %(request)s::jsonb
 WHERE id = %(id)s AND workspace IS NULL
RETURNING workspace AS request;

-- name: workspace_branch_taken :one retry
-- Whether another task's workspace uses (or asked for) %(branch)s of %(repo)s.
SELECT EXISTS (
    SELECT 1 FROM afk_workspace
     WHERE repo = %(repo)s AND branch = %(branch)s AND removed_at IS NULL
    UNION ALL
    SELECT 1 FROM afk_task
     WHERE workspace ->> 'repo' = %(repo)s AND workspace ->> 'branch' = %(branch)s
       AND state <> 'done'
) AS taken;

-- name: workspace_made :one
-- The worktree a task got (or has again), with a block of %(ports)s ports
-- from %(first_port)s on that overlaps no other live workspace's: the first
-- free one, chosen under a lock, so two makers never pick the same block.
-- A workspace made before keeps its branch, base and ports.
WITH lock AS (
    SELECT pg_advisory_xact_lock(hashtext('afk_workspace_ports')) AS held
), free AS (
    SELECT p FROM lock, generate_series(%(first_port)s::int, %(last_port)s::int, %(ports)s::int) p
     WHERE NOT EXISTS (
        SELECT 1 FROM afk_workspace w
         WHERE w.removed_at IS NULL AND w.port IS NOT NULL AND w.task_id <> %(id)s
           AND int4range(w.port, w.port + w.ports) && int4range(p, p + %(ports)s::int))
     ORDER BY p LIMIT 1
)
INSERT INTO afk_workspace AS w (task_id, repo, branch, path, base_sha, head_sha, port, ports)
SELECT %(id)s, %(repo)s, %(branch)s, %(path)s, %(base_sha)s, %(base_sha)s,
       (SELECT p FROM free), %(ports)s
ON CONFLICT (task_id) DO UPDATE
   SET path = EXCLUDED.path, removed_at = NULL,
       port = coalesce(w.port, EXCLUDED.port), ports = coalesce(w.ports, EXCLUDED.ports)
RETURNING task_id, repo, branch, path, base_sha, head_sha, port, ports;

-- name: workspace_head :exec
-- A task's worktree head after a run.
UPDATE afk_workspace SET head_sha = %(head_sha)s WHERE task_id = %(id)s;
