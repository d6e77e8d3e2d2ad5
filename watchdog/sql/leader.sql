-- owner: watchdog/service.py
-- The leader lease of the watchdog replicas.
-- Parameters are psycopg's %(name)s; times are always the database's now().

-- name: leader_take :one retry
-- Take the leader lease if it is free or expired, or renew it if we hold it;
-- no row back means another replica holds it. The token grows with every
-- change of holder.
INSERT INTO afk_leader AS l (name, holder, token, elected_at, expires_at)
VALUES (%(name)s, %(holder)s, 1, now(), now() + make_interval(secs => %(ttl)s))
ON CONFLICT (name) DO UPDATE
   SET holder = EXCLUDED.holder,
       token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > now()
                    THEN l.token ELSE l.token + 1 END,
       elected_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > now()
                         THEN l.elected_at ELSE now() END,
       expires_at = EXCLUDED.expires_at
 WHERE l.holder = EXCLUDED.holder OR l.expires_at <= now()
RETURNING token, elected_at

-- name: leader_release :exec retry
-- A clean stop hands over at once: the next replica's check takes it.
UPDATE afk_leader SET expires_at = now()
 WHERE name = %(name)s AND holder = %(holder)s AND expires_at > now()
