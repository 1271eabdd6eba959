-- 0017_history_reads: every read of the history bounded by an index (issue 42, item 2;
-- docs/ledger.md §5, "Indexes of the reads"). A year of history (about 180,000 runs) must cost the
-- reads that are not the hot path no more than an empty ledger does; each index below serves one
-- read that scanned a whole table of history before (tests/integration/test_history_plans.py
-- checks each plan on a generated history, scripts/bench/history.sql). Additive (indexes only):
-- binaries of schema 0016 run on it unchanged. This build needs it (LL_SCHEMA_MIN 17): without it
-- the sweeper's gauges and the claimer's ACK of reissue dispatches would scan the outbox.
--
-- load_dispatch by run (and partition): `loadctl show`, the claimer's ACK of a RETRY partition's
-- reissue dispatches (contract §3.4; services/claimer/partition_claim.c) and `loadctl verify`'s
-- pages of runs. There was none: each of them read the whole outbox.
CREATE INDEX ix_load_dispatch_run
    ON nifi_ops.load_dispatch (run_id, partition_id);

-- The DEAD dispatches (contract §3.4: a DEAD row is never retried automatically; they are few):
-- the sweeper's gauges (services/sweeper/gauges.c) and the monitor's DISPATCH_DEAD alerts and
-- counts (contract §5.21) read them here instead of the whole outbox on every tick or frame.
CREATE INDEX ix_load_dispatch_dead
    ON nifi_ops.load_dispatch (dispatch_type, run_id)
    WHERE status = 'DEAD';

-- `loadctl runs` (contract §5.20): newest first, ORDER BY started_at DESC, run_id LIMIT n, read
-- in index order and stopped after n rows (ix_load_run_job_started serves it with --job).
CREATE INDEX ix_load_run_started
    ON nifi_ops.load_run (started_at DESC, run_id);

-- The time a run ended, coalesce(completed_at, heartbeat_at) (tools/loadctl/retention.h,
-- LC_ENDED): the monitor's runs ended in the last 24 hours (counts and RUN_FAILED alerts,
-- contract §5.21) are a range of this index.
CREATE INDEX ix_load_run_ended
    ON nifi_ops.load_run ((coalesce(completed_at, heartbeat_at)), run_id);

-- `loadctl cleanup-candidates` (contract §5.17) and the monitor's cleanup-due count: the runs not
-- cleaned, oldest ended first (ORDER BY coalesce(completed_at, heartbeat_at), run_id LIMIT n),
-- read in this index's order; ix_load_run_cleanup (0002, job_key, completed_at) cannot serve
-- that order.
CREATE INDEX ix_load_run_cleanup_ended
    ON nifi_ops.load_run ((coalesce(completed_at, heartbeat_at)), run_id)
    WHERE cleaned_at IS NULL;

-- The monitor's CLEANUP_FAILED alerts (events written by NiFi PG-70, last 24 hours, contract
-- §5.21): a range of this small index instead of every event of a day.
CREATE INDEX ix_load_event_cleanup_failed
    ON nifi_ops.load_event (event_time)
    WHERE event_name = 'CLEANUP_FAILED';
