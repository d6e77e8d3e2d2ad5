-- What the watchdog service reads: when a running task last showed progress,
-- and an index for pruning old done rows.

ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS checkpoint_at timestamptz;
UPDATE afk_task SET checkpoint_at = updated_at WHERE state = 'running' AND checkpoint_at IS NULL;

CREATE INDEX IF NOT EXISTS afk_task_done_idx ON afk_task (updated_at) WHERE state = 'done';
