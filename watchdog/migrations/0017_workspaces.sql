-- Each task in its own git worktree.
--
-- afk_task.workspace: what the task asked for at enqueue (NULL: no
-- workspace), {repo, base, branch, verify, require_changes}: the repository's
-- top folder, the ref to start from (NULL: the repository's HEAD at the first
-- claim), the branch (NULL: afk/<id>-<slug>), the check that must pass
-- before done, and whether a run must change something.
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS workspace jsonb;

-- afk_workspace: the worktree a task got at its first claim, kept for its
-- retries, resumes and reclaims: where it is, its branch and the commit it
-- started from, its head after the last run, and the block of ports it holds
-- while it lives (two live workspaces never share a port). removed_at: `afk
-- gc` took the worktree away (trash_ref: where what it held was saved first).
CREATE TABLE IF NOT EXISTS afk_workspace (
    task_id     uuid PRIMARY KEY REFERENCES afk_task (id) ON DELETE CASCADE,
    repo        text NOT NULL,
    branch      text NOT NULL,
    path        text NOT NULL,
    base_sha    text NOT NULL,
    head_sha    text,
    port        integer,
    ports       integer,
    made_at     timestamptz NOT NULL DEFAULT now(),
    removed_at  timestamptz,
    trash_ref   text
);
CREATE UNIQUE INDEX IF NOT EXISTS afk_workspace_branch
    ON afk_workspace (repo, branch) WHERE removed_at IS NULL;
CREATE INDEX IF NOT EXISTS afk_workspace_port ON afk_workspace (port) WHERE removed_at IS NULL;

-- A run's lineage and its check: the worktree's head before and after it,
-- how many commits it added, and the check's exit status and tail.
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS before_sha text;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS after_sha text;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS changes integer;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS check_status integer;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS check_tail text;
-- (afk_end_run writes them: see 0018, its last version.)
