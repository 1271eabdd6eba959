-- 0013_input_refusal: a replay restates the first answer (issue 39, item 5; docs/design.md §5, "A
-- replay restates"). The consuming services record here every input they refused (a REJECTED
-- reply) or dead-lettered, in the transaction of that answer: the reply as JSON, or the dead
-- letter's code and reason. An input read again below the ledger's own position for its group (a
-- group reset to earlier offsets, a Kafka commit that did not happen) was answered before: when a
-- row here names it (same group, topic, partition and offset, and the same bytes: value_digest),
-- the loop answers it with what the row holds and applies nothing; without one it was applied, and
-- a refusal computed now from a run that moved on is answered REPLAY. Applied inputs are not
-- recorded (their effect in the ledger is their record): the hot path writes nothing more.
-- recorded_at lets a retention (issue 42) find old rows by an index, not by a scan.
CREATE TABLE nifi_ops.input_refusal (
    consumer_group  text        NOT NULL CHECK (length(consumer_group) BETWEEN 1 AND 255),
    topic           text        NOT NULL CHECK (length(topic) BETWEEN 1 AND 255),
    kafka_partition integer     NOT NULL CHECK (kafka_partition >= 0),
    kafka_offset    bigint      NOT NULL CHECK (kafka_offset >= 0),
    value_digest    bigint      NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('REPLY', 'DEAD_LETTER')),
    code            text        NOT NULL CHECK (length(code) BETWEEN 1 AND 64),
    reply           text        CHECK (length(reply) <= 1048576),
    reason          text        CHECK (length(reason) <= 65536),
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer_group, topic, kafka_partition, kafka_offset),
    CHECK ((kind = 'REPLY') = (reply IS NOT NULL))
);
CREATE INDEX ix_input_refusal_recorded ON nifi_ops.input_refusal (recorded_at);

GRANT SELECT, INSERT ON nifi_ops.input_refusal TO ll_registrar, ll_claimer, ll_completion;
GRANT SELECT ON nifi_ops.input_refusal TO ll_operator;
