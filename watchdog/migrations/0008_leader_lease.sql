-- The watchdog's leader is a lease row, not a session advisory lock: a
-- session lock stays on whatever server connection a pooler in transaction
-- mode ran it on, so behind PgBouncer two replicas could both lead, or none.
-- A row works through any pooler and follows the tasks' discipline: taken
-- only when free or expired, renewed by its holder, and a new token for
-- every change of holder.
CREATE TABLE IF NOT EXISTS afk_leader (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    token      bigint NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
