-- What the night cost and what the agents asked.
--
-- A task may carry a budget (in US dollars, what its runs may cost together:
-- afk_run.cost_usd as the agent reported it). One that reaches it is held
-- for a person, not retried.
--
-- An agent that needs a decision asks (`afk ask`): its task is held until a
-- person answers (`afk answer`), and every question and answer goes into the
-- next run's brief. A task held for a person is paused with run_after =
-- afk_held() (below): no claim takes it, and no supervisor waits for it.
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS budget_usd numeric;

CREATE TABLE IF NOT EXISTS afk_question (
    id           bigserial PRIMARY KEY,
    task_id      uuid NOT NULL REFERENCES afk_task (id) ON DELETE CASCADE,
    question     text NOT NULL,
    asked_at     timestamptz NOT NULL DEFAULT now(),
    asked_token  bigint,
    answer       text,
    answered_at  timestamptz,
    answered_by  text,
    -- when the alert destinations were told of it (the questions job)
    alerted_at   timestamptz
);
CREATE INDEX IF NOT EXISTS afk_question_task ON afk_question (task_id);
CREATE INDEX IF NOT EXISTS afk_question_open ON afk_question (asked_at)
    WHERE answered_at IS NULL;

-- The run_after of a task held for a person: far enough never to come, near
-- enough for every client's datetime (year 9999, where 'infinity' is none).
CREATE OR REPLACE FUNCTION afk_held() RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT '9999-12-31 00:00:00+00'::timestamptz $$;
