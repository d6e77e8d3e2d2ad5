-- The schema `afk migrate` makes of an empty database (pg_dump --schema-only, normalised).
-- Checked by tests/e2e/test_migrations.py; do not edit by hand.
CREATE TYPE public.afk_state AS ENUM (
    'todo',
    'running',
    'paused',
    'done',
    'failed',
    'blocked'
);
CREATE FUNCTION public.afk_concurrency_count() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = 'running' THEN
        UPDATE afk_concurrency SET running = running + 1 WHERE key = NEW.concurrency_key;
        RETURN NEW;
    END IF;
    -- a task leaving 'running' (an update), or deleted while running
    UPDATE afk_concurrency SET running = greatest(running - 1, 0)
     WHERE key = OLD.concurrency_key;
    RETURN NULL;
END $$;
CREATE FUNCTION public.afk_concurrency_room(p_key text, p_freed text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM afk_concurrency c
         WHERE c.key = p_key
           AND c.running - (p_freed IS NOT DISTINCT FROM p_key)::int < c.lim
           FOR UPDATE SKIP LOCKED);
END $$;
CREATE FUNCTION public.afk_dependency_resolve() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    WITH resolved AS (
        UPDATE afk_dependency d SET dep_id = n.id
          FROM new_rows n
         WHERE d.dep_id IS NULL AND n.idem_key IS NOT NULL AND d.ref = n.idem_key
        RETURNING d.dep_id
    )
    UPDATE afk_task SET has_dependents = true WHERE id IN (SELECT dep_id FROM resolved);
    RETURN NULL;
END $$;
CREATE FUNCTION public.afk_dependency_settle(p_id uuid, p_title text, p_failed boolean) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- the dependents locked first, in one order: two dependencies finishing
    -- at once are serialised here, and the second sees the first (the next
    -- statement's snapshot is taken after the lock)
    PERFORM 1 FROM afk_task
      WHERE id IN (SELECT task_id FROM afk_dependency WHERE dep_id = p_id)
        AND state = 'blocked'
      ORDER BY id FOR UPDATE;
    IF p_failed THEN
        UPDATE afk_task t
           SET state = 'failed', last_error = 'dependency failed: ' || p_id || ' ' || p_title,
               updated_at = now(), change_reason = 'dependency failed',
               change_error = 'dependency failed: ' || p_id || ' ' || p_title
         WHERE t.id IN (SELECT task_id FROM afk_dependency WHERE dep_id = p_id)
           AND t.state = 'blocked' AND coalesce(t.on_dep_failure, 'cancel') = 'cancel';
    END IF;
    UPDATE afk_task t
       SET state = 'todo', updated_at = now(), change_reason = 'unblocked'
     WHERE t.id IN (SELECT task_id FROM afk_dependency WHERE dep_id = p_id)
       AND t.state = 'blocked'
       AND NOT EXISTS (
           SELECT 1 FROM afk_dependency x LEFT JOIN afk_task d ON d.id = x.dep_id
            WHERE x.task_id = t.id
              AND NOT coalesce(d.state = 'done'
                               OR (d.state = 'failed' AND t.on_dep_failure = 'run'), false));
END $$;
CREATE FUNCTION public.afk_end_run(p_task uuid, p_token bigint, p_outcome text, p_run jsonb, p_spent boolean) RETURNS integer
    LANGUAGE sql
    AS $$
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
               permission_denials = p_run -> 'permission_denials',
               before_sha = p_run ->> 'before_sha',
               after_sha = p_run ->> 'after_sha',
               changes = (p_run ->> 'changes')::integer,
               check_status = (p_run ->> 'check_status')::integer,
               check_tail = p_run ->> 'check_tail',
               trace_id = coalesce(p_run ->> 'trace_id', trace_id),
               sandbox = p_run -> 'sandbox',
               profile = coalesce(p_run ->> 'profile', profile),
               account = coalesce(p_run ->> 'account', account),
               refused = p_run -> 'refused',
               attempt_spent = p_spent
         WHERE task_id = p_task AND token = p_token AND ended_at IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM ended
$$;
CREATE FUNCTION public.afk_fits(requires text[], profiles text[], labels text[], usable text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT (requires IS NULL OR coalesce(requires <@ labels, false))
       AND (profiles IS NULL OR coalesce(profiles && usable, false))
$$;
CREATE FUNCTION public.afk_free_ports(p_task uuid, p_first integer, p_last integer, p_ports integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    found integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('afk_workspace_ports'));
    SELECT p INTO found
      FROM generate_series(p_first, p_last, p_ports) p
     WHERE NOT EXISTS (
        SELECT 1 FROM afk_workspace w
         WHERE w.removed_at IS NULL AND w.port IS NOT NULL AND w.task_id <> p_task
           AND int4range(w.port, w.port + w.ports) && int4range(p, p + p_ports))
     ORDER BY p LIMIT 1;
    RETURN found;
END $$;
CREATE TABLE public.afk_task (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    agent_id text NOT NULL,
    ordinal integer NOT NULL,
    title text NOT NULL,
    spec jsonb DEFAULT '{}'::jsonb NOT NULL,
    state public.afk_state DEFAULT 'todo'::public.afk_state NOT NULL,
    checkpoint jsonb DEFAULT '{}'::jsonb NOT NULL,
    idem_key text,
    lease_until timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_owner text,
    lease_token bigint DEFAULT 0 NOT NULL,
    lease_seconds integer,
    run_after timestamp with time zone,
    result jsonb,
    checkpoint_at timestamp with time zone,
    change_reason text,
    change_error text,
    change_by text,
    budget_usd numeric,
    workspace jsonb,
    trace_parent text,
    concurrency_key text,
    on_dep_failure text,
    has_dependents boolean DEFAULT false NOT NULL,
    had_run boolean DEFAULT false NOT NULL,
    claimed_at timestamp with time zone,
    ask_for text[],
    requires text[],
    profiles text[],
    CONSTRAINT afk_task_on_dep_failure_check CHECK ((on_dep_failure = ANY (ARRAY['cancel'::text, 'run'::text, 'hold'::text]))),
    CONSTRAINT afk_task_running_has_lease CHECK (((state <> 'running'::public.afk_state) OR (lease_until IS NOT NULL)))
);
CREATE FUNCTION public.afk_give_back(p_ids uuid[], p_tokens bigint[], p_state public.afk_state, p_run_after timestamp with time zone, p_reason text, p_outcome text, p_run jsonb, p_error text DEFAULT NULL::text) RETURNS SETOF public.afk_task
    LANGUAGE sql
    AS $$
    WITH upd AS (
        UPDATE afk_task t
           SET state = p_state, attempts = greatest(t.attempts - 1, 0),
               run_after = p_run_after, lease_until = NULL, updated_at = now(),
               last_error = coalesce(p_error, t.last_error),
               change_reason = p_reason, change_error = p_error
          FROM unnest(p_ids, p_tokens) AS g(id, token)
         WHERE t.id = g.id AND t.state = 'running' AND t.lease_token = g.token
        RETURNING t.*
    ), ended AS (
        SELECT afk_end_run(id, lease_token, p_outcome, p_run, false) FROM upd
    )
    SELECT * FROM upd WHERE (SELECT count(*) FROM ended) >= 0
$$;
CREATE FUNCTION public.afk_held() RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT '9999-12-31 00:00:00+00'::timestamptz $$;
CREATE FUNCTION public.afk_held_until(p_agent text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN least(
        (SELECT min(lease_until) FROM afk_task
          WHERE agent_id = p_agent AND state = 'running'),
        (SELECT min(h.lease_until)
           FROM afk_task t JOIN afk_task h ON h.concurrency_key = t.concurrency_key
          WHERE t.agent_id = p_agent AND t.state IN ('todo', 'paused')
            AND t.concurrency_key IS NOT NULL
            AND (t.run_after IS NULL OR t.run_after <= now())
            AND h.state = 'running'));
END $$;
CREATE FUNCTION public.afk_next_due(p_agent text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT min(run_after) FROM afk_task
             WHERE agent_id = p_agent AND state IN ('todo', 'paused')
               AND run_after > now() AND run_after < afk_held());
END $$;
CREATE FUNCTION public.afk_next_token() RETURNS bigint
    LANGUAGE sql
    AS $$
    SELECT (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
            << 40)
           | (nextval('afk_lease_token_seq') & ((1::bigint << 40) - 1))
$$;
CREATE FUNCTION public.afk_one_task_per_branch() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    want_repo text := NEW.workspace ->> 'repo';
    want_branch text := NEW.workspace ->> 'branch';
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('afk branch' || E'\n' || want_repo || E'\n' || want_branch, 0));
    IF EXISTS (
        SELECT 1 FROM afk_workspace w
         WHERE w.repo = want_repo AND w.branch = want_branch AND w.removed_at IS NULL
           AND w.task_id <> NEW.id
        UNION ALL
        SELECT 1 FROM afk_task t
         WHERE t.workspace ->> 'repo' = want_repo AND t.workspace ->> 'branch' = want_branch
           AND t.state <> 'done' AND t.id <> NEW.id
    ) AND NOT EXISTS (SELECT 1 FROM afk_task k WHERE k.idem_key = NEW.idem_key) THEN
        RAISE EXCEPTION '--branch % is another task''s workspace; nothing was enqueued', want_branch
            USING ERRCODE = 'AFK22';
    END IF;
    RETURN NEW;
END $$;
CREATE TABLE public.afk_account_park (
    id bigint NOT NULL,
    account text NOT NULL,
    kind text NOT NULL,
    reason text NOT NULL,
    parked_at timestamp with time zone DEFAULT now() NOT NULL,
    until timestamp with time zone,
    cleared_at timestamp with time zone,
    cleared_by text
);
CREATE FUNCTION public.afk_park(p_account text, p_kind text, p_reason text, p_until timestamp with time zone) RETURNS SETOF public.afk_account_park
    LANGUAGE plpgsql
    AS $$
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
CREATE FUNCTION public.afk_state_counts(exact_below bigint DEFAULT 200000) RETURNS TABLE(state text, n bigint, exact boolean)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    estimate bigint;
    open_total bigint := 0;
    c bigint;
BEGIN
    SELECT count(*) INTO c FROM afk_task t WHERE t.state IN ('todo', 'paused') AND t.state = 'todo';
    state := 'todo'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state IN ('todo', 'paused') AND t.state = 'paused';
    state := 'paused'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'running';
    state := 'running'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'failed';
    state := 'failed'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'blocked';
    state := 'blocked'; n := c; exact := true; open_total := open_total + c; RETURN NEXT;
    SELECT reltuples::bigint INTO estimate FROM pg_class WHERE oid = 'afk_task'::regclass;
    state := 'done';
    IF estimate IS NULL OR estimate < exact_below THEN
        SELECT count(*) INTO c FROM afk_task t WHERE t.state = 'done';
        n := c; exact := true;
    ELSE
        n := greatest(estimate - open_total, 0); exact := false;
    END IF;
    RETURN NEXT;
END
$$;
CREATE FUNCTION public.afk_task_event_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'afk_task_event is append-only';
END
$$;
CREATE FUNCTION public.afk_task_history() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- the runner and the token matter where a lease is part of the change
    leased boolean := 'running' IN (OLD.state, NEW.state);
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state
       OR NEW.lease_token IS DISTINCT FROM OLD.lease_token THEN
        INSERT INTO afk_task_event
               (task_id, from_state, to_state, reason, runner, token, attempts, error)
        VALUES (NEW.id, OLD.state, NEW.state,
                coalesce(NEW.change_reason, 'changed by hand'),
                coalesce(NEW.change_by, CASE WHEN leased THEN NEW.lease_owner END,
                         CASE WHEN NEW.change_reason IS NULL THEN current_user::text END),
                CASE WHEN leased THEN NEW.lease_token END,
                NEW.attempts, NEW.change_error);
    END IF;
    NEW.change_reason := NULL;
    NEW.change_error := NULL;
    NEW.change_by := NULL;
    RETURN NEW;
END
$$;
CREATE FUNCTION public.afk_task_history_forget() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM afk_task_event e USING gone WHERE e.task_id = gone.id;
    RETURN NULL;
END $$;
CREATE FUNCTION public.afk_task_state_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- a task of a concurrency key entering or leaving 'running'
    IF NEW.concurrency_key IS NOT NULL AND 'running' IN (OLD.state, NEW.state) THEN
        IF NEW.state = 'running' THEN
            UPDATE afk_concurrency SET running = running + 1 WHERE key = NEW.concurrency_key;
        ELSE
            UPDATE afk_concurrency SET running = greatest(running - 1, 0)
             WHERE key = OLD.concurrency_key;
        END IF;
    END IF;
    -- a dependency done or failed
    IF NEW.has_dependents AND NEW.state IN ('done', 'failed') THEN
        PERFORM afk_dependency_settle(NEW.id, NEW.title, NEW.state = 'failed');
    END IF;
    RETURN NULL;
END $$;
CREATE SEQUENCE public.afk_account_park_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.afk_account_park_id_seq OWNED BY public.afk_account_park.id;
CREATE TABLE public.afk_agent (
    agent_id text NOT NULL,
    next_ordinal bigint NOT NULL
);
CREATE TABLE public.afk_approval (
    id bigint NOT NULL,
    task_id uuid NOT NULL,
    session_id text,
    transcript text,
    harness text NOT NULL,
    tool_name text NOT NULL,
    tool_input jsonb NOT NULL,
    call_hash text NOT NULL,
    rule text NOT NULL,
    asked_token bigint,
    asked_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    on_timeout text DEFAULT 'deny'::text NOT NULL,
    decision text,
    decided_at timestamp with time zone,
    decided_by text,
    decided_via text,
    note text,
    used_at timestamp with time zone,
    alerted_at timestamp with time zone,
    CONSTRAINT afk_approval_decision_check CHECK ((decision = ANY (ARRAY['approved'::text, 'denied'::text, 'expired'::text]))),
    CONSTRAINT afk_approval_on_timeout_check CHECK ((on_timeout = ANY (ARRAY['deny'::text, 'hold'::text])))
);
CREATE SEQUENCE public.afk_approval_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.afk_approval_id_seq OWNED BY public.afk_approval.id;
CREATE TABLE public.afk_concurrency (
    key text NOT NULL,
    lim integer NOT NULL,
    running integer DEFAULT 0 NOT NULL,
    CONSTRAINT afk_concurrency_lim_check CHECK ((lim >= 1)),
    CONSTRAINT afk_concurrency_running_check CHECK ((running >= 0))
);
CREATE TABLE public.afk_dependency (
    task_id uuid NOT NULL,
    ref text NOT NULL,
    dep_id uuid
);
CREATE TABLE public.afk_digest_delivery (
    destination text NOT NULL,
    kind text DEFAULT 'digest'::text NOT NULL,
    period timestamp with time zone NOT NULL,
    state text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    lease_token bigint,
    lease_until timestamp with time zone,
    next_attempt_at timestamp with time zone,
    window_start timestamp with time zone NOT NULL,
    window_end timestamp with time zone NOT NULL,
    last_status integer,
    last_error text,
    delivered_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT afk_digest_delivery_state_check CHECK ((state = ANY (ARRAY['sending'::text, 'pending'::text, 'delivered'::text, 'failed'::text, 'superseded'::text])))
);
CREATE TABLE public.afk_leader (
    name text NOT NULL,
    holder text NOT NULL,
    token bigint NOT NULL,
    elected_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL
);
CREATE SEQUENCE public.afk_lease_token_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
CREATE TABLE public.afk_loop (
    runner text NOT NULL,
    agent_id text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    username text,
    labels text[] DEFAULT '{}'::text[] NOT NULL,
    profiles text[] DEFAULT '{}'::text[] NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    task_id uuid,
    profile text
);
CREATE TABLE public.afk_profile (
    name text NOT NULL,
    harness text NOT NULL,
    command text[] NOT NULL,
    env jsonb DEFAULT '{}'::jsonb NOT NULL,
    account text NOT NULL,
    made_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT afk_profile_command_check CHECK ((cardinality(command) > 0))
);
CREATE TABLE public.afk_question (
    id bigint NOT NULL,
    task_id uuid NOT NULL,
    question text NOT NULL,
    asked_at timestamp with time zone DEFAULT now() NOT NULL,
    asked_token bigint,
    answer text,
    answered_at timestamp with time zone,
    answered_by text,
    alerted_at timestamp with time zone
);
CREATE SEQUENCE public.afk_question_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.afk_question_id_seq OWNED BY public.afk_question.id;
CREATE TABLE public.afk_run (
    id bigint NOT NULL,
    task_id uuid NOT NULL,
    token bigint NOT NULL,
    agent_id text NOT NULL,
    runner text,
    account text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    outcome text,
    exit_status integer,
    output_tail text,
    session_id text,
    cost_usd numeric,
    turns integer,
    usage jsonb,
    attempt_spent boolean,
    permission_denials jsonb,
    last_sign text,
    last_sign_at timestamp with time zone,
    before_sha text,
    after_sha text,
    changes integer,
    check_status integer,
    check_tail text,
    trace_id text,
    sandbox jsonb,
    profile text,
    refused jsonb
);
CREATE SEQUENCE public.afk_run_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.afk_run_id_seq OWNED BY public.afk_run.id;
CREATE TABLE public.afk_task_effect (
    task_id uuid NOT NULL,
    name text NOT NULL,
    done boolean DEFAULT false NOT NULL,
    result jsonb,
    runs integer DEFAULT 0 NOT NULL,
    started_token bigint,
    started_at timestamp with time zone,
    recorded_token bigint,
    recorded_at timestamp with time zone,
    started_by text
);
CREATE TABLE public.afk_task_event (
    id bigint NOT NULL,
    task_id uuid NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    from_state public.afk_state,
    to_state public.afk_state NOT NULL,
    reason text NOT NULL,
    runner text,
    token bigint,
    attempts integer,
    error text
);
ALTER TABLE public.afk_task_event ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.afk_task_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);
CREATE TABLE public.afk_web_login (
    id bigint NOT NULL,
    name text NOT NULL,
    token_hash text NOT NULL,
    made_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);
CREATE SEQUENCE public.afk_web_login_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.afk_web_login_id_seq OWNED BY public.afk_web_login.id;
CREATE TABLE public.afk_web_secret (
    name text NOT NULL,
    value text NOT NULL,
    made_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.afk_web_session (
    id_hash text NOT NULL,
    login_id bigint NOT NULL,
    csrf text NOT NULL,
    made_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
);
CREATE TABLE public.afk_workspace (
    task_id uuid NOT NULL,
    repo text NOT NULL,
    branch text NOT NULL,
    path text NOT NULL,
    base_sha text NOT NULL,
    head_sha text,
    port integer,
    ports integer,
    made_at timestamp with time zone DEFAULT now() NOT NULL,
    removed_at timestamp with time zone,
    trash_ref text,
    pinned jsonb,
    stacked_on text
);
ALTER TABLE ONLY public.afk_account_park ALTER COLUMN id SET DEFAULT nextval('public.afk_account_park_id_seq'::regclass);
ALTER TABLE ONLY public.afk_approval ALTER COLUMN id SET DEFAULT nextval('public.afk_approval_id_seq'::regclass);
ALTER TABLE ONLY public.afk_question ALTER COLUMN id SET DEFAULT nextval('public.afk_question_id_seq'::regclass);
ALTER TABLE ONLY public.afk_run ALTER COLUMN id SET DEFAULT nextval('public.afk_run_id_seq'::regclass);
ALTER TABLE ONLY public.afk_web_login ALTER COLUMN id SET DEFAULT nextval('public.afk_web_login_id_seq'::regclass);
ALTER TABLE ONLY public.afk_account_park
    ADD CONSTRAINT afk_account_park_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.afk_agent
    ADD CONSTRAINT afk_agent_pkey PRIMARY KEY (agent_id);
ALTER TABLE ONLY public.afk_approval
    ADD CONSTRAINT afk_approval_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.afk_concurrency
    ADD CONSTRAINT afk_concurrency_pkey PRIMARY KEY (key);
ALTER TABLE ONLY public.afk_dependency
    ADD CONSTRAINT afk_dependency_pkey PRIMARY KEY (task_id, ref);
ALTER TABLE ONLY public.afk_digest_delivery
    ADD CONSTRAINT afk_digest_delivery_pkey PRIMARY KEY (destination, kind, period);
ALTER TABLE ONLY public.afk_leader
    ADD CONSTRAINT afk_leader_pkey PRIMARY KEY (name);
ALTER TABLE ONLY public.afk_loop
    ADD CONSTRAINT afk_loop_pkey PRIMARY KEY (runner);
ALTER TABLE ONLY public.afk_profile
    ADD CONSTRAINT afk_profile_pkey PRIMARY KEY (name);
ALTER TABLE ONLY public.afk_question
    ADD CONSTRAINT afk_question_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.afk_run
    ADD CONSTRAINT afk_run_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.afk_task
    ADD CONSTRAINT afk_task_agent_ordinal_key UNIQUE (agent_id, ordinal);
ALTER TABLE ONLY public.afk_task_effect
    ADD CONSTRAINT afk_task_effect_pkey PRIMARY KEY (task_id, name);
ALTER TABLE ONLY public.afk_task_event
    ADD CONSTRAINT afk_task_event_pkey PRIMARY KEY (task_id, id);
ALTER TABLE ONLY public.afk_task
    ADD CONSTRAINT afk_task_idem_key_key UNIQUE (idem_key);
ALTER TABLE ONLY public.afk_task
    ADD CONSTRAINT afk_task_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.afk_web_login
    ADD CONSTRAINT afk_web_login_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.afk_web_login
    ADD CONSTRAINT afk_web_login_token_hash_key UNIQUE (token_hash);
ALTER TABLE ONLY public.afk_web_secret
    ADD CONSTRAINT afk_web_secret_pkey PRIMARY KEY (name);
ALTER TABLE ONLY public.afk_web_session
    ADD CONSTRAINT afk_web_session_pkey PRIMARY KEY (id_hash);
ALTER TABLE ONLY public.afk_workspace
    ADD CONSTRAINT afk_workspace_pkey PRIMARY KEY (task_id);
CREATE UNIQUE INDEX afk_account_park_open ON public.afk_account_park USING btree (account) WHERE (cleared_at IS NULL);
CREATE INDEX afk_account_park_parked_at ON public.afk_account_park USING btree (parked_at);
CREATE INDEX afk_approval_open ON public.afk_approval USING btree (asked_at) WHERE (decision IS NULL);
CREATE INDEX afk_approval_task ON public.afk_approval USING btree (task_id, call_hash);
CREATE INDEX afk_dependency_dep ON public.afk_dependency USING btree (dep_id);
CREATE INDEX afk_dependency_forward ON public.afk_dependency USING btree (ref) WHERE (dep_id IS NULL);
CREATE INDEX afk_digest_delivery_recent_idx ON public.afk_digest_delivery USING btree (updated_at);
CREATE INDEX afk_question_open ON public.afk_question USING btree (asked_at) WHERE (answered_at IS NULL);
CREATE INDEX afk_question_task ON public.afk_question USING btree (task_id);
CREATE INDEX afk_run_ended ON public.afk_run USING btree (ended_at) WHERE (ended_at IS NOT NULL);
CREATE INDEX afk_run_started ON public.afk_run USING btree (started_at);
CREATE INDEX afk_run_task ON public.afk_run USING btree (task_id, token);
CREATE INDEX afk_task_claim_idx ON public.afk_task USING btree (agent_id, ordinal) WHERE (state = ANY (ARRAY['todo'::public.afk_state, 'paused'::public.afk_state]));
CREATE INDEX afk_task_done_idx ON public.afk_task USING btree (updated_at) WHERE (state = 'done'::public.afk_state);
CREATE INDEX afk_task_failed_idx ON public.afk_task USING btree (updated_at) WHERE (state = 'failed'::public.afk_state);
CREATE INDEX afk_task_lease_idx ON public.afk_task USING btree (lease_until) WHERE (state = 'running'::public.afk_state);
CREATE INDEX afk_task_paused_idx ON public.afk_task USING btree (agent_id, updated_at) WHERE (state = 'paused'::public.afk_state);
CREATE INDEX afk_task_retrying_idx ON public.afk_task USING btree (agent_id) WHERE ((state = ANY (ARRAY['todo'::public.afk_state, 'paused'::public.afk_state])) AND (attempts > 0));
CREATE INDEX afk_web_session_expires ON public.afk_web_session USING btree (expires_at);
CREATE UNIQUE INDEX afk_workspace_branch ON public.afk_workspace USING btree (repo, branch) WHERE (removed_at IS NULL);
CREATE INDEX afk_workspace_port ON public.afk_workspace USING btree (port) WHERE (removed_at IS NULL);
CREATE TRIGGER afk_concurrency_delete AFTER DELETE ON public.afk_task FOR EACH ROW WHEN (((old.concurrency_key IS NOT NULL) AND (old.state = 'running'::public.afk_state))) EXECUTE FUNCTION public.afk_concurrency_count();
CREATE TRIGGER afk_dependency_resolve AFTER INSERT ON public.afk_task REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.afk_dependency_resolve();
CREATE TRIGGER afk_one_task_per_branch BEFORE INSERT ON public.afk_task FOR EACH ROW WHEN (((new.workspace ->> 'branch'::text) IS NOT NULL)) EXECUTE FUNCTION public.afk_one_task_per_branch();
CREATE TRIGGER afk_task_event_no_update BEFORE UPDATE ON public.afk_task_event FOR EACH ROW EXECUTE FUNCTION public.afk_task_event_append_only();
CREATE TRIGGER afk_task_history BEFORE UPDATE ON public.afk_task FOR EACH ROW WHEN (((new.state IS DISTINCT FROM old.state) OR (new.lease_token IS DISTINCT FROM old.lease_token) OR (new.change_reason IS NOT NULL) OR (new.change_error IS NOT NULL) OR (new.change_by IS NOT NULL))) EXECUTE FUNCTION public.afk_task_history();
CREATE TRIGGER afk_task_history_forget AFTER DELETE ON public.afk_task REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.afk_task_history_forget();
CREATE TRIGGER afk_task_state_changed AFTER UPDATE OF state ON public.afk_task FOR EACH ROW WHEN ((((new.concurrency_key IS NOT NULL) OR new.has_dependents) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION public.afk_task_state_changed();
ALTER TABLE ONLY public.afk_approval
    ADD CONSTRAINT afk_approval_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.afk_task(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.afk_dependency
    ADD CONSTRAINT afk_dependency_dep_id_fkey FOREIGN KEY (dep_id) REFERENCES public.afk_task(id) ON DELETE SET NULL;
ALTER TABLE ONLY public.afk_dependency
    ADD CONSTRAINT afk_dependency_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.afk_task(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.afk_question
    ADD CONSTRAINT afk_question_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.afk_task(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.afk_run
    ADD CONSTRAINT afk_run_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.afk_task(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.afk_task_effect
    ADD CONSTRAINT afk_task_effect_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.afk_task(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.afk_web_session
    ADD CONSTRAINT afk_web_session_login_id_fkey FOREIGN KEY (login_id) REFERENCES public.afk_web_login(id) ON DELETE CASCADE;
ALTER TABLE ONLY public.afk_workspace
    ADD CONSTRAINT afk_workspace_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.afk_task(id) ON DELETE CASCADE;
