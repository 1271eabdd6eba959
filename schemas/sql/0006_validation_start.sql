-- 0006_validation_start: the one caller that started a run's validation (contract §5.7).
--
-- The first ValidationStart moves EXTRACTED_VALIDATED -> STAGE_VALIDATING and answers
-- started=true with the run context. Recording who won (the dispatch id and the node) lets an
-- identical replay of that request answer started=true again (REPLAY), while every other caller
-- keeps getting started=false. Without it, a crash between the database commit and the Kafka
-- commit would turn the winner's answer into started=false, and nobody would validate the run.
CREATE TABLE nifi_ops.load_validation_start (
    run_id      uuid          NOT NULL REFERENCES nifi_ops.load_run (run_id) ON DELETE RESTRICT,
    dispatch_id uuid          NOT NULL,
    node        varchar(200)  NOT NULL,
    started_at  timestamptz   NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT pk_load_validation_start PRIMARY KEY (run_id)
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_completion') THEN
        GRANT SELECT, INSERT ON nifi_ops.load_validation_start TO ll_completion;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_operator') THEN
        GRANT SELECT ON nifi_ops.load_validation_start TO ll_operator;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'll_sweeper') THEN
        GRANT SELECT ON nifi_ops.load_validation_start TO ll_sweeper;
    END IF;
END
$$;
