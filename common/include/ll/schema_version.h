/*
 * schema_version.h - the ledger schema versions this build works with (docs/operations.md,
 * "Schema versions"; schemas/sql/README.md has the rules a migration follows).
 *
 * A version is the number of a migration file (schemas/sql/NNNN_*.sql); the ledger's version is
 * the highest number recorded in nifi_ops.schema_migrations. Every service reads it at start and
 * applies nothing before it is one it knows:
 *
 *   version < LL_SCHEMA_MIN                         TOO_OLD: run `loadctl migrate` first
 *   LL_SCHEMA_MIN <= version <= LL_SCHEMA_MAX_KNOWN OK
 *   LL_SCHEMA_MAX_KNOWN < version <= LL_SCHEMA_MAX_COMPAT  NEWER_COMPATIBLE: runs, with a notice
 *   version > LL_SCHEMA_MAX_COMPAT                  TOO_NEW: this binary is too old for the ledger
 *
 * Expand/contract: migrations numbered up to LL_SCHEMA_MAX_COMPAT only add (tables, columns with
 * a default or nullable, indexes, grants), so a binary of this build still runs on them during a
 * rolling upgrade; a migration that removes or changes what a released binary uses takes a number
 * above the LL_SCHEMA_MAX_COMPAT of every release that may still run, and the release that needs
 * it raises LL_SCHEMA_MIN.
 */
#ifndef LL_SCHEMA_VERSION_H
#define LL_SCHEMA_VERSION_H

/* The newest migration the services of this build need: 0011 adds the position write token (the
 * compare-and-set of every position write, position.c), 0012 the sweeper's re-read gate,
 * 0013 the recorded refusals a replay restates (batch.c), 0014 the accepted offset gaps, 0015 the
 * instance lease (instance.c: one process per service.instance_id), 0016 the index of the runs
 * ended (the sweeper's read of them, runs_ended.c, is bounded only with it), 0017 the indexes of
 * the reads of history (issue 42: the sweeper's gauges, the claimer's reissue ACK and loadctl's
 * reads are bounded only with them). */
#define LL_SCHEMA_MIN 17
/* The newest migration this build ships (schemas/sql): 0019 indexes the run-status events (loadctl verify),
 * 0020 makes the heartbeats HOT updates (its load_run.ended_at is read by loadctl only; the services'
 * statements are bounded with or without it, so LL_SCHEMA_MIN stays 17), 0021 vacuums the churning
 * tables after a fixed number of dead rows (storage parameters only). */
#define LL_SCHEMA_MAX_KNOWN 21
/* The newest version this build accepts: 0011..0029 are reserved for additive migrations (0019, the
 * last of the first reservation, extended it by ten; a contract migration takes 0030 or above). */
#define LL_SCHEMA_MAX_COMPAT 29

/* What a service makes of the ledger's schema version. */
typedef enum ll_schema_verdict {
    LL_SCHEMA_OK = 0,           /* a version this build knows */
    LL_SCHEMA_TOO_OLD,          /* older than LL_SCHEMA_MIN (or no history at all): not ready */
    LL_SCHEMA_NEWER_COMPATIBLE, /* newer than this build, within LL_SCHEMA_MAX_COMPAT: runs */
    LL_SCHEMA_TOO_NEW           /* beyond LL_SCHEMA_MAX_COMPAT: not ready */
} ll_schema_verdict;

/* The verdict on a ledger whose highest applied migration is `applied_max` (0 or less: none
 * recorded), against [min, max_known] and max_compat (min <= max_known <= max_compat; the
 * services pass the LL_SCHEMA_* constants). Pure (common/src/rules/schema_version.c). */
ll_schema_verdict ll_schema_judge(int applied_max, int min, int max_known, int max_compat);

/* The verdict's name: "ok", "too_old", "newer_compatible", "too_new" (static). Pure. */
const char *ll_schema_verdict_name(ll_schema_verdict v);

/* Whether a service may apply anything under verdict v (OK or NEWER_COMPATIBLE). Pure. */
int ll_schema_may_run(ll_schema_verdict v);

#endif
