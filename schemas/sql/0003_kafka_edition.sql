-- 0003_kafka_edition: what the Kafka transport needs beyond the contract's six tables
-- (kafka-edition.md §4, §6, §7).
--
-- Topics are consumed by different services, so a chunk report or a failure report can be read
-- before the claim that allowed it has been applied. The partition row only holds the current
-- owner, so on its own the ledger cannot tell "a token not seen yet" (wait and retry) from "a token
-- that once owned the partition and was superseded by a reissue" (CLAIM_MISMATCH at once). The
-- token history below keeps every token ever granted; it is append-only.
--
-- Deliberately not added (see docs/ledger.md):
-- - no dead-letter table: a dead letter is recorded as a load_event row (event_name DEAD_LETTER);
-- - no reply/inbox table: every reply is recomputed from the ledger under the same locks, and the
--   ids the ledger mints (dispatch ids, event ids of replayable events) are name-based UUIDs of
--   natural keys, so a replay reproduces them and the primary keys absorb the duplicate;
-- - load_run.run_id is minted by the caller in the run request: unchanged.

-- ---------------------------------------------------------------------------------------------
-- load_claim_token: every partition claim ever granted (one row per new claim, i.e. per attempt).
-- Written by the claimer in the claim transaction, after the partition row is locked and moved to
-- RUNNING; never updated, never deleted.
-- - The primary key makes a token grantable at most once per partition: a superseded token can
--   never own the partition again (a replayed old claim is refused, not re-granted).
-- - uq_load_claim_token_attempt: one grant per attempt number (attempt_no = the partition's
--   attempt_count after the grant).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_claim_token (
    run_id        uuid NOT NULL,
    partition_id  varchar(40) NOT NULL,
    claim_token   uuid NOT NULL,
    attempt_no    integer NOT NULL,
    worker_node   varchar(200) NOT NULL,
    granted_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, partition_id, claim_token),
    FOREIGN KEY (run_id, partition_id)
        REFERENCES nifi_ops.load_partition (run_id, partition_id)
        ON DELETE RESTRICT,
    CONSTRAINT ck_load_claim_token_attempt CHECK (attempt_no >= 1)
);

CREATE UNIQUE INDEX uq_load_claim_token_attempt
    ON nifi_ops.load_claim_token (run_id, partition_id, attempt_no);

-- ---------------------------------------------------------------------------------------------
-- load_publish_token: every publish claim ever granted (STAGING_VALIDATED -> PUBLISHING).
-- Written by the claimer in the publish-claim transaction under the run lock. The run allows that
-- transition once, so uq_load_publish_token_run guards "one publish grant per run, ever".
-- ---------------------------------------------------------------------------------------------
CREATE TABLE nifi_ops.load_publish_token (
    run_id         uuid NOT NULL
                   REFERENCES nifi_ops.load_run (run_id) ON DELETE RESTRICT,
    publish_token  uuid NOT NULL,
    granted_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, publish_token)
);

CREATE UNIQUE INDEX uq_load_publish_token_run
    ON nifi_ops.load_publish_token (run_id);

-- ---------------------------------------------------------------------------------------------
-- Backfill from a ledger that already holds claims (for instance one migrated from the HTTP
-- reference): the current owners are the only tokens known. Superseded tokens of the past are
-- lost there; a late report carrying one waits for prerequisite_wait and is then dead-lettered.
-- ---------------------------------------------------------------------------------------------
INSERT INTO nifi_ops.load_claim_token
       (run_id, partition_id, claim_token, attempt_no, worker_node, granted_at)
SELECT run_id, partition_id, claim_token, GREATEST(attempt_count, 1),
       COALESCE(worker_node, 'unknown'),
       COALESCE(started_at, heartbeat_at, clock_timestamp())
  FROM nifi_ops.load_partition
 WHERE claim_token IS NOT NULL;

INSERT INTO nifi_ops.load_publish_token (run_id, publish_token, granted_at)
SELECT run_id, publish_token, COALESCE(publish_started_at, heartbeat_at)
  FROM nifi_ops.load_run
 WHERE publish_token IS NOT NULL;
