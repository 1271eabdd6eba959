-- 0012_reread_gate: the sweeper waits for the re-read (issue 39, item 3; docs/design.md §5, "The
-- sweeper waits for the re-read"). After a database loss the heartbeats went back with the ledger,
-- so a clock rule would time out runs whose inputs the consuming services are still reading again.
-- The sweeper acts on no run while a detected loss (a position_rewind row of the last
-- recovery.reread_window) is not yet re-read (its group's position below to_offset), and not within
-- recovery.start_grace after its own start, a new connection, or finding that the ledger no longer
-- holds its own last tick (a pooler hides a reconnect: sweeper_instance.tick_token is a
-- compare-and-set like the consumers' positions).
CREATE INDEX ix_position_rewind_detected ON nifi_ops.position_rewind (detected_at);
GRANT SELECT ON nifi_ops.position_rewind TO ll_sweeper;
GRANT SELECT ON nifi_ops.consumer_position TO ll_sweeper;

-- One row per sweeper instance (service.instance_id, default the host name): the token of its last
-- tick. A tick whose row does not carry the token it last wrote finds a ledger that went back in
-- time (or another process with the same instance id) and waits the grace again.
CREATE TABLE nifi_ops.sweeper_instance (
    instance_id text        PRIMARY KEY CHECK (length(instance_id) BETWEEN 1 AND 255),
    tick_token  uuid        NOT NULL,
    ticked_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
GRANT SELECT, INSERT, UPDATE ON nifi_ops.sweeper_instance TO ll_sweeper;
GRANT SELECT ON nifi_ops.sweeper_instance TO ll_operator;
