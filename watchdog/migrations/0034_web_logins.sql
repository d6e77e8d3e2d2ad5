-- The status pages' actions behind a login (issue 43 item 6): a person's
-- login token (afk web token) is kept as its SHA-256 only; a signed-in
-- browser holds a session cookie, also kept hashed here with its CSRF token
-- and its end. The read-only pages are as before (AFK_WEB_TOKEN).
CREATE TABLE IF NOT EXISTS afk_web_login (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL,
    token_hash  text NOT NULL UNIQUE,
    made_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE IF NOT EXISTS afk_web_session (
    id_hash     text PRIMARY KEY,
    login_id    bigint NOT NULL REFERENCES afk_web_login (id) ON DELETE CASCADE,
    csrf        text NOT NULL,
    made_at     timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS afk_web_session_expires ON afk_web_session (expires_at);
