-- owner: watchdog/doctor.py
-- What `afk doctor` asks the database, in one round trip: its clock, and
-- whether a watchdog service holds the leader lease.

-- name: doctor :row retry
SELECT now() AS now,
       l.holder AS leader,
       coalesce(l.expires_at > now(), false) AS leading,
       extract(epoch FROM l.expires_at - now())::float8 AS lease_left
  FROM (VALUES (1)) AS one
  LEFT JOIN afk_leader l ON l.name = 'watchdog';

-- name: hook_proof_secret :one retry
-- The secret the service proves itself with on the hook port (R1; made by
-- the service that answers HTTP hooks): none until one has.
SELECT value FROM afk_web_secret WHERE name = %(name)s;
