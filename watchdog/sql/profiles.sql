-- owner: watchdog/agents/profiles.py
-- Profiles (migration 0035): the ways to run an agent, by name.

-- name: profile_add :one
-- A new profile; NULL when the name is taken (nothing changed).
INSERT INTO afk_profile (name, harness, command, env, account)
VALUES (%(name)s, %(harness)s, %(command)s, %(env)s::jsonb, %(account)s)
ON CONFLICT (name) DO NOTHING
RETURNING name, harness, command, env, account, made_at;

-- name: profiles :many retry
-- The profiles named (all of them with NULL), by name.
SELECT name, harness, command, env, account, made_at FROM afk_profile
 WHERE %(names)s::text[] IS NULL OR name = ANY (%(names)s::text[])
 ORDER BY name;

-- name: profile_remove :one
DELETE FROM afk_profile WHERE name = %(name)s RETURNING name;
