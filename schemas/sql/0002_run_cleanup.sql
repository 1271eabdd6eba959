-- 0002_run_cleanup: load_run.cleaned_at and the cleanup-candidate index (ledger-contract.md §2.1,
-- §5.17, §5.18).
--
-- cleaned_at is set once, when the cleanup of a run's staging table and HDFS run directory is
-- recorded; null means not cleaned yet. The column is nullable without a default, so adding it
-- rewrites no row. Existing table-level UPDATE grants cover the new column.

ALTER TABLE nifi_ops.load_run ADD COLUMN cleaned_at timestamptz;

-- Cleanup candidates per job by end time; cleaned runs leave the index.
CREATE INDEX ix_load_run_cleanup
    ON nifi_ops.load_run (job_key, completed_at)
    WHERE cleaned_at IS NULL;
