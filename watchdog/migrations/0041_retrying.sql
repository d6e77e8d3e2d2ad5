-- The tasks that wait to retry after a spent attempt (issue 53 item 1): a
-- todo or paused row with attempts above 0 (a failure leaves it todo in its
-- backoff, an expired lease paused; a limit, an outage, a Stop or a person's
-- pause give the attempt back). The digest, `afk status` and the
-- afk_tasks_retrying gauge read them through this index, so that their cost
-- does not grow with a backlog of fresh tasks.
CREATE INDEX IF NOT EXISTS afk_task_retrying_idx ON afk_task (agent_id)
    WHERE state IN ('todo', 'paused') AND attempts > 0;
