-- 0019_status_events: the run-status events of each run, in an index of their own (issue 42, item 2;
-- docs/ledger.md, "Indexes of the reads"). `loadctl verify` reads, for each run of a page, the
-- events that set a run status (common/include/ll/verify.h, LL_STATUS_EVENT_NAMES_SQL: about 8 of a
-- run's 48 events). Through ix_load_event_run_time (run_id, event_time) it visited every event of
-- the run and dropped five in six by their name; that index (390 MB at a year of history) outgrew
-- shared_buffers, and a page of 500 runs cost 50-110 ms of reads. This index holds the status events
-- only (53 MB at a year), so a page reads a seventh of the heap tuples and an index that stays cached
-- (tests/integration/test_history_plans.py checks the plan and that its predicate is the list
-- verify writes out).
--
-- Additive (an index): binaries of schema 17 and 18 run on it unchanged, and verify of this build
-- reads through ix_load_event_run_time on a ledger without it (LL_SCHEMA_MIN stays 17). The predicate
-- must stay the list of verify.h: a name added there without a migration that rebuilds this index
-- makes the planner fall back to ix_load_event_run_time (the plan test fails first).
--
-- Build: CREATE INDEX takes a SHARE lock on load_event for its duration (inserts of events wait);
-- on the benchmark's year (8.6 million events) it took 3.3 s on the benchmark's machine. A DBA who
-- wants no wait at all creates it by hand first with CREATE INDEX CONCURRENTLY under the same name
-- and definition, then records this file (schemas/sql/README.md, "Run by hand").
CREATE INDEX ix_load_event_status
    ON nifi_ops.load_event (run_id, event_time)
    WHERE event_name IN ('RUN_STARTED', 'MANIFEST_CREATED', 'MANIFEST_INVALID', 'EXTRACT_VALIDATED',
                         'STAGE_VALIDATION_STARTED', 'STAGE_VALIDATED', 'PUBLISH_STARTED',
                         'PUBLISH_FINISHED', 'PUBLISH_UNKNOWN', 'RUN_SUCCESS', 'RUN_TIMED_OUT',
                         'RUN_FAILED', 'PUBLISH_UNKNOWN_RESOLVED');
