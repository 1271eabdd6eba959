-- 0005_decisions: what the Kafka edition records so that a replayed topic gets the same answer.
--
-- load_run_rejection: a run request that was refused (DUPLICATE_ACTIVE_RUN, INVALID_HDFS_ROOT)
-- keeps its refusal under the caller's run id. Without it, replaying run-requests after the
-- blocking run has ended would admit a run that was refused the first time (kafka-edition.md §1:
-- a replay must never change a correct ledger).
CREATE TABLE nifi_ops.load_run_rejection (
    run_id       uuid         NOT NULL,
    job_key      varchar(200) NOT NULL,
    business_key varchar(200) NOT NULL,
    code         varchar(100) NOT NULL,
    message      varchar(2000),
    decided_at   timestamptz  NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT pk_load_run_rejection PRIMARY KEY (run_id)
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_registrar') THEN
        GRANT SELECT, INSERT ON nifi_ops.load_run_rejection TO ll_registrar;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_claimer') THEN
        GRANT SELECT ON nifi_ops.load_run_rejection TO ll_claimer;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_completion') THEN
        GRANT SELECT ON nifi_ops.load_run_rejection TO ll_completion;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_operator') THEN
        GRANT SELECT ON nifi_ops.load_run_rejection TO ll_operator;
    END IF;
END
$$;
