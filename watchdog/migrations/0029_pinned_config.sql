-- The agent's own configuration a task's worktree may run with (issue 40
-- item 4): {path: sha256} of the worktree's .claude/, .mcp.json, .codex/,
-- .gemini/, .cursor/ and .github/hooks/, and of the repository's .git/config
-- and .git/hooks, as they were when the worktree was made, or as a person
-- trusted them since (afk trust). NULL: not yet recorded.
ALTER TABLE afk_workspace ADD COLUMN IF NOT EXISTS pinned jsonb;

-- The branch of the task's dependency its worktree started from (issue 41
-- item 6: a task --after another on the same repository stacks on its work);
-- NULL for a worktree made from its base.
ALTER TABLE afk_workspace ADD COLUMN IF NOT EXISTS stacked_on text;
