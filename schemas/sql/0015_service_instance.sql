-- 0015_service_instance: one process per consuming instance (issue 41, item 6; docs/design.md §3,
-- "One process per instance id"). A consuming service's transactional.id is
-- <group>.<service.instance_id>; two processes with the same pair fence each other's Kafka
-- transactions for ever. Each process takes this row's lease at start, before it makes its
-- producer, by compare-and-set, renews it every third of its lease (lease_ms) while it runs, and
-- deletes it at a clean exit. A second process is refused while the holder renewed within its
-- lease (exit 4, naming the holder); a holder that stopped renewing (a crash, a lost host) is taken
-- over once its lease has expired, or at once when it ran on the same machine (host, boot and pid
-- namespace) and its process is gone. A lease row rather than a session advisory lock: behind a
-- transaction-mode pooler (PgBouncer pool_mode=transaction) a session lock is held by whatever
-- server connection ran the statement, not by the service, and dies unseen when the pooler closes
-- that connection. renewed_at and the lease age are the database's clock only (no host's clock is
-- compared with another's).
CREATE TABLE nifi_ops.service_instance (
    consumer_group text        NOT NULL CHECK (length(consumer_group) BETWEEN 1 AND 255),
    instance_id    text        NOT NULL CHECK (length(instance_id) BETWEEN 1 AND 255),
    holder         text        NOT NULL CHECK (length(holder) BETWEEN 1 AND 64),
    host           text        NOT NULL CHECK (length(host) BETWEEN 1 AND 255),
    pid            bigint      NOT NULL CHECK (pid > 0),
    proc_start     bigint      NOT NULL DEFAULT 0 CHECK (proc_start >= 0),
    boot_id        text        NOT NULL DEFAULT '' CHECK (length(boot_id) <= 64),
    pid_ns         text        NOT NULL DEFAULT '' CHECK (length(pid_ns) <= 64),
    lease_ms       bigint      NOT NULL CHECK (lease_ms > 0),
    lease_seq      bigint      NOT NULL DEFAULT 1,
    started_at     timestamptz NOT NULL DEFAULT now(),
    renewed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, instance_id)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON nifi_ops.service_instance TO ll_registrar, ll_claimer, ll_completion;
GRANT SELECT ON nifi_ops.service_instance TO ll_operator;
