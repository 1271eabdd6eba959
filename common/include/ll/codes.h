/*
 * codes.h - the catalogue of every code loadledger speaks (docs/design.md, its opening): the reply outcomes,
 * the rejection codes of a reply, the error codes of a dead letter (header ll.error.code), the event names
 * and error codes written to load_event, the codes of loadctl's JSON errors and the names of loadctl verify's
 * invariants. docs/codes.md is generated from this table (tests/style/check_codes.py --write) and is the one
 * page to read.
 *
 * Each entry is X(NAME, WHERE, SECTION, MEANING):
 *   NAME     the code as sent or stored (a C identifier, stringified with #NAME);
 *   WHERE    the LL_CW_* bits naming where it can come from;
 *   SECTION  the contract section: "C§5.4" = docs/contract.md §5.4, "K§4" = docs/contract.md K§4
 *            (the Kafka edition), "D§9" = docs/design.md §9 (a project extension),
 *            "L" = tools/loadctl/README.md;
 *   MEANING  one line.
 * Pure: no I/O, no storage; expand LL_CODES with a macro of your own.
 *
 * tests/style/check_codes.py (ctest style.codes) fails when a C source (or an SQL constant in it)
 * uses an upper-case code literal that this table lacks, when the table has a code nothing uses,
 * and when docs/codes.md is not the table's rendering. Literals that are not codes (statuses,
 * log levels, column headers...) are listed, with their reason, in the checker.
 */
#ifndef LL_CODES_H
#define LL_CODES_H

/* Where a code can come from (bits of an entry's WHERE). */
#define LL_CW_OUTCOME 0x01 /* the outcome field of a reply */
#define LL_CW_REPLY   0x02 /* the code field of a REJECTED reply (or a reason in its details) */
#define LL_CW_DEAD    0x04 /* the ll.error.code header of a dead letter */
#define LL_CW_EVENT   0x08 /* the event_name of a load_event row */
#define LL_CW_ERROR   0x10 /* an error_code stored in load_event / load_run / load_partition */
#define LL_CW_LOADCTL 0x20 /* the code of a loadctl JSON error, or a loadctl verify invariant */

/* clang-format off */
#define LL_CODES(X) \
    /* Outcomes of a reply (K§4): every input gets exactly one reply or one dead letter. */ \
    X(ACCEPTED, LL_CW_OUTCOME, "K§4", "the input was applied now: the ledger changed") \
    X(REPLAY, LL_CW_OUTCOME, "K§4", "the input was applied before: same answer, nothing changed (idempotent)") \
    X(REJECTED, LL_CW_OUTCOME, "K§4", "a business refusal (409/422 in the reference); the reply's code says which") \
    /* Rejection codes of a reply. */ \
    X(RUN_NOT_FOUND, LL_CW_REPLY | LL_CW_LOADCTL, "C§4.1", "no run with this run id") \
    X(PARTITION_NOT_FOUND, LL_CW_REPLY, "C§4.1", "the run has no partition with this partition id") \
    X(UNIQUE_VIOLATION, LL_CW_REPLY, "C§4.1", "a unique key refused the row, e.g. one hdfsPath reported for two chunks") \
    X(DUPLICATE_ACTIVE_RUN, LL_CW_REPLY, "C§5.1", "an active run of the same job and business key exists") \
    X(RUN_ID_CONFLICT, LL_CW_REPLY, "C§5.1", "the run id exists with another job or business key") \
    X(INVALID_HDFS_ROOT, LL_CW_REPLY, "C§5.1", "hdfsRoot has a '..' segment") \
    X(RUN_STATUS_MISMATCH, LL_CW_REPLY | LL_CW_LOADCTL, "C§5.2", "the run's status does not allow this transition (details: the status)") \
    X(MANIFEST_INVALID, LL_CW_REPLY | LL_CW_EVENT | LL_CW_ERROR, "C§5.2", "the manifest breaks a rule; the violations name which (event at ERROR)") \
    X(DUPLICATE_PARTITION_ID, LL_CW_REPLY, "C§5.2", "manifest violation: a partition id appears twice") \
    X(EMPTY_SOURCE_BLOCKED, LL_CW_REPLY, "C§5.2", "manifest violation: sourceCount 0 and allowEmptySource false") \
    X(MIN_SPLIT_MISMATCH, LL_CW_REPLY, "C§5.2", "manifest violation: the partitions' smallest bound is not the source's min split") \
    X(MAX_SPLIT_MISMATCH, LL_CW_REPLY, "C§5.2", "manifest violation: the partitions' largest bound is not the source's max split") \
    X(MULTIPLE_NULL_PARTITIONS, LL_CW_REPLY, "C§5.2", "manifest violation: more than one NULL partition") \
    X(NULL_ROWS_WITHOUT_NULL_PARTITION, LL_CW_REPLY, "C§5.2", "manifest violation: NULL split rows but no NULL partition") \
    X(CLAIM_MISMATCH, LL_CW_REPLY, "C§5.4", "the claim token is not the partition's current one (superseded or foreign)") \
    X(PARTITION_STATUS_MISMATCH, LL_CW_REPLY, "C§5.5", "the partition's status does not allow this transition") \
    X(CHUNK_CONFLICT, LL_CW_REPLY, "C§5.4", "the chunk index was reported before with other values: investigate") \
    X(CHUNK_INDEX_OUT_OF_RANGE, LL_CW_REPLY, "C§5.4", "chunkIndex >= chunkCount") \
    X(HDFS_PATH_OUTSIDE_RUN, LL_CW_REPLY, "C§5.4", "the chunk's hdfsPath is not under the run's HDFS path") \
    X(FAIL_TRANSITION_NOT_ALLOWED, LL_CW_REPLY | LL_CW_LOADCTL, "C§5.6", "a run failure's (expected status, fail status) pair is not in the table (end-run: --status has no failure exit)") \
    X(DISPATCH_MISMATCH, LL_CW_REPLY, "C§5.7", "validation start names a dispatch that is not the run's VALIDATE_RUN") \
    X(NO_METRICS, LL_CW_REPLY, "C§3.5", "gate reason: no validation metric recorded for the stage") \
    X(GATE_BLOCKED, LL_CW_REPLY, "C§3.5", "stage-validated or success refused: a FAIL metric (or none) blocks the gate") \
    X(PUBLISH_TOKEN_MISMATCH, LL_CW_REPLY, "C§5.14", "the publish token is not the run's current one") \
    /* Dead letters (K§4): the input cannot be applied at all; the partition is not blocked. */ \
    X(DECODE_FAILED, LL_CW_DEAD, "D§9", "the value is not a record of the topic's Avro schema (or is empty)") \
    X(UNKNOWN_TOPIC, LL_CW_DEAD, "D§3", "no handler for the message's topic") \
    X(INVALID_MESSAGE, LL_CW_DEAD, "D§9", "the record decodes but a handler refused it (no more precise reason)") \
    X(INVALID_FIELD, LL_CW_DEAD, "D§9", "a field is outside the contract's formats (C§4.3)") \
    X(PREREQUISITE_TIMEOUT, LL_CW_DEAD, "D§6", "a prerequisite (the run, the manifest) did not arrive in time") \
    X(LEDGER_REJECTED, LL_CW_DEAD, "D§3", "PostgreSQL refused the values (a data or integrity error, not a retry)") \
    X(REPLY_ENCODE_FAILED, LL_CW_DEAD, "D§3", "the reply could not be encoded: the input goes to the dead-letter topic") \
    /* Events of load_event (C§8); the contract's own ones first. */ \
    X(RUN_STARTED, LL_CW_EVENT, "C§8", "run created") \
    X(RUN_REJECTED, LL_CW_EVENT, "C§5.1", "a run request refused (its code is the event's error code)") \
    X(MANIFEST_CREATED, LL_CW_EVENT, "C§8", "manifest accepted") \
    X(PARTITION_STARTED, LL_CW_EVENT, "C§8", "a new claim of a partition") \
    X(PARTITION_SUCCESS, LL_CW_EVENT, "C§8", "partition gate passed") \
    X(PARTITION_FAILED, LL_CW_EVENT, "C§8", "gate mismatch or partition failure report") \
    X(RUN_FAILED, LL_CW_EVENT, "C§8", "run moved to a FAILED_* status") \
    X(EXTRACT_VALIDATED, LL_CW_EVENT, "C§8", "run completion CAS won") \
    X(STAGE_VALIDATION_STARTED, LL_CW_EVENT, "C§8", "validation start winner") \
    X(STAGING_METRIC_FAILED, LL_CW_EVENT, "C§8", "a STAGING metrics batch contains FAIL results (built as %s_METRIC_FAILED)") \
    X(TARGET_METRIC_FAILED, LL_CW_EVENT, "C§8", "a TARGET metrics batch contains FAIL results (built as %s_METRIC_FAILED)") \
    X(STAGE_VALIDATED, LL_CW_EVENT, "C§8", "STAGING_VALIDATED reached") \
    X(PUBLISH_STARTED, LL_CW_EVENT, "C§8", "publish claim won") \
    X(PUBLISH_FINISHED, LL_CW_EVENT, "C§8", "publish result PUBLISHED") \
    X(PUBLISH_UNKNOWN, LL_CW_EVENT, "C§8", "publish result PUBLISH_UNKNOWN, or the sweeper's publish_stale (also a run status)") \
    X(PUBLISH_UNKNOWN_RESOLVED, LL_CW_EVENT, "C§5.15", "operator resolution of PUBLISH_UNKNOWN (loadctl resolve)") \
    X(RUN_SUCCESS, LL_CW_EVENT, "C§8", "SUCCESS reached") \
    X(RUN_TIMED_OUT, LL_CW_EVENT, "C§7.1", "sweeper rule 1 or 2 timed the run out") \
    X(RECOVERY_REISSUED, LL_CW_EVENT, "C§7.1", "the sweeper reissued a stale partition") \
    X(RUN_STALE_ALERT, LL_CW_EVENT, "C§7.4", "sweeper rule 4: validation stalled") \
    X(DISPATCH_DEAD, LL_CW_EVENT, "C§6", "a dispatch became DEAD (dispatcher or sweeper)") \
    X(DISPATCH_REQUEUED, LL_CW_EVENT, "C§7.3", "sweeper rule 3 requeued a dispatch of the run") \
    X(PARTITIONS_TIMED_OUT, LL_CW_EVENT, "C§7.6", "the sweeper timed out the unfinished partitions of a run that ended (details: partitions, runStatus)") \
    X(DISPATCH_ABANDONED, LL_CW_EVENT, "C§7.3", "the sweeper dropped an undelivered dispatch of a run that ended") \
    X(DISPATCH_RESENT, LL_CW_EVENT, "C§5.16", "operator resend (loadctl resend)") \
    X(RUN_CLEANED, LL_CW_EVENT, "C§5.18", "cleanup recorded (loadctl cleanup)") \
    X(RUNS_PURGED, LL_CW_EVENT, "L", "a retention purge batch removed these runs and their rows (loadctl purge; run_id null, the run ids in details)") \
    X(DEAD_LETTER, LL_CW_EVENT, "K§4", "an input went to the dead-letter topic (error code: the dead letter's)") \
    X(CLEANUP_FAILED, LL_CW_EVENT, "C§5.21", "written by NiFi, read by the monitor's alerts") \
    X(RUN_STALE, LL_CW_EVENT, "C§5.21", "the monitor's alert for a run without heartbeat (not stored)") \
    /* Error codes stored in load_event / load_run / load_partition. */ \
    X(ROW_COUNT_MISMATCH, LL_CW_ERROR, "C§5.4", "partition gate: the chunks' rows are not the expected rows") \
    X(HEARTBEAT_STALE, LL_CW_ERROR, "C§7.1", "a partition's heartbeat is older than the stale limit") \
    X(PARTITION_STALE, LL_CW_ERROR, "C§7.1", "a stale partition timed out (recovery mode FAIL)") \
    X(REISSUE_ATTEMPTS_EXHAUSTED, LL_CW_ERROR, "C§7.1", "a stale partition timed out: no reissue attempt left") \
    X(REISSUE_NOT_CLAIMED, LL_CW_ERROR, "C§7.1", "a reissued partition was not claimed again in time") \
    X(RUN_TIMEOUT, LL_CW_ERROR, "C§7.2", "the run passed its deadline") \
    X(RUN_ENDED, LL_CW_ERROR, "C§7.6", "an unfinished partition of a run that ended (FAILED_* or TIMED_OUT) timed out after recovery.stale") \
    X(PUBLISH_STALE, LL_CW_ERROR, "C§7.5", "publishing stalled: the run became PUBLISH_UNKNOWN") \
    X(RUN_ENDED_BY_OPERATOR, LL_CW_ERROR, "C§5.6", "the operator ended a stuck run with its status's run failure (loadctl end-run)") \
    /* loadctl's JSON errors (tools/loadctl/README.md) and verify's invariants. */ \
    X(USAGE, LL_CW_LOADCTL, "L", "bad command line (exit 1)") \
    X(DATABASE_UNAVAILABLE, LL_CW_LOADCTL, "C§4.1", "PostgreSQL cannot be reached (exit 3)") \
    X(DATABASE_ERROR, LL_CW_LOADCTL, "L", "PostgreSQL answered with an error (exit 3)") \
    X(BROKER_UNAVAILABLE, LL_CW_LOADCTL, "L", "Kafka cannot be reached (exit 4)") \
    X(CONFIG_INVALID, LL_CW_LOADCTL, "L", "the configuration file is missing or wrong") \
    X(TOPICS_UNAVAILABLE, LL_CW_LOADCTL, "L", "verify --topics could not read the topics") \
    X(OFFSETS_REFUSED, LL_CW_LOADCTL, "L", "offsets restore refused: a group has active members, or not an offsets file") \
    X(FILE_UNREADABLE, LL_CW_LOADCTL, "L", "offsets restore: the file cannot be read") \
    X(FILE_UNWRITABLE, LL_CW_LOADCTL, "L", "offsets save: the file cannot be written") \
    X(DISPATCH_NOT_FOUND, LL_CW_LOADCTL, "C§5.16", "no dispatch with this id in the run") \
    X(DISPATCH_STATUS_MISMATCH, LL_CW_LOADCTL, "C§5.16", "resend refused: the dispatch is PENDING or ACKED") \
    X(INVALID_REASON, LL_CW_LOADCTL, "C§5.15", "resolve, accept-gap, end-run: the reason is not 5..2000 characters") \
    X(PURGE_PERIOD_TOO_SHORT, LL_CW_LOADCTL, "L", "purge refused: --older-than is shorter than P30D") \
    X(CLEANUP_NOT_DUE, LL_CW_LOADCTL, "C§5.18", "cleanup refused: the run is active, PUBLISH_UNKNOWN or inside its retention") \
    X(INVALID_DROPPED_TABLE, LL_CW_LOADCTL, "C§5.18", "cleanup: the dropped table name is not the run's") \
    X(INVALID_DELETED_PATH, LL_CW_LOADCTL, "C§5.18", "cleanup: the deleted path is not the run's") \
    X(DEAD_LETTER_NOT_FOUND, LL_CW_LOADCTL, "L", "no dead letter at this topic/partition/offset") \
    X(VALUE_OMITTED, LL_CW_LOADCTL, "L", "redrive refused: the dead letter's value was dropped to fit (ll.payload.omitted)") \
    X(VALUE_INVALID, LL_CW_LOADCTL, "L", "redrive refused: the value is not a record of an input's schema") \
    X(ALREADY_REDRIVEN, LL_CW_LOADCTL, "L", "redrive refused: the dead letter was redriven before") \
    X(REDRIVE_CHECK_INCOMPLETE, LL_CW_LOADCTL, "L", "redrive refused: it could not check whether it was redriven before") \
    X(TOPICS_FILE_INVALID, LL_CW_LOADCTL, "L", "topics create: a line of the topics file is wrong (nothing created)") \
    X(TOPIC_CREATE_FAILED, LL_CW_LOADCTL, "L", "topics create: the broker refused to create a topic (exit 4)") \
    X(MIGRATION_CHANGED, LL_CW_LOADCTL, "L", "migrate refused: an applied migration file was changed since (exit 2)") \
    X(run_status, LL_CW_LOADCTL, "L", "verify: every run's status is the one its events imply") \
    X(validate_dispatch, LL_CW_LOADCTL, "L", "verify: one VALIDATE_RUN dispatch per run past extraction, none before") \
    X(stage_validating, LL_CW_LOADCTL, "L", "verify: at most one validation start per run") \
    X(partition_rows, LL_CW_LOADCTL, "L", "verify: every SUCCESS partition's WRITTEN files sum to its rows") \
    X(partition_counters, LL_CW_LOADCTL, "L", "verify: every partition's counters equal its WRITTEN files") \
    X(one_reply, LL_CW_LOADCTL, "K§4", "verify --topics: every committed input offset has one reply or one dead letter (and agreeing REPLAYs)") \
    X(offset_ahead, LL_CW_LOADCTL, "K§3", "verify --topics: no committed offset ahead of its database effect") \
    X(chunk_lost, LL_CW_LOADCTL, "K§3", "verify --topics: no chunk lost (a file row, a reply or a dead letter)")
/* clang-format on */

#endif
