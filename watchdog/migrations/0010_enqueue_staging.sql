-- A large enqueue COPYs its rows here, then one INSERT … SELECT (the enqueue
-- statement) moves them into afk_task and deletes them, in one transaction.
-- COPY is several times faster than any parameter encoding of the rows.
-- Unlogged: nothing here outlives its transaction. A table rather than a
-- temporary one, so that it works through a pooler in transaction mode and
-- costs no catalog writes per batch; `batch` keeps concurrent batches apart.
CREATE UNLOGGED TABLE IF NOT EXISTS afk_enqueue_staging (
    batch        uuid NOT NULL,
    n            int NOT NULL,
    title        text NOT NULL,
    spec         jsonb,
    idem_key     text,
    max_attempts int
);
