-- 0016_run_ended_index: the runs ended, in the order they ended (issue 41, item 5; docs/operations.md,
-- "Runs ended and their duration"). The sweeper counts every run that reached a terminal status
-- (loadledger_runs_ended_total, loadledger_run_duration_seconds) by reading, on each tick, the runs
-- whose completed_at lies after its watermark (completed_at, run_id) and at most
-- metrics.runs_ended_settle before now, through this index: a bounded range scan whatever the size
-- of load_run. Additive (an index): binaries of schema 0015 run on it unchanged. This build needs it
-- (LL_SCHEMA_MIN 16): without it the sweeper's read would scan load_run.
CREATE INDEX ix_load_run_completed
    ON nifi_ops.load_run (completed_at, run_id)
    WHERE completed_at IS NOT NULL;
