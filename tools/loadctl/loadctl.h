/*
 * loadctl.h - the operator's tool: one function per command, each returning the process exit
 * code, plus the few helpers every command shares (arguments, output, database, audit).
 *
 * Exit codes a script can rely on, one meaning each across every command (LC_* below; the table
 * in docs/operations.md "loadctl exit codes"). Every message on stderr starts with "loadctl:"
 * and names the code; with --json every command prints exactly one JSON object on stdout, also
 * when it fails (see out.c).
 */
#ifndef LOADCTL_H
#define LOADCTL_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/db.h"
#include "ll/status_sql.h"

/*
 * The exit codes, the same for every command (docs/operations.md "loadctl exit codes"):
 *   LC_OK       0  done (also "nothing to change"; verify: every invariant holds)
 *   LC_USAGE    1  the command line is wrong, or a file it names (--config, --from, --out,
 *                  --value-file, --file, --dir) cannot be read, written or parsed
 *   LC_REFUSED  2  not found, or refused by a business rule (the contract's 404/409/422 codes)
 *   LC_DB       3  the database is unavailable or failed a statement
 *   LC_KAFKA    4  the Kafka broker is unavailable or refused a request
 *   LC_VIOLATED 5  a check ran and found a problem (verify: an invariant violated, or a check a
 *                  bound stopped before the end)
 */
enum { LC_OK = 0, LC_USAGE = 1, LC_REFUSED = 2, LC_DB = 3, LC_KAFKA = 4, LC_VIOLATED = 5 };

/* lc_args() result meaning "parsed, go on" (every exit code is >= 0). */
#define LC_CONTINUE (-1)

/* Options every command shares. */
typedef struct lc_opts {
    const char *conninfo; /* --db, else $LOADLEDGER_DB__CONNINFO, else $LL_PG_CONNINFO */
    bool json;            /* --json: one JSON object on stdout */
} lc_opts;

/* A timestamp column as ISO-8601 UTC text with milliseconds, in SQL (NULL stays NULL). */
#define LC_ISO(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* The seven failure/timeout statuses (docs/contract.md §3.1 "terminal failure", cleanup "failed" class),
 * generated from LL_RUN_STATUSES (ll/status_sql.h). */
#define LC_FAILED_STATUSES LL_SQL_RUN_FAILED
/* The eight active statuses in pipeline order (docs/contract.md §3.1, uq_load_run_active), generated from
 * LL_RUN_STATUSES (ll/status_sql.h). */
#define LC_ACTIVE_STATUSES LL_SQL_RUN_ACTIVE

/* ---- commands (one file each) ------------------------------------------------------------- */

/* `loadctl migrate [status] [--dir DIR]`: applies the SQL migrations not yet applied, refusing when an
 * applied file changed; `status` lists each one; --json one object (migrate.c, exit codes in
 * migrate.h and the LC_* table below). */
int lc_migrate(const lc_opts *o, int argc, char **argv);
/* `loadctl runs|status [--job K] [--business-key B] [--status S] [--limit N]` (runs.c). */
int lc_runs(const lc_opts *o, int argc, char **argv);
/* `loadctl show RUN`: the run, its partitions, validations, dispatches and events (show.c). */
int lc_show(const lc_opts *o, int argc, char **argv);
/* `loadctl resolve-publish-unknown RUN --as PUBLISHED|FAILED_PUBLISH --reason TEXT` (resolve.c). */
int lc_resolve(const lc_opts *o, int argc, char **argv);
/* `loadctl accept-gap GROUP TOPIC PARTITION --from N --to N --reason TEXT` (gap.c): records that a
 * range of input offsets the broker deleted before the group read them is lost for good. */
int lc_accept_gap(const lc_opts *o, int argc, char **argv);
/* `loadctl end-run RUN --reason TEXT [--status EXPECTED]` (endrun.c): ends a stuck run with the
 * contract's run failure for its status (docs/contract.md §5.6), audited (event RUN_FAILED with who
 * and why), and prints what NiFi's later inputs for the run are answered. Exit LC_OK ended or
 * already so, LC_REFUSED where §5.6 refuses (RUN_NOT_FOUND, RUN_STATUS_MISMATCH,
 * FAIL_TRANSITION_NOT_ALLOWED) or INVALID_REASON, LC_USAGE, LC_DB. */
int lc_end_run(const lc_opts *o, int argc, char **argv);
/* `loadctl resend RUN DISPATCH`: DEAD/SENT dispatch back to PENDING (resend.c). */
int lc_resend(const lc_opts *o, int argc, char **argv);
/* `loadctl cleanup-candidates [--job KEY] [--limit N]`: runs due for cleanup (cleanup.c). */
int lc_cleanup_candidates(const lc_opts *o, int argc, char **argv);
/* `loadctl cleanup RUN [--dropped-table T] [--deleted-path P]`: records a cleanup (cleanup.c). */
int lc_cleanup(const lc_opts *o, int argc, char **argv);
/* `loadctl purge [--older-than D] [--batch N] [--max-runs N] [--dry-run]` (purge.c): the ledger's
 * retention (docs/ledger.md "Retention"): runs ended before now - D leave the ledger with every row
 * keyed by them, N per transaction, audited (event RUNS_PURGED), as the ll_retention role. Exit
 * LC_OK done, LC_USAGE, LC_REFUSED PURGE_PERIOD_TOO_SHORT (D < P30D), LC_DB. */
int lc_purge(const lc_opts *o, int argc, char **argv);
/* `loadctl verify [--topics]`: the ledger's and topics' invariants with their violations
 * (verify.c; exit LC_OK all hold, LC_VIOLATED a violation or an incomplete check). */
int lc_verify(const lc_opts *o, int argc, char **argv);
/* `loadctl dead-letters [list|show COORD]`: the dead letters, one decoded (deadletters.c). */
int lc_dead_letters(const lc_opts *o, int argc, char **argv);
/* `loadctl redrive COORD... [--value-file F] [--force]`: dead letters back to their source
 * topic, transactionally, with the ll.redrive.of link (redrive.c). */
int lc_redrive(const lc_opts *o, int argc, char **argv);
/* `loadctl offsets save --out F | restore --from F [--config F]`: the input consumer groups'
 * committed offsets (with their metadata) recorded before a base backup and committed again after
 * the restore (offsets.c; docs/operations.md "Restore from a backup"). */
int lc_offsets(const lc_opts *o, int argc, char **argv);
/* `loadctl topics create --file TOPICS_CONF [--config F] [--replication-factor N] [--timeout D]`:
 * every topic of the file in one CreateTopics request, existing ones kept (topics.c). */
int lc_topics(const lc_opts *o, int argc, char **argv);
/* `loadctl monitor [--once]`: the terminal dashboard (monitor.c). */
int lc_monitor(const lc_opts *o, int argc, char **argv);

/* ---- arguments (args.c) ------------------------------------------------------------------- */

/* One option of a command: `--name VALUE` (value != NULL) or a flag `--name` (flag != NULL). */
typedef struct lc_optspec {
    const char *name;   /* without the leading dashes */
    const char **value; /* receives the argument (borrowed from argv) */
    bool *flag;         /* set to true when present */
} lc_optspec;

/*
 * Parses argv[1..argc) of a command: the options in specs (terminated by {NULL}), the common
 * --db CONNINFO, --json and --help/-h (accepted anywhere after the command; updates *o), and up
 * to max_pos positional arguments into pos[] (count into *npos). `--name=value` is accepted too.
 * Returns LC_CONTINUE to go on, LC_OK after printing usage on stdout for --help, or LC_USAGE
 * after printing what is wrong and the usage on stderr (fewer than min_pos or more than max_pos
 * positionals, an unknown option, a missing option value).
 */
int lc_args(lc_opts *o, const char *usage, int argc, char **argv, const lc_optspec *specs, const char **pos,
            int min_pos, int max_pos, int *npos);

/* Parses a decimal integer in [lo, hi] (the whole string). Returns 0, or -1. */
int lc_parse_int(const char *s, long lo, long hi, long *out);
/*
 * Parses a duration (ISO-8601 PnDTnHnMnS or seconds, docs/contract.md §9) into milliseconds, refusing
 * anything longer than 100 years or with digits runs a double could not carry exactly.
 * Returns 0, or -1.
 */
int lc_parse_duration(const char *s, int64_t *out_ms);

/* ---- output (out.c) ----------------------------------------------------------------------- */

/*
 * Reports a failure and returns `code`: "loadctl: <kind>: <ERR_CODE> (<message>)" on stderr
 * (kind = usage, not found, refused, database error, Kafka error or violated, after the exit
 * code), and with --json the object {"ok": false, "exitCode", "code", "message", "details"} on
 * stdout. details (may be NULL) is consumed.
 */
int lc_fail(const lc_opts *o, int code, const char *err_code, json_t *details, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Reports a database failure (db->err) of `what` as lc_fail(LC_DB, DATABASE_UNAVAILABLE or
 * DATABASE_ERROR) and returns LC_DB. */
int lc_fail_db(const lc_opts *o, const ll_db *db, const char *what);
/* A JSON string of s; bytes of an invalid UTF-8 string become '?' (never NULL). */
json_t *lc_json_str(const char *s);
/* Prints a JSON value on stdout (indented, one trailing newline) and releases it. */
void lc_print_json(json_t *j);
/* A cell as JSON: null for SQL NULL, an integer when numeric, else a string. */
json_t *lc_cell_json(const PGresult *r, int row, int col, bool numeric);
/*
 * The rows of r as an array of JSON objects whose keys are `names` (NULL-terminated, one per
 * column in order; a leading '#' marks an integer column and is not part of the key).
 */
json_t *lc_rows_json(const PGresult *r, const char *const *names);
/* The text of a cell, or "-" for SQL NULL (for tables). */
const char *lc_cell(const PGresult *r, int row, int col);

/* ---- database (main.c) -------------------------------------------------------------------- */

/* The conninfo to use: --db, else $LOADLEDGER_DB__CONNINFO, else $LL_PG_CONNINFO, else NULL. */
const char *lc_conninfo(const lc_opts *o);
/* Connects (plain libpq, for migrate) or prints why not; NULL on failure. */
PGconn *lc_connect(const lc_opts *o);
/*
 * Opens db on the conninfo (application_name loadctl, 3 transaction tries). Returns LC_OK, or
 * LC_DB after reporting the failure with lc_fail.
 */
int lc_db_open(const lc_opts *o, ll_db *db);
/* Runs one statement of a read-only command; NULL after reporting the failure (then LC_DB). */
PGresult *lc_query(const lc_opts *o, ll_db *db, const ll_stmt *st, const char *const *params);

/* ---- audit (audit.c) ---------------------------------------------------------------------- */

/*
 * The details every operator event carries (docs/contract.md K§7 "record who and why"):
 * {"operatorRole": "operator", "operatorUser": <the person>, "host": <host name>}. The person is
 * $SUDO_USER when set (who ran sudo), else the name of the effective uid, else $USER, else
 * "uid:<n>". Returns a new object the caller extends and owns.
 */
json_t *lc_audit_details(void);

/* An operator's --reason (docs/contract.md §5.15: 5..2000 characters of UTF-8): LC_CONTINUE; a
 * missing one LC_USAGE ("--reason is required: record <what>"), one out of bounds LC_REFUSED
 * (INVALID_REASON, details chars/min/max), each reported. */
int lc_check_reason(const lc_opts *o, const char *reason, const char *what);

#endif
