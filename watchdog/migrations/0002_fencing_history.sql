-- Closes the holes of the original design: per-agent ordinals that stay
-- unique under concurrency, fenced leases with an owner, retry backoff, and an
-- append-only history of every state change.

-- A table created by hand may name its enum type differently: give it the
-- design's name, afk_state, which our statements cast to (a table made from
-- the design has it already and is left as it is). The labels are checked.
DO $$
DECLARE
    current_name text;
BEGIN
    SELECT t.typname INTO current_name
      FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
     WHERE a.attrelid = 'afk_task'::regclass AND a.attname = 'state';
    IF current_name IS DISTINCT FROM 'afk_state' THEN
        EXECUTE format('ALTER TYPE %I RENAME TO afk_state', current_name);
    END IF;
    IF (SELECT array_agg(enumlabel::text ORDER BY enumsortorder) FROM pg_enum
         WHERE enumtypid = 'afk_state'::regtype)
       <> ARRAY['todo', 'running', 'paused', 'done', 'failed'] THEN
        RAISE EXCEPTION 'afk_task.state has unexpected labels; refusing to upgrade';
    END IF;
END
$$;

-- The lease: who holds it, under which fencing token, for how long per refresh.
CREATE SEQUENCE IF NOT EXISTS afk_lease_token_seq;
ALTER TABLE afk_task
    ADD COLUMN IF NOT EXISTS lease_owner   text,
    ADD COLUMN IF NOT EXISTS lease_token   bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS lease_seconds int,
    -- a reported failure below max_attempts waits until run_after
    ADD COLUMN IF NOT EXISTS run_after     timestamptz,
    ADD COLUMN IF NOT EXISTS result        jsonb;

-- Ordinals: the original took MAX(ordinal)+1 with no lock, so a table from it
-- may hold duplicates. Renumber only the agents that have them, keeping order.
UPDATE afk_task t
   SET ordinal = r.rn
  FROM (SELECT id, row_number() OVER (PARTITION BY agent_id
                                      ORDER BY ordinal, created_at, id) AS rn
          FROM afk_task
         WHERE agent_id IN (SELECT agent_id FROM afk_task
                             GROUP BY agent_id HAVING count(*) <> count(DISTINCT ordinal))) r
 WHERE t.id = r.id;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'afk_task_agent_ordinal_key') THEN
        ALTER TABLE afk_task
            ADD CONSTRAINT afk_task_agent_ordinal_key UNIQUE (agent_id, ordinal);
    END IF;
END
$$;

-- One counter row per agent; enqueue takes its row lock, which serialises
-- ordinal allocation for that agent only.
CREATE TABLE IF NOT EXISTS afk_agent (
    agent_id     text PRIMARY KEY,
    next_ordinal bigint NOT NULL
);
INSERT INTO afk_agent (agent_id, next_ordinal)
SELECT agent_id, max(ordinal) + 1 FROM afk_task GROUP BY agent_id
ON CONFLICT (agent_id) DO NOTHING;

-- A claim orders by ordinal among todo/paused rows and skips rows in backoff.
-- The design's partial indexes stay; claim and reclaim use them.

CREATE TABLE IF NOT EXISTS afk_task_event (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    uuid NOT NULL REFERENCES afk_task (id) ON DELETE CASCADE,
    at         timestamptz NOT NULL DEFAULT now(),
    from_state afk_state,
    to_state   afk_state NOT NULL,
    -- enqueued, claimed, resumed, paused, lease expired, failed, done, retried
    reason     text NOT NULL,
    runner     text,
    token      bigint,
    attempts   int,
    error      text
);
CREATE INDEX IF NOT EXISTS afk_task_event_task_idx ON afk_task_event (task_id, id);
CREATE INDEX IF NOT EXISTS afk_task_failed_idx ON afk_task (updated_at) WHERE state = 'failed';

-- History is append-only: an UPDATE is refused. Rows go only with their task
-- (ON DELETE CASCADE, used by the prune job).
CREATE OR REPLACE FUNCTION afk_task_event_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'afk_task_event is append-only';
END
$$;
DROP TRIGGER IF EXISTS afk_task_event_no_update ON afk_task_event;
CREATE TRIGGER afk_task_event_no_update BEFORE UPDATE ON afk_task_event
    FOR EACH ROW EXECUTE FUNCTION afk_task_event_append_only();

-- Rows that existed before the upgrade get a first history entry, so every
-- task has one.
INSERT INTO afk_task_event (task_id, at, to_state, reason, attempts, error)
SELECT id, updated_at, state, 'imported', attempts, last_error
  FROM afk_task t
 WHERE NOT EXISTS (SELECT 1 FROM afk_task_event e WHERE e.task_id = t.id);
