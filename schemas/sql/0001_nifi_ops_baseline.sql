-- 0001_nifi_ops_baseline: schema nifi_ops, the migration version table and the six ledger tables
-- of ledger-contract.md §2 (load_run, load_partition, load_file, load_validation, load_dispatch,
-- load_event) with their checks, indexes and the contract's conditional grants (§2.7).
--
-- Applied by `loadctl migrate` inside one transaction; the version is recorded by the tool in
-- nifi_ops.schema_migrations, which is what makes this file run once. No BEGIN/COMMIT here.
--
-- Conventions:
-- - Every "now" default is clock_timestamp(): the real wall clock at the statement, not the
--   transaction start (contract: "now" means the database wall clock at the moment of the statement).
-- - Tables are created in foreign-key order; each table's indexes follow it.
-- - Constraint and index names are the contract's; the services match on them (e.g. a unique
--   violation on uq_load_run_active is DUPLICATE_ACTIVE_RUN).

-- The tool may have created the schema and the version table first; both are IF NOT EXISTS.
CREATE SCHEMA IF NOT EXISTS nifi_ops;

CREATE TABLE IF NOT EXISTS nifi_ops.schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz DEFAULT clock_timestamp()
);

-- Nothing in the ledger is visible to PUBLIC; every service role gets USAGE explicitly (0004).
REVOKE ALL ON SCHEMA nifi_ops FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- load_run (§2.1): one row per run. Status changes only by CAS (UPDATE ... WHERE status = expected);
-- version_no + 1 on every transition. run_id is minted by the caller (the run request), not here.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_run (
    run_id                    uuid PRIMARY KEY,
    job_key                   varchar(200) NOT NULL,
    business_key              varchar(200) NOT NULL,
    status                    varchar(40) NOT NULL,
    snapshot_scn              numeric(38, 0),
    source_count              bigint,
    source_null_split_count   bigint,
    source_min_split          numeric(38, 0),
    source_max_split          numeric(38, 0),
    expected_partition_count  integer,
    success_partition_count   integer NOT NULL DEFAULT 0,
    failed_partition_count    integer NOT NULL DEFAULT 0,
    extracted_count           bigint NOT NULL DEFAULT 0,
    staging_count             bigint,
    target_count              bigint,
    hdfs_run_path             varchar(1000),
    stage_table_name          varchar(255),
    publish_token             uuid,
    retry_of_run_id           uuid REFERENCES nifi_ops.load_run (run_id),
    version_no                integer NOT NULL DEFAULT 0,
    parameters                jsonb NOT NULL DEFAULT '{}'::jsonb,
    started_at                timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    extract_completed_at      timestamptz,
    publish_started_at        timestamptz,
    published_at              timestamptz,
    completed_at              timestamptz,
    error_stage               varchar(80),
    error_code                varchar(100),
    error_message             varchar(2000),
    CONSTRAINT ck_load_run_status CHECK (status IN (
        'CREATED', 'EXTRACTING',
        'EXTRACTED_VALIDATED', 'STAGE_VALIDATING', 'STAGING_VALIDATED',
        'PUBLISHING', 'PUBLISHED', 'SUCCESS',
        'FAILED_MANIFEST', 'FAILED_EXTRACT',
        'FAILED_STAGE_VALIDATION', 'FAILED_PUBLISH',
        'PUBLISH_UNKNOWN', 'FAILED_TARGET_VALIDATION',
        'FAILED_SNAPSHOT_EXPIRED', 'TIMED_OUT'
    )),
    CONSTRAINT ck_load_run_counts CHECK (
        COALESCE(source_count, 0) >= 0
        AND COALESCE(expected_partition_count, 0) >= 0
        AND success_partition_count >= 0
        AND failed_partition_count >= 0
        AND extracted_count >= 0
    )
);

-- At most one active run per (job key, business key). The only guard against duplicate active
-- runs (no pre-check): a second insert fails here and becomes DUPLICATE_ACTIVE_RUN. Terminal runs
-- leave the index, so a new run of the same key is possible once the previous one ended.
-- PUBLISH_UNKNOWN is active: it blocks new runs until an operator resolves it.
CREATE UNIQUE INDEX uq_load_run_active
    ON nifi_ops.load_run (job_key, business_key)
    WHERE status IN (
        'CREATED', 'EXTRACTING',
        'EXTRACTED_VALIDATED', 'STAGE_VALIDATING', 'STAGING_VALIDATED',
        'PUBLISHING', 'PUBLISHED', 'PUBLISH_UNKNOWN'
    );

-- Runs by status and age of last activity (sweeper, monitor).
CREATE INDEX ix_load_run_status_heartbeat
    ON nifi_ops.load_run (status, heartbeat_at);

-- Recent runs of a job (run list, monitor).
CREATE INDEX ix_load_run_job_started
    ON nifi_ops.load_run (job_key, started_at DESC);

-- ---------------------------------------------------------------------------------------------
-- load_partition (§2.2): one row per partition of a run, written once by the manifest.
-- claim_token is the current owner; load_claim_token (0003) keeps every token ever granted.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_partition (
    run_id              uuid NOT NULL
                        REFERENCES nifi_ops.load_run (run_id) ON DELETE RESTRICT,
    partition_id        varchar(40) NOT NULL,
    lower_bound         numeric(38, 0),
    upper_bound         numeric(38, 0),
    upper_inclusive     boolean NOT NULL DEFAULT false,
    is_null_partition   boolean NOT NULL DEFAULT false,
    status              varchar(20) NOT NULL DEFAULT 'PENDING',
    expected_row_count  bigint NOT NULL,
    actual_row_count    bigint,
    fragment_count      integer,
    file_count          integer,
    byte_count          bigint,
    attempt_count       integer NOT NULL DEFAULT 0,
    claim_token         uuid,
    worker_node         varchar(200),
    started_at          timestamptz,
    heartbeat_at        timestamptz,
    completed_at        timestamptz,
    error_code          varchar(100),
    error_message       varchar(2000),
    PRIMARY KEY (run_id, partition_id),
    CONSTRAINT ck_load_partition_status CHECK (status IN (
        'PENDING', 'RUNNING', 'RETRY', 'SUCCESS', 'FAILED', 'TIMED_OUT'
    )),
    CONSTRAINT ck_load_partition_counts CHECK (
        expected_row_count >= 0
        AND COALESCE(actual_row_count, 0) >= 0
        AND COALESCE(fragment_count, 0) >= 0
        AND COALESCE(file_count, 0) >= 0
        AND COALESCE(byte_count, 0) >= 0
        AND attempt_count >= 0
    ),
    CONSTRAINT ck_load_partition_bounds CHECK (
        is_null_partition
        OR (lower_bound IS NOT NULL AND upper_bound IS NOT NULL
            AND lower_bound <= upper_bound)
    )
);

-- Partition counts per status of a run (completion CAS, run detail).
CREATE INDEX ix_load_partition_status
    ON nifi_ops.load_partition (run_id, status);

-- Stale-partition search of the sweeper; only unfinished claims are indexed.
CREATE INDEX ix_load_partition_recovery
    ON nifi_ops.load_partition (status, heartbeat_at)
    WHERE status IN ('RUNNING', 'RETRY');

-- ---------------------------------------------------------------------------------------------
-- load_file (§2.3): the chunk ledger, upserted on (run, partition, chunk_index). Rows are never
-- deleted: the sweeper invalidates (WRITTEN -> FAILED) before a reissue.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_file (
    run_id               uuid NOT NULL,
    partition_id         varchar(40) NOT NULL,
    chunk_index          integer NOT NULL,
    fragment_identifier  varchar(100),
    fragment_count       integer NOT NULL,
    hdfs_path            varchar(1500) NOT NULL,
    record_count         bigint NOT NULL,
    byte_count           bigint,
    checksum             varchar(128),
    status               varchar(20) NOT NULL DEFAULT 'WRITTEN',
    written_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, partition_id, chunk_index),
    FOREIGN KEY (run_id, partition_id)
        REFERENCES nifi_ops.load_partition (run_id, partition_id)
        ON DELETE RESTRICT,
    -- One physical file backs at most one chunk row in the whole ledger (across runs).
    CONSTRAINT uq_load_file_path UNIQUE (hdfs_path),
    CONSTRAINT ck_load_file_status CHECK (status IN ('WRITTEN', 'VERIFIED', 'FAILED')),
    CONSTRAINT ck_load_file_counts CHECK (
        chunk_index >= 0
        AND fragment_count > 0
        AND record_count >= 0
        AND COALESCE(byte_count, 0) >= 0
    )
);

-- Aggregate of a partition's WRITTEN files (chunk gate), invalidation before a reissue.
CREATE INDEX ix_load_file_partition_status
    ON nifi_ops.load_file (run_id, partition_id, status);

-- ---------------------------------------------------------------------------------------------
-- load_validation (§2.4): quality metrics per stage, upserted on uq_load_validation_metric.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_validation (
    validation_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          uuid NOT NULL
                    REFERENCES nifi_ops.load_run (run_id) ON DELETE RESTRICT,
    stage           varchar(30) NOT NULL,
    metric_name     varchar(150) NOT NULL,
    expected_value  text,
    actual_value    text,
    tolerance       text,
    result          varchar(10) NOT NULL,
    query_version   varchar(50) NOT NULL,
    details         jsonb NOT NULL DEFAULT '{}'::jsonb,
    measured_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_load_validation_stage CHECK (stage IN (
        'SOURCE', 'PARTITION', 'HDFS', 'STAGING', 'TARGET'
    )),
    CONSTRAINT ck_load_validation_result CHECK (result IN ('PASS', 'FAIL', 'WARN'))
);

-- Gate reads: every metric of one stage of a run, by result.
CREATE INDEX ix_load_validation_run_stage
    ON nifi_ops.load_validation (run_id, stage, result);

-- Upsert key: one row per (run, stage, metric, query version); a re-report overwrites it.
CREATE UNIQUE INDEX uq_load_validation_metric
    ON nifi_ops.load_validation (run_id, stage, metric_name, query_version);

-- ---------------------------------------------------------------------------------------------
-- load_dispatch (§2.5): the outbox. Written in the same transaction as the state change that
-- needs a call to the data plane; delivered at least once by the dispatcher.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_dispatch (
    dispatch_id       uuid PRIMARY KEY,
    run_id            uuid NOT NULL
                      REFERENCES nifi_ops.load_run (run_id) ON DELETE RESTRICT,
    dispatch_type     varchar(30) NOT NULL,
    partition_id      varchar(40),
    status            varchar(20) NOT NULL DEFAULT 'PENDING',
    attempt_count     integer NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_http_status  integer,
    last_error        varchar(2000),
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    sent_at           timestamptz,
    acked_at          timestamptz,
    CONSTRAINT ck_load_dispatch_type CHECK (dispatch_type IN (
        'VALIDATE_RUN', 'REISSUE_PARTITION'
    )),
    CONSTRAINT ck_load_dispatch_status CHECK (status IN (
        'PENDING', 'SENT', 'ACKED', 'DEAD'
    )),
    CONSTRAINT ck_load_dispatch_partition CHECK (
        (dispatch_type = 'VALIDATE_RUN' AND partition_id IS NULL)
        OR (dispatch_type = 'REISSUE_PARTITION' AND partition_id IS NOT NULL)
    )
);

-- At most one validation call per run, ever. Enqueue uses
-- ON CONFLICT (run_id) WHERE dispatch_type = 'VALIDATE_RUN' DO NOTHING against it.
-- REISSUE_PARTITION is deliberately not unique: every reissue is a new row.
CREATE UNIQUE INDEX uq_load_dispatch_validate
    ON nifi_ops.load_dispatch (run_id)
    WHERE dispatch_type = 'VALIDATE_RUN';

-- Due rows for the dispatcher lease and the sweeper's SENT scan; ACKED and DEAD rows stay out.
CREATE INDEX ix_load_dispatch_due
    ON nifi_ops.load_dispatch (status, next_attempt_at)
    WHERE status IN ('PENDING', 'SENT');

-- ---------------------------------------------------------------------------------------------
-- load_event (§2.6): append-only event log of the services and of NiFi. run_id deliberately has
-- no foreign key (an event must never be blocked by the run row, and may name an unknown run).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_event (
    event_id        uuid PRIMARY KEY,
    event_time      timestamptz NOT NULL DEFAULT clock_timestamp(),
    event_level     varchar(10) NOT NULL,
    event_name      varchar(80) NOT NULL,
    run_id          uuid,
    job_key         varchar(200),
    business_key    varchar(200),
    partition_id    varchar(40),
    chunk_index     integer,
    process_group   varchar(100),
    processor_name  varchar(150),
    processor_id    varchar(100),
    node_id         varchar(200),
    attempt_no      integer,
    row_count       bigint,
    byte_count      bigint,
    duration_ms     bigint,
    error_class     varchar(40),
    error_code      varchar(100),
    message         varchar(2000),
    details         jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT ck_load_event_level CHECK (event_level IN (
        'TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'
    )),
    CONSTRAINT ck_load_event_values CHECK (
        COALESCE(attempt_no, 0) >= 0
        AND COALESCE(row_count, 0) >= 0
        AND COALESCE(byte_count, 0) >= 0
        AND COALESCE(duration_ms, 0) >= 0
    )
);

-- Timeline of one run, newest first.
CREATE INDEX ix_load_event_run_time
    ON nifi_ops.load_event (run_id, event_time DESC);

-- Recent events of a job.
CREATE INDEX ix_load_event_job_time
    ON nifi_ops.load_event (job_key, event_time DESC);

-- Alerts: recent WARN/ERROR events only.
CREATE INDEX ix_load_event_error
    ON nifi_ops.load_event (event_time DESC, event_name)
    WHERE event_level IN ('WARN', 'ERROR');

-- Time-range scans and retention purge (append-only, time-ordered: BRIN is enough).
CREATE INDEX ix_load_event_time_brin
    ON nifi_ops.load_event USING brin (event_time);

-- ---------------------------------------------------------------------------------------------
-- Grants of §2.7, applied only to roles that already exist (a DBA may have created them).
-- 0004 creates every service role and (re)grants all rights, including these.
-- ---------------------------------------------------------------------------------------------
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'load_control_api') THEN
        GRANT USAGE ON SCHEMA nifi_ops TO load_control_api;
        GRANT SELECT, INSERT, UPDATE ON
            nifi_ops.load_run, nifi_ops.load_partition, nifi_ops.load_file,
            nifi_ops.load_validation, nifi_ops.load_dispatch
            TO load_control_api;
        GRANT SELECT, INSERT ON nifi_ops.load_event TO load_control_api;
        GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA nifi_ops TO load_control_api;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'nifi_runtime') THEN
        GRANT USAGE ON SCHEMA nifi_ops TO nifi_runtime;
        GRANT INSERT ON nifi_ops.load_event TO nifi_runtime;
    END IF;
END
$$;
