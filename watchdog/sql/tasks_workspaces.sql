-- owner: watchdog/workspaces.py
-- The statements of workspaces that write afk_task (the family of writers:
-- watchdog/sql/__init__.py). Times are always the database's now().

-- name: workspace_adopt :one
-- A supervisor's default (afk loop --repo) for a task that asked for none:
-- written once, never over a task's own request.
UPDATE afk_task SET workspace = %(request)s::jsonb
 WHERE id = %(id)s AND workspace IS NULL
RETURNING workspace AS request;
