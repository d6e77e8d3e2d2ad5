-- The fleet (issue 44 items 3 and 4): a task may require labels that a loop
-- advertises (afk enqueue --requires gpu; afk loop --label gpu), and each
-- loop registers itself while it runs (host, pid, user, labels, profiles,
-- the task and profile of its run), heart-beating; one that stops is shown
-- as lost, and its tasks are reclaimed as ever once their leases run out.
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS requires text[];

CREATE TABLE IF NOT EXISTS afk_loop (
    runner      text PRIMARY KEY,
    agent_id    text NOT NULL,
    host        text NOT NULL,
    pid         integer NOT NULL,
    username    text,
    labels      text[] NOT NULL DEFAULT '{}',
    profiles    text[] NOT NULL DEFAULT '{}',
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    task_id     uuid,
    profile     text
);
