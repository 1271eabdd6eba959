/*
 * purge.c - `loadctl purge [--older-than D] [--batch N] [--max-runs N] [--dry-run]` (issue 42 item 3;
 * docs/ledger.md "Retention", docs/operations.md "Retention purge"): the ledger's retention. Runs
 * that ended longer ago than the period (default P400D, at least P30D) leave the ledger with every
 * row keyed by them. Not to be confused with the cleanup retention (retention.h, LC_PAST_RETENTION:
 * when a run's HDFS files and staging table may go, docs/contract.md §5.17): that one removes
 * nothing from the ledger; this one removes the ledger's rows of runs long cleaned.
 *
 * Connect as ll_retention (schemas/sql/0018_retention.sql), the role allowed exactly this. The
 * cutoff (database clock - period) is fixed once at the start. Then, one transaction per batch
 * (sizes: ll_purge_next_batch), each bounded by a lock timeout (LOCK_TIMEOUT) and a statement
 * timeout (STATEMENT_TIMEOUT):
 *
 *   nifi_ops_retention.lock_runs(cutoff, n)  the oldest ended candidates FOR UPDATE SKIP LOCKED:
 *                                            terminal, completed_at < cutoff (re-checked on the
 *                                            locked row), not named by another run's retry_of_run_id;
 *                                            a run a service holds is skipped, not waited for
 *   DELETE ... WHERE run_id = ANY(locked)    children before parents (PURGE_TABLES), each through an
 *                                            index on run_id
 *   INSERT load_event RUNS_PURGED            the audit row: who (as end-run records it), the period,
 *                                            the cutoff, the run ids and the rows per table
 *
 * A failed batch rolls back alone; the batches before it stay purged (exit 3 says so). --dry-run
 * counts the candidates (nifi_ops_retention.count_runs, no lock) and deletes nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"
#include "loadctl.h"

static const char USAGE[] =
    "usage: loadctl purge [--older-than D] [--batch N] [--max-runs N] [--dry-run] [--json]\n\n"
    "Removes from the ledger the runs that ended (SUCCESS, a failure or TIMED_OUT) longer ago than\n"
    "--older-than (default P400D, at least P30D), with every row keyed by them (partitions, files,\n"
    "claim and publish tokens, validations, validation start, dispatches, events), oldest first,\n"
    "--batch runs per transaction (default 100, at most 1000), at most --max-runs runs (default\n"
    "10000). Active runs (PUBLISH_UNKNOWN too) are never touched; a run another transaction holds\n"
    "is skipped. Each batch writes the event RUNS_PURGED (run_id null) with your OS user and host.\n"
    "--dry-run only counts. Connect as the ll_retention role. This is not the cleanup retention\n"
    "(cleanup-candidates: HDFS files and staging tables, which stay in the ledger).\n"
    "Durations are ISO-8601 (P400D) or seconds.\n"
    "Exit 0 done (also nothing to purge), 1 usage, 3 database (the batches before the failure stay\n"
    "purged).\n";

/* Each batch's bounds: a lock held by another session is waited for at most LOCK_TIMEOUT (a
 * dispatch the dispatcher is leasing); a statement runs at most STATEMENT_TIMEOUT. */
#define LOCK_TIMEOUT      "2s"
#define STATEMENT_TIMEOUT "60s"

/* The history tables keyed by a run, children before parents (foreign keys of 0001, 0003, 0006). */
#define PURGE_TABLES(X)                                                                                      \
    X(load_claim_token)                                                                                      \
    X(load_file)                                                                                             \
    X(load_partition)                                                                                        \
    X(load_validation)                                                                                       \
    X(load_validation_start)                                                                                 \
    X(load_dispatch)                                                                                         \
    X(load_publish_token)                                                                                    \
    X(load_event)                                                                                            \
    X(load_run)
#define PT_COUNT(t) +1
enum { N_TABLES = 0 PURGE_TABLES(PT_COUNT) };

#define PT_NAME(t) #t,
static const char *const TABLE_NAMES[N_TABLES] = {PURGE_TABLES(PT_NAME)};
#define PT_STMT(t) {"purge_delete_" #t, "DELETE FROM nifi_ops." #t " WHERE run_id = ANY($1::uuid[])", 1},
static const ll_stmt ST_DELETE[N_TABLES] = {PURGE_TABLES(PT_STMT)};

/* $1 the period (ms): the cutoff as the database's timestamptz text and as ISO UTC. */
static const ll_stmt ST_CUTOFF = {
    "purge_cutoff",
    "SELECT c::text, " LC_ISO("c") " FROM (SELECT clock_timestamp() - $1::bigint"
                                   " * interval '1 millisecond' AS c) x",
    1};
static const ll_stmt ST_TIMEOUTS = {"purge_timeouts",
                                    "SELECT set_config('lock_timeout', '" LOCK_TIMEOUT "', true),"
                                    " set_config('statement_timeout', '" STATEMENT_TIMEOUT "', true)",
                                    0};
/* $1 cutoff, $2 at most this many: the locked candidates. */
static const ll_stmt ST_LOCK = {
    "purge_lock",
    "SELECT run_id::text, cleaned FROM nifi_ops_retention.lock_runs($1::timestamptz,"
    " $2::int)",
    2};
/* $1 cutoff, $2 at most this many: what a purge would take. */
static const ll_stmt ST_COUNT = {
    "purge_count",
    "SELECT runs, " LC_ISO("oldest") ", " LC_ISO(
        "newest") ", uncleaned"
                  " FROM nifi_ops_retention.count_runs($1::timestamptz, $2::int)",
    2};
/* The audit row of a batch: $1 rows removed, $2 message, $3 details. */
static const ll_stmt ST_AUDIT = {"purge_audit",
                                 "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name,"
                                 " process_group, processor_name, row_count, message, details)"
                                 " VALUES (gen_random_uuid(), 'INFO', 'RUNS_PURGED', 'LOAD_CONTROL_API',"
                                 " 'runs_purged', $1::bigint, $2, $3::jsonb)",
                                 3};

/* One batch's input and what it removed. */
typedef struct purge_tx {
    const char *cutoff, *cutoff_iso, *older_than; /* borrowed */
    int64_t older_than_ms;
    long ask, batch_no;
    long got, uncleaned;
    long long rows[N_TABLES];
    json_t *run_ids; /* the batch's run ids (owned; reset on every try) */
} purge_tx;

/* Locks the batch's runs into t->run_ids; the array literal for ANY($1) into a new string. */
static ll_db_rc lock_runs(ll_db *db, purge_tx *t, char **array_out)
{
    char ask[24];
    snprintf(ask, sizeof ask, "%ld", t->ask);
    const char *p[2] = {t->cutoff, ask};
    PGresult *r = ll_db_exec(db, &ST_LOCK, p);
    if (!r)
        return LL_DB_ERROR;
    int n = PQntuples(r);
    char *arr = malloc((size_t)n * 37 + 3);
    if (!arr) {
        PQclear(r);
        return LL_DB_ERROR;
    }
    size_t at = 0;
    arr[at++] = '{';
    for (int i = 0; i < n; i++) {
        const char *id = PQgetvalue(r, i, 0);
        json_array_append_new(t->run_ids, json_string(id));
        if (!ll_db_bool(r, i, 1))
            t->uncleaned++;
        if (i)
            arr[at++] = ',';
        memcpy(arr + at, id, 36);
        at += 36;
    }
    arr[at++] = '}';
    arr[at] = '\0';
    t->got = n;
    PQclear(r);
    *array_out = arr;
    return LL_DB_OK;
}

/* The audit row of the batch (the details end-run records, plus the purge's own). */
static ll_db_rc audit(ll_db *db, const purge_tx *t)
{
    json_t *d = lc_audit_details();
    json_object_set_new(d, "operatorRole", json_string("retention"));
    json_t *rows = json_object();
    long long total = 0;
    for (int i = 0; i < N_TABLES; i++) {
        json_object_set_new(rows, TABLE_NAMES[i], json_integer(t->rows[i]));
        total += t->rows[i];
    }
    json_object_set_new(d, "olderThan", lc_json_str(t->older_than));
    json_object_set_new(d, "olderThanMs", json_integer(t->older_than_ms));
    json_object_set_new(d, "cutoff", json_string(t->cutoff_iso));
    json_object_set_new(d, "batch", json_integer(t->batch_no));
    json_object_set_new(d, "runs", json_integer(t->got));
    json_object_set_new(d, "uncleaned", json_integer(t->uncleaned));
    json_object_set_new(d, "rows", rows);
    json_object_set(d, "runIds", t->run_ids);
    char total_s[24], msg[160];
    snprintf(total_s, sizeof total_s, "%lld", total);
    snprintf(msg, sizeof msg, "retention purge: %ld runs ended before %s, %lld rows", t->got, t->cutoff_iso,
             total);
    char *details = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    if (!details)
        return LL_DB_ERROR;
    const char *p[3] = {total_s, msg, details};
    PGresult *r = ll_db_exec(db, &ST_AUDIT, p);
    free(details);
    if (!r)
        return LL_DB_ERROR;
    PQclear(r);
    return LL_DB_OK;
}

static ll_db_rc purge_body(ll_db *db, void *arg)
{
    purge_tx *t = arg;
    t->got = t->uncleaned = 0;
    memset(t->rows, 0, sizeof t->rows);
    json_array_clear(t->run_ids);
    ll_db_rc rc = ll_db_exec_discard(db, &ST_TIMEOUTS, NULL);
    if (rc != LL_DB_OK)
        return rc;
    char *arr = NULL;
    if ((rc = lock_runs(db, t, &arr)) != LL_DB_OK)
        return rc;
    if (t->got == 0) {
        free(arr);
        return LL_DB_ROLLBACK;
    }
    const char *p[1] = {arr};
    for (int i = 0; i < N_TABLES && rc == LL_DB_OK; i++) {
        PGresult *r = ll_db_exec(db, &ST_DELETE[i], p);
        if (!r) {
            rc = LL_DB_ERROR;
            break;
        }
        t->rows[i] = ll_db_affected(r);
        PQclear(r);
    }
    free(arr);
    if (rc == LL_DB_OK)
        rc = audit(db, t);
    return rc;
}

/* The options as parsed: LC_CONTINUE, or LC_USAGE / LC_REFUSED after reporting. */
static int parse(const lc_opts *o, const char *older_text, const char *batch_text, const char *max_text,
                 int64_t *older_ms, long *batch, long *max_runs)
{
    if (lc_parse_duration(older_text, older_ms) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--older-than: '%s' is not a duration (P400D or seconds)",
                       older_text);
    if (lc_parse_int(batch_text, 1, LL_PURGE_MAX_BATCH, batch) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--batch must be an integer in 1..%ld",
                       LL_PURGE_MAX_BATCH);
    if (lc_parse_int(max_text, 1, LL_PURGE_MAX_MAX_RUNS, max_runs) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--max-runs must be an integer in 1..%ld",
                       LL_PURGE_MAX_MAX_RUNS);
    if (ll_purge_check(*older_ms, *batch, *max_runs) == LL_PURGE_PERIOD_TOO_SHORT)
        return lc_fail(o, LC_REFUSED, "PURGE_PERIOD_TOO_SHORT",
                       json_pack("{s:s,s:I}", "olderThan", older_text, "minimumMs",
                                 (json_int_t)LL_PURGE_MIN_OLDER_THAN_MS),
                       "--older-than %s is shorter than P30D (the purge keeps at least every run a "
                       "cleanup retention may still need)",
                       older_text);
    return LC_CONTINUE;
}

/* --dry-run: what a purge would take, nothing deleted. */
static int dry_run(const lc_opts *o, ll_db *db, const char *cutoff, const char *cutoff_iso, const char *older,
                   long max_runs)
{
    char lim[24];
    snprintf(lim, sizeof lim, "%ld", max_runs);
    const char *p[2] = {cutoff, lim};
    PGresult *r = lc_query(o, db, &ST_COUNT, p);
    if (!r)
        return LC_DB;
    if (o->json) {
        lc_print_json(json_pack("{s:b,s:b,s:s,s:s,s:o,s:o,s:o,s:o}", "ok", 1, "dryRun", 1, "olderThan", older,
                                "cutoff", cutoff_iso, "runs", lc_cell_json(r, 0, 0, true), "oldest",
                                lc_cell_json(r, 0, 1, false), "newest", lc_cell_json(r, 0, 2, false),
                                "uncleaned", lc_cell_json(r, 0, 3, true)));
    } else {
        printf("dry run: %s runs ended before %s (older than %s) would be purged (at most --max-runs %ld)",
               lc_cell(r, 0, 0), cutoff_iso, older, max_runs);
        if (!PQgetisnull(r, 0, 1))
            printf(", ended %s .. %s, %s never cleaned", lc_cell(r, 0, 1), lc_cell(r, 0, 2),
                   lc_cell(r, 0, 3));
        printf("; nothing deleted\n");
    }
    PQclear(r);
    return LC_OK;
}

/* The purge's totals over the batches committed. */
typedef struct purge_sum {
    long runs, batches, uncleaned;
    long long rows[N_TABLES];
} purge_sum;

static void report(const lc_opts *o, const purge_sum *s, const char *cutoff_iso, const char *older)
{
    if (!o->json) {
        printf("purged %ld runs ended before %s (older than %s) in %ld transactions (%ld never cleaned):",
               s->runs, cutoff_iso, older, s->batches, s->uncleaned);
        for (int i = 0; i < N_TABLES; i++)
            printf(" %s %lld%s", TABLE_NAMES[i], s->rows[i], i + 1 < N_TABLES ? "," : "\n");
        return;
    }
    json_t *rows = json_object();
    for (int i = 0; i < N_TABLES; i++)
        json_object_set_new(rows, TABLE_NAMES[i], json_integer(s->rows[i]));
    lc_print_json(json_pack("{s:b,s:b,s:s,s:s,s:I,s:I,s:I,s:o}", "ok", 1, "dryRun", 0, "olderThan", older,
                            "cutoff", cutoff_iso, "runs", (json_int_t)s->runs, "batches",
                            (json_int_t)s->batches, "uncleaned", (json_int_t)s->uncleaned, "rows", rows));
}

/* The batches, until ll_purge_next_batch says stop: LC_OK, or LC_DB after reporting. */
static int purge_loop(const lc_opts *o, ll_db *db, purge_tx *t, long batch, long max_runs, purge_sum *s)
{
    long asked = 0;
    t->got = 0;
    while ((t->ask = ll_purge_next_batch(batch, max_runs, s->runs, t->got, asked)) > 0) {
        t->batch_no = s->batches + 1;
        asked = t->ask;
        ll_db_rc dr = ll_db_transaction(db, purge_body, t);
        if (dr == LL_DB_ROLLBACK) /* no candidate left */
            break;
        if (dr != LL_DB_OK) {
            char what[128];
            snprintf(what, sizeof what, "purge batch %ld (after %ld runs purged in %ld batches)", t->batch_no,
                     s->runs, s->batches);
            return lc_fail_db(o, db, what);
        }
        s->batches++;
        s->runs += t->got;
        s->uncleaned += t->uncleaned;
        for (int i = 0; i < N_TABLES; i++)
            s->rows[i] += t->rows[i];
    }
    return LC_OK;
}

int lc_purge(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *older = "P400D", *batch_text = "100", *max_text = "10000";
    bool dry = false;
    int npos;
    lc_optspec specs[] = {{"older-than", &older, NULL},
                          {"batch", &batch_text, NULL},
                          {"max-runs", &max_text, NULL},
                          {"dry-run", NULL, &dry},
                          {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, NULL, 0, 0, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    int64_t older_ms = 0;
    long batch = 0, max_runs = 0;
    if ((rc = parse(o, older, batch_text, max_text, &older_ms, &batch, &max_runs)) != LC_CONTINUE)
        return rc;
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    char ms[24];
    snprintf(ms, sizeof ms, "%" PRId64, older_ms);
    const char *p[1] = {ms};
    PGresult *c = lc_query(o, &db, &ST_CUTOFF, p);
    if (!c) {
        ll_db_close(&db);
        return LC_DB;
    }
    if (dry) {
        rc = dry_run(o, &db, PQgetvalue(c, 0, 0), PQgetvalue(c, 0, 1), older, max_runs);
    } else {
        purge_tx t = {.cutoff = PQgetvalue(c, 0, 0),
                      .cutoff_iso = PQgetvalue(c, 0, 1),
                      .older_than = older,
                      .older_than_ms = older_ms,
                      .run_ids = json_array()};
        purge_sum s = {0};
        rc = purge_loop(o, &db, &t, batch, max_runs, &s);
        if (rc == LC_OK)
            report(o, &s, t.cutoff_iso, older);
        json_decref(t.run_ids);
    }
    PQclear(c);
    ll_db_close(&db);
    return rc;
}
