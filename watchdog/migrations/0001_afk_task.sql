-- The afk_task table of the original design, unchanged. Every statement is
-- guarded, so a database that already holds this table (created by hand from
-- the design's DDL) passes through untouched and is upgraded by 0002.

DO $$
BEGIN
    IF to_regclass('afk_task') IS NULL
       AND to_regtype('afk_state') IS NULL THEN
        CREATE TYPE afk_state AS ENUM ('todo', 'running', 'paused', 'done', 'failed');
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS afk_task (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    agent_id     text NOT NULL,
    ordinal      int NOT NULL,
    title        text NOT NULL,
    spec         jsonb NOT NULL DEFAULT '{}'::jsonb,
    state        afk_state NOT NULL DEFAULT 'todo',
    checkpoint   jsonb NOT NULL DEFAULT '{}'::jsonb,
    idem_key     text UNIQUE,
    lease_until  timestamptz,
    attempts     int NOT NULL DEFAULT 0,
    max_attempts int NOT NULL DEFAULT 5,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS afk_task_claim_idx
    ON afk_task (agent_id, ordinal) WHERE state IN ('todo', 'paused');
CREATE INDEX IF NOT EXISTS afk_task_lease_idx
    ON afk_task (lease_until) WHERE state = 'running';
