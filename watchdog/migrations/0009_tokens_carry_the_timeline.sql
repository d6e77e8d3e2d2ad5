-- Fencing tokens that stay unique across a failover.
--
-- A sequence WAL-logs ahead: one record reserves the next 32 values, and the
-- values are then handed out without WAL. With asynchronous replication the
-- last commits before a primary crashes can be lost, and with them the record
-- that reserved the values just handed out: the promoted standby hands them
-- out again. A zombie holding such a token (its claim was lost with the
-- crash) would then match the token of the runner that holds the task now.
--
-- Every promotion starts a new timeline, so a token is the timeline in its
-- high bits and the sequence in its low 40: tokens handed out on different
-- timelines never match, and tokens still grow (a promotion raises the
-- timeline). pg_walfile_name() gives the timeline WAL is being written on,
-- which is the new one from the moment a promoted server accepts writes.
CREATE OR REPLACE FUNCTION afk_next_token() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
            << 40)
           | (nextval('afk_lease_token_seq') & ((1::bigint << 40) - 1))
$$;
