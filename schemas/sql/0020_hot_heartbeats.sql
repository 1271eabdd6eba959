-- 0020_hot_heartbeats: the heartbeat updates of load_partition and load_run become HOT (issue 42;
-- docs/ledger.md §5, "The heartbeats are HOT updates"; docs/operations.md, "Migration 0020").
--
-- Every batch of chunk reports updates its partitions (counters, heartbeat_at: chunk_bulk_write.c,
-- chunk_report.c) and its runs (heartbeat_at: position.c, chunk_report.c). PostgreSQL 15 makes an
-- UPDATE HOT (no new index entry, its dead version pruned in the page without VACUUM) only when no
-- column that ANY index of the table names (key, expression or partial-index predicate) changes value
-- and the new version fits in the row's page. Before this file ix_load_partition_recovery,
-- ix_load_run_status_heartbeat, ix_load_run_ended and ix_load_run_cleanup_ended named heartbeat_at:
-- every heartbeat inserted into every index of both tables (index growth and vacuum work that grew
-- with the soak's age). After it, no index of either table names heartbeat_at (nor a column that a
-- heartbeat statement writes: the partition's written_* counters, the run's success_partition_count),
-- and the tables keep room in their pages for the new versions. The services' statements are
-- unchanged; only loadctl's reads of the ended time move to the new column (retention.h LC_ENDED).
--
-- What it does, and what it locks:
-- 1. fillfactor: load_run 80, load_partition 80. A page keeps 1.6 kB free: room for a new version
--    of 4 runs (about 400 bytes a row on a generated history) or 7 partitions (about 210 bytes)
--    of the page that one batch touches before the page is pruned; 90 would keep room for 2 runs
--    or 3 partitions, fewer than a batch of a run's partitions touches (measured on a copy of
--    load_partition, runs of 50 partitions coming and going: 97.5-98 % of the heartbeats HOT at
--    100, 98.7-99.6 % at 90, 99.8-100 % at 80; docs/ledger.md §5). Rows written once and
--    never updated again (the history) cost a quarter more pages. Takes SHARE UPDATE EXCLUSIVE;
--    rewrites nothing by itself: it applies to the pages written from then on. Set first, so that
--    step 3's rewrite of load_run packs every page at 80 already.
-- 2. The indexes that name heartbeat_at are dropped (before the rewrite, which would rebuild them)
--    and replaced (steps 4-6). DROP INDEX takes ACCESS EXCLUSIVE on its table; like every lock
--    of the file it is held to the commit (one transaction), so load_partition is locked too for
--    the whole migration.
-- 3. load_run.ended_at, a STORED generated column: NULL while the run is active, coalesce(completed_at,
--    heartbeat_at) once its status is terminal (SUCCESS and the seven failure/timeout statuses:
--    docs/contract.md §3.1, LL_SQL_RUN_TERMINAL; the same value as loadctl's LC_ENDED on every row
--    its reads can select: each of them selects terminal statuses only). A heartbeat of an active
--    run leaves it NULL, of a terminal run with completed_at leaves it unchanged: HOT either way.
--    ADD COLUMN ... GENERATED ... STORED REWRITES load_run and rebuilds its indexes under ACCESS
--    EXCLUSIVE: every service and loadctl statement on load_run waits for it (measured, docs/
--    operations.md "Migration 0020": 0.32 s on 20,000 generated runs, 1.09 s on 60,000, so some
--    3.3 s on a year's 180,000; plan the window).
--    Why not without a rewrite: an expression index on the same CASE still names heartbeat_at (so
--    no heartbeat would be HOT); an index on completed_at alone misses the terminal runs without
--    completed_at whose ended time is heartbeat_at (loadctl's rule, retention.h); a plain column
--    filled by a trigger puts a trigger on the hot path and needs a backfill that writes every row
--    anyway (as dead versions to vacuum, in the same transaction).
-- 4. ix_load_run_active_status (status) WHERE status is active (contract §3.1, uq_load_run_active's
--    list) replaces ix_load_run_status_heartbeat (status, heartbeat_at): the sweeper's gauges (count
--    and oldest heartbeat of each active status), its stale-validation alerts, rule 1's EXTRACTING
--    runs, and loadctl monitor's active runs and RUN_STALE alerts read the few active runs through
--    it and take heartbeat_at from their rows. It holds no terminal run: no read can take every
--    FAILED run ever through it.
-- 5. ix_load_run_ended_at (ended_at, run_id) and ix_load_run_cleanup_ended_at (ended_at, run_id)
--    WHERE cleaned_at IS NULL replace the two indexes on (coalesce(completed_at, heartbeat_at),
--    run_id) (0017): the monitor's runs ended in the last 24 hours, the runs due for cleanup.
-- 6. ix_load_partition_active (status) WHERE status IN ('RUNNING', 'RETRY') replaces
--    ix_load_partition_recovery (status, heartbeat_at) with the same rows (the partitions not
--    finished and claimed or to reissue, contract §7.1): the sweeper's rules 1 and 6 read them
--    here and take heartbeat_at from their rows.
-- Each CREATE INDEX is a plain one (a migration is one transaction: CONCURRENTLY is not possible);
-- their build is part of the times above.
--
-- Expand/contract: additive for the binaries of schemas 0017 and 0018 (a nullable generated column
-- nothing of theirs writes, indexes replaced). What their reads cost during a rolling upgrade:
-- their sweeper's rules stay bounded (their status lists are constants: the planner proves they
-- imply the partial indexes' lists), but its gauges (`x.status = s.status`, s a value of an
-- unnest) cannot use a partial index and read load_run whole once per active status after every
-- tick (40 ms at 20,000 runs, 133 ms at 60,000, some 0.4 s at a year) until the sweeper is
-- replaced (second in docs/upgrading.md's order); an old loadctl's monitor frame and
-- cleanup-candidates compute coalesce(completed_at, heartbeat_at), which no index serves any
-- more: each such read scans load_run (10 ms at 20,000 runs, 35 ms at 60,000). A full (status)
-- index would keep the old gauges bounded, but it holds every terminal run, and the planner has
-- ANDed such an index's every FAILED run with a bounded range before (rule_ended.c): not kept.
-- This build's loadctl needs the column (its reads name ended_at and fail on a ledger not
-- migrated: `loadctl migrate` comes first in the upgrade order); LL_SCHEMA_MIN stays 17: the
-- services' statements are bounded with or without this file.

ALTER TABLE nifi_ops.load_run SET (fillfactor = 80);
ALTER TABLE nifi_ops.load_partition SET (fillfactor = 80);

-- dropped before the rewrite, which would rebuild them otherwise
DROP INDEX nifi_ops.ix_load_run_status_heartbeat;
DROP INDEX nifi_ops.ix_load_run_ended;
DROP INDEX nifi_ops.ix_load_run_cleanup_ended;
DROP INDEX nifi_ops.ix_load_partition_recovery;

ALTER TABLE nifi_ops.load_run ADD COLUMN ended_at timestamptz GENERATED ALWAYS AS (
    CASE WHEN status IN ('SUCCESS', 'FAILED_MANIFEST', 'FAILED_EXTRACT', 'FAILED_STAGE_VALIDATION',
                         'FAILED_PUBLISH', 'FAILED_TARGET_VALIDATION', 'FAILED_SNAPSHOT_EXPIRED',
                         'TIMED_OUT')
         THEN coalesce(completed_at, heartbeat_at) END) STORED;

CREATE INDEX ix_load_run_active_status
    ON nifi_ops.load_run (status)
    WHERE status IN (
        'CREATED', 'EXTRACTING',
        'EXTRACTED_VALIDATED', 'STAGE_VALIDATING', 'STAGING_VALIDATED',
        'PUBLISHING', 'PUBLISHED', 'PUBLISH_UNKNOWN'
    );

CREATE INDEX ix_load_run_ended_at
    ON nifi_ops.load_run (ended_at, run_id);

CREATE INDEX ix_load_run_cleanup_ended_at
    ON nifi_ops.load_run (ended_at, run_id)
    WHERE cleaned_at IS NULL;

CREATE INDEX ix_load_partition_active
    ON nifi_ops.load_partition (status)
    WHERE status IN ('RUNNING', 'RETRY');
