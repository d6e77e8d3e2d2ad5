-- owner: watchdog/agents/accounts.py
-- Accounts: what a usage limit applies to (one agent login, one API key). A
-- parked account's claims take nothing until its end (or a person clears it);
-- see migration 0013. Times are the database's now().

-- name: park :row
-- Park %(account)s until %(until)s (NULL: until a person clears it), by the
-- rules of afk_park(): an open parking is extended, never shortened, except
-- by hand.
SELECT account, kind, reason, until AS limited_until, parked_at, now() AS db_now
  FROM afk_park(%(account)s, %(kind)s, %(reason)s, %(until)s::timestamptz);

-- name: clear :many retry
-- A person unparks an account (a replay clears nothing more).
UPDATE afk_account_park
   SET cleared_at = now(), cleared_by = %(who)s
 WHERE account = %(account)s AND cleared_at IS NULL
RETURNING account, kind, reason, until AS limited_until, parked_at;

-- name: parked :many retry
-- The accounts parked now (all, or one), soonest end first, no end last.
SELECT account, kind, reason, until AS limited_until, parked_at
  FROM afk_account_park
 WHERE cleared_at IS NULL AND (until IS NULL OR until > now())
   AND (%(account)s::text IS NULL OR account = %(account)s::text)
 ORDER BY until NULLS LAST, account;

-- name: clock :row retry
-- The database's clock: the one every time here is read from.
SELECT now() AS now;

-- name: spent_today :row retry
-- What an account's runs cost since midnight in zone %(tz)s, and when the
-- next midnight is (where a daily budget's parking ends).
SELECT coalesce(sum(cost_usd), 0)::float8 AS spent,
       (date_trunc('day', now() AT TIME ZONE %(tz)s) + interval '1 day')
           AT TIME ZONE %(tz)s AS next_midnight
  FROM afk_run
 WHERE account = %(account)s
   AND started_at >= date_trunc('day', now() AT TIME ZONE %(tz)s) AT TIME ZONE %(tz)s;
