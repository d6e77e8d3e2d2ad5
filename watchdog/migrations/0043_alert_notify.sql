-- A new approval request or question tells the watchdog at once (issue 53
-- item 9, P27: its push waited for the next run of the approvals job, up to
-- AFK_RECLAIM_INTERVAL, a minute): a NOTIFY on afk_alert, sent when the
-- request's transaction commits, naming the job that pushes it. The
-- service LISTENs and runs that job now; its interval stays, for a pooler
-- in transaction mode (where LISTEN hears nothing) and a listener away.
CREATE OR REPLACE FUNCTION afk_alert_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('afk_alert', TG_ARGV[0]);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS afk_approval_alert ON afk_approval;
CREATE TRIGGER afk_approval_alert AFTER INSERT ON afk_approval
    FOR EACH STATEMENT EXECUTE FUNCTION afk_alert_notify('approvals');
DROP TRIGGER IF EXISTS afk_question_alert ON afk_question;
CREATE TRIGGER afk_question_alert AFTER INSERT ON afk_question
    FOR EACH STATEMENT EXECUTE FUNCTION afk_alert_notify('questions');
