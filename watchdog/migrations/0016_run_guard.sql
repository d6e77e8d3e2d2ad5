-- What a supervisor sees of a run while it goes and when it ends.
--
-- permission_denials: the tools the agent was denied (Claude Code's -p mode
-- cannot ask for a permission: it lists them in its JSON result), each
-- {tool_name, tool_input}; a run that did not end done with denials is held
-- for a person instead of retried blindly.
--
-- last_sign, last_sign_at: the agent's last sign of life (its last line of
-- output, or a hook it fired), written with the supervisor's heartbeat, so
-- that the status page says what a running task last did and how long ago.
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS permission_denials jsonb;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS last_sign text;
ALTER TABLE afk_run ADD COLUMN IF NOT EXISTS last_sign_at timestamptz;
-- (afk_end_run writes permission_denials: see 0018, its last version.)
