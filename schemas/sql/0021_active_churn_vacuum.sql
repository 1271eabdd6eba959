-- 0021_active_churn_vacuum: the tables whose active rows churn are vacuumed after a fixed number of
-- dead rows, not after a share of the history (issue 42; docs/operations.md, "Autovacuum of the
-- churning tables"; docs/ledger.md §5).
--
-- Every run moves load_run, its partitions and its dispatches through statuses that partial indexes
-- name (ix_load_run_active_status, ix_load_partition_active, ix_load_dispatch_due):
-- each such UPDATE is not HOT and leaves the old version's entry in the partial index until VACUUM
-- removes it. The sweeper's gauges and rules, the dispatcher's claim of due dispatches and loadctl
-- monitor read the few active rows through those indexes, and walk every dead entry too (and the
-- heap row behind it, until an index scan marks the entry dead). PostgreSQL's default starts an
-- autovacuum of a table once its dead rows exceed 50 + 0.2 x its rows: on a year's ledger (180,000
-- runs, 1.44 million partitions) 36,000 dead runs and 288,000 dead partitions, so the dead entries
-- the active reads walk grew with the history. Measured on a generated history of 20,000 runs
-- (docs/performance-history.md, 2026-12-07): 1,500 runs passing through the active statuses took the
-- sweeper's tick from 0.64 to 2.03 ms of server time and its gauges from 196 to 1,565 buffers; once
-- autovacuum had run, 0.57 ms and 223 buffers.
--
-- With a scale factor of 0 the trigger is the threshold alone, whatever the history:
-- - load_run 5,000 dead rows (HOT heartbeats count too: about 20 updates a run, 250 runs);
-- - load_partition 10,000 (about 50 updates a run of 8 partitions, 200 runs);
-- - load_dispatch 1,000 (2-3 updates a run's VALIDATE_RUN, 400 runs).
-- At 500 runs a day that is one to three vacuums of each a day; under the benchmark's soak (14 runs a
-- second) one a minute (autovacuum_naptime). A vacuum visits the pages the visibility map does not
-- mark all-visible (the recent ones) and, when their dead items exceed 2 % of the table's pages, every
-- page of the table's indexes (PostgreSQL 15 skips the indexes below that).
--
-- Locks: ALTER TABLE ... SET (storage parameters) takes SHARE UPDATE EXCLUSIVE for the statement
-- (it conflicts with a running VACUUM, not with reads or writes) and rewrites nothing.
-- Expand/contract: additive (storage parameters only); every binary of 0017..0029 runs on it.

ALTER TABLE nifi_ops.load_run SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE nifi_ops.load_partition SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);
ALTER TABLE nifi_ops.load_dispatch SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
