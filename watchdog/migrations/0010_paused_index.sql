-- Paused rows by agent, for the status page's per-agent counts and the
-- digest's "paused too long": paused rows are few, so the index is small,
-- and without it either question scans an agent's whole backlog.
CREATE INDEX IF NOT EXISTS afk_task_paused_idx ON afk_task (agent_id, updated_at)
    WHERE state = 'paused';
