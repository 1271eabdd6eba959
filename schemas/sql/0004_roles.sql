-- 0004_roles: one PostgreSQL login role per service, least privilege each (kafka-edition.md §7,
-- ledger-contract.md §2.7). Rights are listed per role in docs/ledger.md.
--
-- - Roles are cluster-wide and may already exist (a DBA, another database of the same cluster):
--   they are created only if missing, and an existing NOLOGIN role is given LOGIN (services log in
--   with it). Passwords are not set here; authentication is the cluster's business (pg_hba).
-- - This file is authoritative for the rights of these roles on nifi_ops: it first revokes what
--   the migration account granted them on the schema, then grants exactly the list below. (Grants
--   made by another grantor are not touched by REVOKE; check \dp after a DBA has been at work.)
-- - No role gets DELETE, TRUNCATE, REFERENCES, TRIGGER or CREATE: rows are never deleted by a
--   service (invalidation instead), and DDL belongs to the migration account alone.
-- - Later migrations that add a table grant its rights in the same migration.

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['ll_registrar', 'll_claimer', 'll_completion', 'll_dispatcher',
                             'll_sweeper', 'll_operator', 'nifi_runtime', 'load_control_api']
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION',
                           r);
        ELSIF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = r) THEN
            RAISE NOTICE 'role % exists without LOGIN; granting LOGIN', r;
            EXECUTE format('ALTER ROLE %I LOGIN', r);
        END IF;
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), r);
    END LOOP;
END
$$;

-- Start from nothing (this migration's account's grants only), then grant the exact lists.
REVOKE ALL ON ALL TABLES IN SCHEMA nifi_ops
    FROM ll_registrar, ll_claimer, ll_completion, ll_dispatcher, ll_sweeper, ll_operator,
         nifi_runtime, load_control_api;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA nifi_ops
    FROM ll_registrar, ll_claimer, ll_completion, ll_dispatcher, ll_sweeper, ll_operator,
         nifi_runtime, load_control_api;
REVOKE ALL ON SCHEMA nifi_ops
    FROM ll_registrar, ll_claimer, ll_completion, ll_dispatcher, ll_sweeper, ll_operator,
         nifi_runtime, load_control_api;

GRANT USAGE ON SCHEMA nifi_ops
    TO ll_registrar, ll_claimer, ll_completion, ll_dispatcher, ll_sweeper, ll_operator,
       nifi_runtime, load_control_api;

-- registrar: run admission. Creates runs (run request), registers manifests (partitions, SOURCE
-- metrics upsert, the run's CAS CREATED -> EXTRACTING / FAILED_MANIFEST), and for an all-empty
-- manifest completes the run at once and enqueues VALIDATE_RUN. Locks the run row (needs UPDATE).
GRANT SELECT, INSERT, UPDATE ON nifi_ops.load_run        TO ll_registrar;
GRANT SELECT, INSERT         ON nifi_ops.load_partition  TO ll_registrar;
GRANT SELECT, INSERT, UPDATE ON nifi_ops.load_validation TO ll_registrar;
GRANT SELECT, INSERT         ON nifi_ops.load_dispatch   TO ll_registrar;
GRANT INSERT                 ON nifi_ops.load_event      TO ll_registrar;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA nifi_ops  TO ll_registrar;

-- claimer: ownership. Partition claims (run heartbeat, partition PENDING/RETRY -> RUNNING, token
-- history, ACK of the partition's REISSUE_PARTITION dispatches) and publish claims
-- (STAGING_VALIDATED -> PUBLISHING, publish token history).
GRANT SELECT, UPDATE ON nifi_ops.load_run           TO ll_claimer;
GRANT SELECT, UPDATE ON nifi_ops.load_partition     TO ll_claimer;
GRANT SELECT, INSERT ON nifi_ops.load_claim_token   TO ll_claimer;
GRANT SELECT, INSERT ON nifi_ops.load_publish_token TO ll_claimer;
GRANT SELECT, UPDATE ON nifi_ops.load_dispatch      TO ll_claimer;
GRANT INSERT         ON nifi_ops.load_event         TO ll_claimer;

-- completion: every gate. Chunk upserts, partition and run completion CAS, VALIDATE_RUN enqueue,
-- partition and run failures, validation start (dispatch ACK), metrics upsert, stage-validated,
-- publish result, success. Reads the token histories to tell a superseded token from an unseen one.
GRANT SELECT, UPDATE         ON nifi_ops.load_run           TO ll_completion;
GRANT SELECT, UPDATE         ON nifi_ops.load_partition     TO ll_completion;
GRANT SELECT, INSERT, UPDATE ON nifi_ops.load_file          TO ll_completion;
GRANT SELECT                 ON nifi_ops.load_claim_token   TO ll_completion;
GRANT SELECT, INSERT, UPDATE ON nifi_ops.load_validation    TO ll_completion;
GRANT SELECT, INSERT, UPDATE ON nifi_ops.load_dispatch      TO ll_completion;
GRANT SELECT                 ON nifi_ops.load_publish_token TO ll_completion;
GRANT INSERT                 ON nifi_ops.load_event         TO ll_completion;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA nifi_ops     TO ll_completion;

-- dispatcher: the outbox. Leases and updates dispatch rows (FOR UPDATE SKIP LOCKED needs UPDATE),
-- reads the run and partition rows to build the command, records DISPATCH_DEAD.
GRANT SELECT         ON nifi_ops.load_run       TO ll_dispatcher;
GRANT SELECT         ON nifi_ops.load_partition TO ll_dispatcher;
GRANT SELECT, UPDATE ON nifi_ops.load_dispatch  TO ll_dispatcher;
GRANT INSERT         ON nifi_ops.load_event     TO ll_dispatcher;

-- sweeper: recovery. Times out runs and partitions, reissues partitions (invalidates files,
-- inserts REISSUE_PARTITION), requeues or kills unacknowledged dispatches, and reads load_event
-- for the "one stale alert per period" rule.
GRANT SELECT, UPDATE         ON nifi_ops.load_run       TO ll_sweeper;
GRANT SELECT, UPDATE         ON nifi_ops.load_partition TO ll_sweeper;
GRANT SELECT, UPDATE         ON nifi_ops.load_file      TO ll_sweeper;
GRANT SELECT, INSERT, UPDATE ON nifi_ops.load_dispatch  TO ll_sweeper;
GRANT SELECT, INSERT         ON nifi_ops.load_event     TO ll_sweeper;

-- operator (loadctl): reads everything; resolves PUBLISH_UNKNOWN and records cleanup (load_run),
-- resends dispatches (load_dispatch), and audits who and why (load_event).
GRANT SELECT ON ALL TABLES IN SCHEMA nifi_ops TO ll_operator;
GRANT UPDATE ON nifi_ops.load_run             TO ll_operator;
GRANT UPDATE ON nifi_ops.load_dispatch        TO ll_operator;
GRANT INSERT ON nifi_ops.load_event           TO ll_operator;

-- Services that record replayable events (DEAD_LETTER) with a name-based event_id insert them
-- with ON CONFLICT (event_id) DO NOTHING, which needs SELECT on the conflict column: only that
-- column, so the event log itself stays unreadable to them.
GRANT SELECT (event_id) ON nifi_ops.load_event
    TO ll_registrar, ll_claimer, ll_completion, ll_dispatcher;

-- nifi_runtime (NiFi PG-90 and any executor writing its own events): events only.
GRANT INSERT ON nifi_ops.load_event TO nifi_runtime;

-- load_control_api: the contract's single runtime account (§2.7), kept for a monolithic
-- deployment; it also needs the Kafka edition's token histories (append-only: SELECT, INSERT).
GRANT SELECT, INSERT, UPDATE ON
    nifi_ops.load_run, nifi_ops.load_partition, nifi_ops.load_file,
    nifi_ops.load_validation, nifi_ops.load_dispatch
    TO load_control_api;
GRANT SELECT, INSERT ON nifi_ops.load_event         TO load_control_api;
GRANT SELECT, INSERT ON nifi_ops.load_claim_token   TO load_control_api;
GRANT SELECT, INSERT ON nifi_ops.load_publish_token TO load_control_api;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA nifi_ops TO load_control_api;
