-- The delivery ledger of the digest (and of poison alerts): one row per
-- destination, kind and period, claimed with a lease like a task, so two
-- replicas or a restart never send one period twice, and a crashed sender's
-- claim expires and is retried.

CREATE TABLE IF NOT EXISTS afk_digest_delivery (
    destination     text NOT NULL,
    kind            text NOT NULL DEFAULT 'digest',
    period          timestamptz NOT NULL,
    -- sending (claimed), pending (waiting for a retry), delivered, failed
    -- (refused for good), superseded (a later period covers it)
    state           text NOT NULL
        CHECK (state IN ('sending', 'pending', 'delivered', 'failed', 'superseded')),
    attempts        int NOT NULL DEFAULT 0,
    lease_token     bigint,
    lease_until     timestamptz,
    next_attempt_at timestamptz,
    window_start    timestamptz NOT NULL,
    window_end      timestamptz NOT NULL,
    last_status     int,
    last_error      text,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (destination, kind, period)
);
CREATE INDEX IF NOT EXISTS afk_digest_delivery_recent_idx ON afk_digest_delivery (updated_at);
