-- owner: watchdog/workspaces.py
-- Each task's git worktree (migration 0017): made at its first claim, kept
-- for its retries and reclaims, and its block of ports.

-- name: workspace_of :one retry
-- A task's workspace request, and the worktree it has, if any.
SELECT t.id AS task_id, t.title, t.workspace AS request, w.repo, w.branch, w.path,
       w.base_sha, w.head_sha, w.port, w.ports, w.made_at, w.removed_at, w.trash_ref,
       w.pinned, w.stacked_on
  FROM afk_task t LEFT JOIN afk_workspace w ON w.task_id = t.id
 WHERE t.id = %(id)s;

-- name: workspace_stack_base :one retry
-- The branch a task's new worktree starts from when it depends on a task
-- with a worktree of the same repository: that dependency's, the one made
-- last (none: it starts from its base).
SELECT w.branch
  FROM afk_dependency d JOIN afk_workspace w ON w.task_id = d.dep_id
 WHERE d.task_id = %(id)s AND w.repo = %(repo)s
 ORDER BY w.made_at DESC
 LIMIT 1;

-- name: workspace_pinned :exec
-- The agent configuration a task's worktree may run with: recorded when its
-- worktree is first looked at, and again when a person trusts what changed.
UPDATE afk_workspace SET pinned = %(pinned)s::jsonb WHERE task_id = %(id)s;

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

-- name: workspace_made :row
-- The worktree a task got (or has again), with a block of %(ports)s ports
-- from %(first_port)s on that overlaps no other live workspace's: the first
-- free one, chosen under a lock by afk_free_ports (migration 0021), so two
-- makers never pick the same block. A workspace made before keeps its
-- branch, base and ports.
INSERT INTO afk_workspace AS w (task_id, repo, branch, path, base_sha, head_sha, port, ports,
                                stacked_on)
SELECT %(id)s, %(repo)s, %(branch)s, %(path)s, %(base_sha)s, %(base_sha)s,
       afk_free_ports(%(id)s, %(first_port)s::int, %(last_port)s::int, %(ports)s::int),
       %(ports)s, %(stacked_on)s
ON CONFLICT (task_id) DO UPDATE
   SET path = EXCLUDED.path, removed_at = NULL,
       port = coalesce(w.port, EXCLUDED.port), ports = coalesce(w.ports, EXCLUDED.ports)
RETURNING task_id, repo, branch, path, base_sha, head_sha, port, ports, stacked_on;

-- name: workspace_head :exec
-- A task's worktree head after a run.
UPDATE afk_workspace SET head_sha = %(head_sha)s WHERE task_id = %(id)s;

-- name: workspaces_done :many retry
-- The done tasks with a worktree, newest first, of one agent or all, done in
-- the last %(since)s seconds: what the morning reviews. Each with what its
-- runs cost and its last run's check.
SELECT t.id, t.agent_id, t.title, t.updated_at AS done_at, w.repo, w.branch, w.path,
       w.base_sha, w.head_sha, w.port, w.removed_at, w.trash_ref, w.stacked_on,
       t.workspace ->> 'base' AS base, t.workspace ->> 'verify' AS verify,
       (SELECT sum(r.cost_usd) FROM afk_run r WHERE r.task_id = t.id)::float8 AS cost_usd,
       (SELECT jsonb_build_object('status', r.check_status, 'tail', right(r.check_tail, 500))
          FROM afk_run r WHERE r.task_id = t.id AND r.ended_at IS NOT NULL
         ORDER BY r.ended_at DESC LIMIT 1) AS last_check,
       (SELECT count(*) FROM afk_run r
         WHERE r.task_id = t.id AND jsonb_typeof(r.permission_denials) = 'array'
           AND r.permission_denials <> '[]') AS runs_denied
  FROM afk_task t JOIN afk_workspace w ON w.task_id = t.id
 WHERE t.state = 'done'
   AND (%(agent)s::text IS NULL OR t.agent_id = %(agent)s::text)
   AND t.updated_at >= now() - make_interval(secs => %(since)s::float8)
 ORDER BY t.updated_at DESC
 LIMIT %(limit)s;

-- name: workspaces_live :many retry
-- Every workspace not yet removed, with its task's state and age: what
-- `afk gc` weighs.
SELECT w.task_id, t.state::text AS state, left(t.title, 300) AS title, w.repo, w.branch,
       w.path, w.base_sha, w.head_sha, t.workspace ->> 'base' AS base,
       extract(epoch FROM now() - t.updated_at)::float8 AS age
  FROM afk_workspace w JOIN afk_task t ON t.id = w.task_id
 WHERE w.removed_at IS NULL
 ORDER BY t.updated_at;

-- name: workspace_removed :exec
-- `afk gc` took a worktree away (its port block is free again); trash_ref:
-- where what it held was saved first, for `afk restore`.
UPDATE afk_workspace SET removed_at = now(), trash_ref = %(trash_ref)s, port = NULL
 WHERE task_id = %(id)s;

-- name: workspace_restored :exec
-- `afk restore` brought a removed worktree back.
UPDATE afk_workspace SET removed_at = NULL, path = %(path)s, branch = %(branch)s
 WHERE task_id = %(id)s;

-- name: workspace_counts :many retry
-- The live workspaces per state of their task, and their folders (the gauges).
SELECT t.state::text AS state, count(*) AS n, array_agg(w.path) AS paths
  FROM afk_workspace w JOIN afk_task t ON t.id = w.task_id
 WHERE w.removed_at IS NULL
 GROUP BY t.state;

-- name: workspaces_used :one retry
-- Whether any task asked for a workspace (afk doctor then needs git).
SELECT EXISTS (SELECT 1 FROM afk_task WHERE workspace IS NOT NULL) AS used;
