-- A night of agent work meets the agent's own account: a usage limit, an
-- overloaded API, a logged-out login. Those are not the task's failures and
-- must spend none of its attempts. Two tables make them visible.
--
-- afk_account_park: an account (one Claude login, one API key: what a limit
-- applies to) parked until a time, or with no end until a person clears it.
-- One row per parking, kept as the night's record; at most one is open per
-- account (cleared_at IS NULL and its end not passed). A claim under a parked
-- account takes nothing.
CREATE TABLE IF NOT EXISTS afk_account_park (
    id          bigserial PRIMARY KEY,
    account     text NOT NULL,
    -- usage_limit, outage, needs_human, budget or manual
    kind        text NOT NULL,
    reason      text NOT NULL,
    parked_at   timestamptz NOT NULL DEFAULT now(),
    -- NULL: until a person clears it
    until       timestamptz,
    cleared_at  timestamptz,
    cleared_by  text
);
CREATE UNIQUE INDEX IF NOT EXISTS afk_account_park_open
    ON afk_account_park (account) WHERE cleared_at IS NULL;
CREATE INDEX IF NOT EXISTS afk_account_park_parked_at ON afk_account_park (parked_at);

-- afk_run: one run of an agent on a task, started by a claim made under an
-- account (a supervisor's) and ended by the statement that settles it: how it
-- ended (the outcome class), the agent's exit status, the tail of what it
-- said, its session id and cost when it printed them, and whether the task
-- spent an attempt on it. A run whose supervisor died stays open.
CREATE TABLE IF NOT EXISTS afk_run (
    id            bigserial PRIMARY KEY,
    task_id       uuid NOT NULL REFERENCES afk_task (id) ON DELETE CASCADE,
    token         bigint NOT NULL,
    agent_id      text NOT NULL,
    runner        text,
    account       text NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    ended_at      timestamptz,
    outcome       text,
    exit_status   integer,
    output_tail   text,
    session_id    text,
    cost_usd      numeric,
    turns         integer,
    usage         jsonb,
    attempt_spent boolean
);
CREATE INDEX IF NOT EXISTS afk_run_task ON afk_run (task_id, token);
CREATE INDEX IF NOT EXISTS afk_run_started ON afk_run (started_at);
CREATE INDEX IF NOT EXISTS afk_run_ended ON afk_run (ended_at) WHERE ended_at IS NOT NULL;

-- The end of a run, written by the statement that settles its task (a finish,
-- a release): one function, so each of them ends it the same way. p_run holds
-- what the supervisor read of the agent (exit_status, output_tail,
-- session_id, cost_usd, turns, usage; outcome overrides p_outcome).
CREATE OR REPLACE FUNCTION afk_end_run(
    p_task uuid, p_token bigint, p_outcome text, p_run jsonb, p_spent boolean
) RETURNS integer
LANGUAGE sql AS $$
    WITH ended AS (
        UPDATE afk_run
           SET ended_at = now(),
               outcome = coalesce(p_run ->> 'outcome', p_outcome),
               exit_status = (p_run ->> 'exit_status')::integer,
               output_tail = p_run ->> 'output_tail',
               session_id = p_run ->> 'session_id',
               cost_usd = (p_run ->> 'cost_usd')::numeric,
               turns = (p_run ->> 'turns')::integer,
               usage = p_run -> 'usage',
               attempt_spent = p_spent
         WHERE task_id = p_task AND token = p_token AND ended_at IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM ended
$$;

-- Park an account: one parking open per account at a time. A parking whose
-- end has passed is closed first. A manual one (kind 'manual') or one with no
-- end replaces the open one; any other extends it to the later end and never
-- shortens it, nor gives an end to one that waits for a person.
CREATE OR REPLACE FUNCTION afk_park(
    p_account text, p_kind text, p_reason text, p_until timestamptz
) RETURNS SETOF afk_account_park
LANGUAGE plpgsql AS $$
DECLARE
    cur afk_account_park;
BEGIN
    -- parks of one account, one at a time (the open row may not exist yet)
    PERFORM pg_advisory_xact_lock(hashtext('afk_park'), hashtext(p_account));
    UPDATE afk_account_park SET cleared_at = until, cleared_by = 'its end passed'
     WHERE account = p_account AND cleared_at IS NULL AND until <= now();
    SELECT * INTO cur FROM afk_account_park
     WHERE account = p_account AND cleared_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO afk_account_park (account, kind, reason, until)
        VALUES (p_account, p_kind, p_reason, p_until) RETURNING * INTO cur;
    ELSIF p_kind = 'manual' OR p_until IS NULL
          OR (cur.until IS NOT NULL AND p_until >= cur.until) THEN
        UPDATE afk_account_park SET kind = p_kind, reason = p_reason, until = p_until
         WHERE id = cur.id RETURNING * INTO cur;
    END IF;
    RETURN NEXT cur;
END
$$;
