-- A task's history is read by its task alone (afk show, the digest's last
-- reason of a held task, the clean-up of a deleted task's rows), in id
-- order. Its rows had two indexes: the primary key (id), which no statement
-- reads, and (task_id, id). Every claim and every finish writes a history
-- row (a finish-and-claim-next two), and each row paid for both. The key is
-- now (task_id, id): one index a row, some 7 us of a finish-and-claim-next
-- (EXPLAIN ANALYZE, paired, against the two indexes).
ALTER TABLE afk_task_event
    DROP CONSTRAINT afk_task_event_pkey,
    ADD CONSTRAINT afk_task_event_pkey PRIMARY KEY (task_id, id);
DROP INDEX IF EXISTS afk_task_event_task_idx;
