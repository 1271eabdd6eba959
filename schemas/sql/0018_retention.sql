-- 0018_retention: the ledger's retention purge (issue 42, item 3; docs/ledger.md "Retention",
-- docs/operations.md "Retention purge"). `loadctl purge` removes the runs that ended longer ago
-- than a period (default P400D) with every row keyed by them, a few runs per transaction, as the
-- role created here. The schema's old promise ("event retention is a DBA job") becomes a command.
--
-- What this file adds (additive only: binaries of schema 0015..0017 run on it unchanged):
-- - ll_retention, a login role allowed exactly the purge: DELETE on the history tables keyed by a
--   run (and SELECT of their run_id column, which a DELETE ... WHERE run_id = ... needs), INSERT on
--   load_event (the purge's audit row), and EXECUTE on the two functions below. Nothing else: no
--   UPDATE, no SELECT of any other column, no other table.
-- - nifi_ops_retention.lock_runs / nifi_ops_retention.count_runs: locking a run row FOR UPDATE needs
--   UPDATE on load_run, which the purge role must not have; these SECURITY DEFINER functions (owned
--   by the migration account, fixed search_path, no dynamic SQL) lock or count the candidates and do
--   nothing else. They live in a schema of their own that only ll_retention may use: a function is
--   executable by PUBLIC by default, a new schema is usable by nobody, and this keeps the file
--   expand-only (no REVOKE, docs/upgrading.md). The schema is created if missing and the functions
--   replaced (a ledger rebuilt by DROP SCHEMA nifi_ops CASCADE leaves this schema behind). A candidate is a run in a terminal status
--   (docs/contract.md §3.1: SUCCESS and the seven failure/timeout statuses) whose completed_at is
--   before the cutoff and that no other run names as retry_of_run_id. Active runs (PUBLISH_UNKNOWN
--   included, which has no completed_at) are never candidates. The lock is FOR UPDATE SKIP LOCKED:
--   a run busy with a service's transaction is skipped, never waited for; READ COMMITTED re-checks
--   the WHERE on the row's newest version once locked. Both read through ix_load_run_completed
--   (0016), oldest ended first.
-- - deleting a run's dispatches (and the foreign-key check of deleting its run row) finds them by
--   run_id through 0017's ix_load_dispatch_run (run_id, partition_id).
-- - ix_load_run_retry_of: deleting a load_run row checks the self-reference retry_of_run_id (NO
--   ACTION); without an index that is a scan of load_run per deleted run. The column is never
--   written by the services, so the partial index is empty in practice.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_retention') THEN
        CREATE ROLE ll_retention LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
    ELSIF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'll_retention') THEN
        RAISE NOTICE 'role ll_retention exists without LOGIN; granting LOGIN';
        ALTER ROLE ll_retention LOGIN;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO ll_retention', current_database());
END
$$;

-- The role is new: it holds nothing but what this file grants (a role of that name a DBA created
-- before keeps its own grants: check \dp nifi_ops.* then).
GRANT USAGE ON SCHEMA nifi_ops TO ll_retention;
CREATE SCHEMA IF NOT EXISTS nifi_ops_retention;
GRANT USAGE ON SCHEMA nifi_ops_retention TO ll_retention;

CREATE INDEX ix_load_run_retry_of ON nifi_ops.load_run (retry_of_run_id)
    WHERE retry_of_run_id IS NOT NULL;

-- The candidates of a purge, locked: at most p_limit runs ended before p_cutoff, oldest first.
CREATE OR REPLACE FUNCTION nifi_ops_retention.lock_runs(p_cutoff timestamptz, p_limit integer)
    RETURNS TABLE (run_id uuid, status varchar, completed_at timestamptz, cleaned boolean)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT r.run_id, r.status, r.completed_at, r.cleaned_at IS NOT NULL
      FROM nifi_ops.load_run r
     WHERE r.completed_at IS NOT NULL
       AND r.completed_at < p_cutoff
       AND r.status IN ('SUCCESS', 'FAILED_MANIFEST', 'FAILED_EXTRACT', 'FAILED_STAGE_VALIDATION',
                        'FAILED_PUBLISH', 'FAILED_TARGET_VALIDATION', 'FAILED_SNAPSHOT_EXPIRED',
                        'TIMED_OUT')
       AND NOT EXISTS (SELECT 1 FROM nifi_ops.load_run c WHERE c.retry_of_run_id = r.run_id)
     ORDER BY r.completed_at, r.run_id
     LIMIT p_limit
       FOR UPDATE OF r SKIP LOCKED
$fn$;

-- What a purge would take (dry run): how many candidates (at most p_limit), the oldest and newest
-- ended time among them, and how many were never cleaned (HDFS files and staging table recorded
-- as removed). No lock.
CREATE OR REPLACE FUNCTION nifi_ops_retention.count_runs(p_cutoff timestamptz, p_limit integer)
    RETURNS TABLE (runs bigint, oldest timestamptz, newest timestamptz, uncleaned bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT count(*), min(c.completed_at), max(c.completed_at), count(*) FILTER (WHERE NOT c.cleaned)
      FROM (SELECT r.completed_at, r.cleaned_at IS NOT NULL AS cleaned
              FROM nifi_ops.load_run r
             WHERE r.completed_at IS NOT NULL
               AND r.completed_at < p_cutoff
               AND r.status IN ('SUCCESS', 'FAILED_MANIFEST', 'FAILED_EXTRACT',
                                'FAILED_STAGE_VALIDATION', 'FAILED_PUBLISH',
                                'FAILED_TARGET_VALIDATION', 'FAILED_SNAPSHOT_EXPIRED', 'TIMED_OUT')
               AND NOT EXISTS (SELECT 1 FROM nifi_ops.load_run c WHERE c.retry_of_run_id = r.run_id)
             ORDER BY r.completed_at, r.run_id
             LIMIT p_limit) c
$fn$;

GRANT EXECUTE ON FUNCTION nifi_ops_retention.lock_runs(timestamptz, integer) TO ll_retention;
GRANT EXECUTE ON FUNCTION nifi_ops_retention.count_runs(timestamptz, integer) TO ll_retention;

-- The history tables keyed by a run, children before parents (the order `loadctl purge` deletes
-- in): DELETE, and SELECT of run_id for its WHERE.
GRANT SELECT (run_id), DELETE ON nifi_ops.load_claim_token      TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_file             TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_partition        TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_validation       TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_validation_start TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_dispatch         TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_publish_token    TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_event            TO ll_retention;
GRANT SELECT (run_id), DELETE ON nifi_ops.load_run              TO ll_retention;
-- the audit row of each purge batch (event RUNS_PURGED, run_id null)
GRANT INSERT ON nifi_ops.load_event TO ll_retention;
