-- Approvals answered from a phone (issue 43 items 4 and 5): each request is
-- pushed once to the alert destinations (alerted_at; the delivery ledger
-- keeps one row per destination), with links to the status server signed
-- by a secret of the server's own, kept here so that every replica signs
-- and checks with the same one (made once, at random, by the first that
-- needs it).
ALTER TABLE afk_approval ADD COLUMN IF NOT EXISTS alerted_at timestamptz;

CREATE TABLE IF NOT EXISTS afk_web_secret (
    name   text PRIMARY KEY,
    value  text NOT NULL,
    made_at timestamptz NOT NULL DEFAULT now()
);
