-- The side-effect ledger: a named effect of a task runs at most once per task
-- (exactly once when it writes to this database in the same transaction).

CREATE TABLE IF NOT EXISTS afk_task_effect (
    task_id        uuid NOT NULL REFERENCES afk_task (id) ON DELETE CASCADE,
    name           text NOT NULL,
    -- false while started and not (yet) recorded: the call may or may not have happened
    done           boolean NOT NULL DEFAULT false,
    result         jsonb,
    -- how many times a worker started it: more than one means a re-run after
    -- a worker died between its start and its record
    runs           int NOT NULL DEFAULT 0,
    started_token  bigint,
    started_at     timestamptz,
    recorded_token bigint,
    recorded_at    timestamptz,
    PRIMARY KEY (task_id, name)
);
