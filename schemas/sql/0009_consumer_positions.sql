-- 0009_consumer_positions: each consumer group's read position on each Kafka partition, kept in
-- the ledger itself (issue 27 §1; Kafka's consumer documentation, "Storing Offsets Outside
-- Kafka"). A service writes it in the same transaction as the effects of the messages it covers,
-- so the ledger never claims a message whose effect it lacks. When PostgreSQL goes back in time
-- (an asynchronous failover, a point-in-time recovery) the positions go back with the effects,
-- and on its next assignment the service starts each partition at min(ledger, Kafka): what the
-- database lost is read and applied again (docs/design.md §4).
--
-- next_offset is the first offset not done (the Kafka commit's offset); done_above the done
-- offsets above it in the commit metadata's text (common/include/ll/offtrack.h, "ll1:"/"ll2:").
-- Rows are rewritten in place by every batch: a low fillfactor keeps the updates HOT.
CREATE TABLE nifi_ops.consumer_position (
    consumer_group  text        NOT NULL CHECK (length(consumer_group) BETWEEN 1 AND 255),
    topic           text        NOT NULL CHECK (length(topic) BETWEEN 1 AND 255),
    kafka_partition integer     NOT NULL CHECK (kafka_partition >= 0),
    next_offset     bigint      NOT NULL CHECK (next_offset >= 0),
    done_above      text        NOT NULL DEFAULT '' CHECK (length(done_above) < 4000),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer_group, topic, kafka_partition)
) WITH (fillfactor = 50);

GRANT SELECT, INSERT, UPDATE ON nifi_ops.consumer_position TO ll_registrar, ll_claimer, ll_completion;
GRANT SELECT ON nifi_ops.consumer_position TO ll_operator;

-- A position found behind Kafka's committed offset when a service was assigned its partitions
-- or rewound: the database had lost committed transactions, and the offsets [from_offset,
-- to_offset) were read and applied again (the log line ledger_behind_kafka, the metric
-- loadledger_reread_offsets_total{behind="ledger"}): the operator's record of a detected database
-- loss. The inputs of such a range are applied again without a second answer (docs/design.md §5,
-- docs/operations.md "PostgreSQL high availability").
CREATE TABLE nifi_ops.position_rewind (
    rewind_id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group  text        NOT NULL CHECK (length(consumer_group) BETWEEN 1 AND 255),
    topic           text        NOT NULL CHECK (length(topic) BETWEEN 1 AND 255),
    kafka_partition integer     NOT NULL CHECK (kafka_partition >= 0),
    from_offset     bigint      NOT NULL CHECK (from_offset >= 0),
    to_offset       bigint      NOT NULL CHECK (to_offset >= from_offset),
    offsets         bigint      NOT NULL CHECK (offsets >= 0),
    detected_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

GRANT INSERT ON nifi_ops.position_rewind TO ll_registrar, ll_claimer, ll_completion;
GRANT SELECT ON nifi_ops.position_rewind TO ll_operator;
