-- Who started an effect that is not recorded yet (host:pid): a second call
-- of the same effect under the same token, while the first still runs, waits
-- for it and replays its result instead of running it again; one whose
-- starter is gone is refused, since the call may or may not have happened.
ALTER TABLE afk_task_effect ADD COLUMN IF NOT EXISTS started_by text;
