-- When the task's current attempt was claimed (issue 41, "also measured"):
-- a task claimed and finished by the CLI or the Python API, or reclaimed by
-- the watchdog, gets its attempt's span (from this time to its end) in the
-- enqueue's trace, as a task run by `afk loop` does. A resumed claim (the
-- same runner taking back its in-flight task) keeps the attempt's time.
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS claimed_at timestamptz;
