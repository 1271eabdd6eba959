-- 0014_offset_gap: inputs deleted by retention before they were read (issue 39, item 6;
-- docs/design.md §5, "Offsets the topic no longer holds"). A consuming service whose position on a
-- Kafka partition lies below the partition's log start (the broker deleted those inputs before
-- they were read: a service down longer than the topic's retention, a restore to a position older
-- than it) stops that partition with `offsets_unreadable`, naming the range, instead of skipping
-- it. An operator who has decided that the range is lost for good records it here with
-- `loadctl accept-gap` (who, why, when); the service's next merge marks the accepted range done
-- and reads on from its end. Rows are the audit record: never updated or deleted by loadledger.
CREATE TABLE nifi_ops.offset_gap_acceptance (
    acceptance_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group  text        NOT NULL CHECK (length(consumer_group) BETWEEN 1 AND 255),
    topic           text        NOT NULL CHECK (length(topic) BETWEEN 1 AND 255),
    kafka_partition integer     NOT NULL CHECK (kafka_partition >= 0),
    from_offset     bigint      NOT NULL CHECK (from_offset >= 0),
    to_offset       bigint      NOT NULL CHECK (to_offset > from_offset),
    reason          text        NOT NULL CHECK (length(reason) BETWEEN 5 AND 2000),
    accepted_by     text        NOT NULL CHECK (length(accepted_by) BETWEEN 1 AND 500),
    accepted_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ix_offset_gap_acceptance_partition
    ON nifi_ops.offset_gap_acceptance (consumer_group, topic, kafka_partition, to_offset);

GRANT SELECT ON nifi_ops.offset_gap_acceptance TO ll_registrar, ll_claimer, ll_completion;
GRANT SELECT, INSERT ON nifi_ops.offset_gap_acceptance TO ll_operator;
