-- A profile whose command is Cursor's CLI (cursor-agent) is a cursor profile
-- (issue 42 item 2): `afk profile add` recorded the program's name instead,
-- which no task of `afk enqueue --harness cursor` fits. Idempotent.
UPDATE afk_profile SET harness = 'cursor' WHERE harness = 'cursor-agent';
