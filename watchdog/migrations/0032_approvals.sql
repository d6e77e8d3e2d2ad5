-- Approvals (issue 43): a tool call that a person must decide (an --ask-for
-- rule matched it) is not let through nor refused by afk's PreToolUse hook:
-- Claude Code in -p mode is told to defer it (the session exits with the
-- call kept, stop_reason "tool_deferred"), a harness without that is told
-- no, and either way the call waits here, the task held for a person
-- (paused, run_after afk_held(), no attempt spent). `afk approve` / `afk
-- deny` decide; the task is due again; its next run resumes the same session
-- (claude --resume), whose PreToolUse of the same call (call_hash: its tool
-- and input) is then answered allow (once: used_at) or deny (with the note).
-- A request not decided by expires_at is denied, or held (on_timeout).
CREATE TABLE IF NOT EXISTS afk_approval (
    id           bigserial PRIMARY KEY,
    task_id      uuid NOT NULL REFERENCES afk_task (id) ON DELETE CASCADE,
    -- the session that asked, its transcript (a resume needs it on the
    -- machine that resumes), and its harness
    session_id   text,
    transcript   text,
    harness      text NOT NULL,
    tool_name    text NOT NULL,
    tool_input   jsonb NOT NULL,
    call_hash    text NOT NULL,
    rule         text NOT NULL,
    asked_token  bigint,
    asked_at     timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    on_timeout   text NOT NULL DEFAULT 'deny' CHECK (on_timeout IN ('deny', 'hold')),
    decision     text CHECK (decision IN ('approved', 'denied', 'expired')),
    decided_at   timestamptz,
    decided_by   text,
    -- how: cli, link, page, api, ttl
    decided_via  text,
    note         text,
    -- when the decided call came back and was answered by it
    used_at      timestamptz
);
-- a task's own rules (afk enqueue --ask-for), added to its loop's
ALTER TABLE afk_task ADD COLUMN IF NOT EXISTS ask_for text[];

CREATE INDEX IF NOT EXISTS afk_approval_task ON afk_approval (task_id, call_hash);
CREATE INDEX IF NOT EXISTS afk_approval_open ON afk_approval (asked_at) WHERE decision IS NULL;
