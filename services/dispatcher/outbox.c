/*
 * outbox.c - the SQL of the outbox (docs/contract.md §6): the lease, the command's inputs, and the
 * settlement of each delivery. A lease is one statement (its own transaction) for up to
 * dispatch.batch rows; nothing is held open while the commands travel. The delivered rows of a
 * lease are marked SENT by one statement; a retry or a DEAD row (rare) by one statement each.
 * Every update after delivery is conditional on PENDING, so an ACK that came first (validation
 * started) stays ACKED, and on the lease it settles (the row's attempt_count still the one this
 * lease set, issue 39 item 6): a dispatcher whose lease ran out while it delivered, and another
 * leased the row since, settles nothing; the row is the newer lessee's to mark (a stale lessee
 * must not mark DEAD, or back off, a command the other one delivered).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatcher.h"
#include "ll/pgarray.h"
#include "ll/ledger.h"
#include "ll/log.h"
#include "ll/rules.h"

/* Leases up to $1 due rows for $2 ms: one statement, so the rows of a lease share one
 * next_attempt_at (the statement's start + the lease). */
static const ll_stmt ST_LEASE = {
    "outbox_lease",
    "WITH due AS (SELECT dispatch_id FROM nifi_ops.load_dispatch"
    "   WHERE status = 'PENDING' AND next_attempt_at <= clock_timestamp()"
    "   ORDER BY next_attempt_at LIMIT $1::int FOR UPDATE SKIP LOCKED)"
    " UPDATE nifi_ops.load_dispatch d SET attempt_count = d.attempt_count + 1,"
    "   next_attempt_at = statement_timestamp() + make_interval(secs => $2::double precision / 1000)"
    " FROM due WHERE d.dispatch_id = due.dispatch_id"
    " RETURNING d.dispatch_id::text, d.run_id::text, d.dispatch_type, d.partition_id,"
    "   d.attempt_count, to_char(d.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    "   (SELECT job_key FROM nifi_ops.load_run r WHERE r.run_id = d.run_id),"
    "   (SELECT business_key FROM nifi_ops.load_run r WHERE r.run_id = d.run_id)",
    2};

static const ll_stmt ST_REISSUE_INPUT = {
    "outbox_reissue_input",
    "SELECT r.snapshot_scn::text, r.hdfs_run_path, p.lower_bound::text, p.upper_bound::text,"
    " p.upper_inclusive, p.is_null_partition, p.expected_row_count"
    " FROM nifi_ops.load_run r JOIN nifi_ops.load_partition p ON p.run_id = r.run_id"
    " WHERE r.run_id = $1::uuid AND p.partition_id = $2",
    2};

/* Marks the delivered rows of a lease: $1 their dispatch ids, $2 their recorded HTTP statuses
 * (0 = none), $3 the attempt_count each lease set, array literals (ll/pgarray.h) in the same
 * order. One statement, so the rows share one sent_at (the statement's start). */
static const ll_stmt ST_SENT = {
    "outbox_sent",
    "UPDATE nifi_ops.load_dispatch d SET status = 'SENT', sent_at = statement_timestamp(),"
    " last_http_status = nullif(s.http, 0), last_error = NULL"
    " FROM unnest($1::uuid[], $2::int[], $3::int[]) AS s(id, http, attempt)"
    " WHERE d.dispatch_id = s.id AND d.status = 'PENDING' AND d.attempt_count = s.attempt",
    3};

static const ll_stmt ST_RETRY = {
    "outbox_retry",
    "UPDATE nifi_ops.load_dispatch SET"
    " next_attempt_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000),"
    " last_http_status = nullif($4::int, 0), last_error = left($3, 2000)"
    " WHERE dispatch_id = $1::uuid AND status = 'PENDING' AND attempt_count = $5::int",
    5};

static const ll_stmt ST_DEAD = {
    "outbox_dead",
    "UPDATE nifi_ops.load_dispatch SET status = 'DEAD', last_http_status = nullif($3::int, 0),"
    " last_error = left($2, 2000) WHERE dispatch_id = $1::uuid AND status = 'PENDING' AND attempt_count = "
    "$4::int"
    " RETURNING run_id::text, partition_id, dispatch_type, attempt_count",
    4};

struct lease_arg {
    const dispatch_settings *s;
    leased *rows;
    size_t n;
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Runs one statement in its own (implicit) transaction, again on deadlock or serialization
 * failure like ll_db_transaction. The result, or NULL with db->err. */
static PGresult *exec_alone(ll_db *db, const ll_stmt *st, const char *const *params)
{
    for (int attempt = 0; attempt < db->tx_attempts; attempt++) {
        if (ll_db_ensure(db) != LL_DB_OK)
            return NULL;
        PGresult *r = ll_db_exec(db, st, params);
        if (r || !ll_db_err_is_retryable(db))
            return r;
        struct timespec ts = {0, (50L << attempt) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static ll_db_rc lease_rows(ll_db *db, void *arg)
{
    struct lease_arg *a = arg;
    char batch[24], lease[24];
    snprintf(batch, sizeof batch, "%lld", (long long)a->s->batch);
    snprintf(lease, sizeof lease, "%lld", (long long)a->s->lease_ms);
    const char *p[2] = {batch, lease};
    PGresult *r = exec_alone(db, &ST_LEASE, p);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    outbox_free(a->rows, a->n);
    a->n = (size_t)PQntuples(r);
    a->rows = calloc(a->n ? a->n : 1, sizeof *a->rows);
    for (size_t i = 0; i < a->n; i++) {
        leased *l = &a->rows[i];
        int row = (int)i;
        snprintf(l->dispatch_id, sizeof l->dispatch_id, "%s", PQgetvalue(r, row, 0));
        snprintf(l->run_id, sizeof l->run_id, "%s", PQgetvalue(r, row, 1));
        snprintf(l->type, sizeof l->type, "%s", PQgetvalue(r, row, 2));
        l->partition_id = dup_or_null(ll_db_text(r, row, 3));
        l->attempt = (int)ll_db_ll(r, row, 4, 1);
        l->created_at = dup_or_null(ll_db_text(r, row, 5));
        l->job_key = dup_or_null(ll_db_text(r, row, 6));
        l->business_key = dup_or_null(ll_db_text(r, row, 7));
    }
    PQclear(r);
    return LL_DB_OK;
}

ll_db_rc outbox_lease(ll_db *db, const dispatch_settings *s, leased **rows, size_t *n)
{
    struct lease_arg a = {s, NULL, 0};
    /* one statement: the lease commits before any command is published (a crash after it
     * leaves the rows due again when the lease runs out) */
    ll_db_rc rc = lease_rows(db, &a);
    *rows = a.rows;
    *n = a.n;
    return rc;
}

void outbox_free(leased *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].partition_id);
        free(rows[i].job_key);
        free(rows[i].business_key);
        free(rows[i].created_at);
        json_decref(rows[i].command);
    }
    free(rows);
}

static json_t *opt(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* VALIDATE_RUN: {dispatchId, runId, jobKey, businessKey, dispatchType, attempt, createdAt}. */
static void build_validate(leased *l)
{
    l->command = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s}", "dispatchId", l->dispatch_id, "runId", l->run_id,
                           "jobKey", l->job_key, "businessKey", l->business_key, "dispatchType", l->type,
                           "attempt", l->attempt, "createdAt", l->created_at ? l->created_at : "");
}

/* REISSUE_PARTITION: the docs/contract.md §6 payload, read from the run and partition at send time. */
static ll_db_rc build_reissue(ll_db *db, leased *l)
{
    const char *p[2] = {l->run_id, l->partition_id};
    PGresult *r = ll_db_exec(db, &ST_REISSUE_INPUT, p);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    if (PQntuples(r) != 1) {
        snprintf(l->build_error, sizeof l->build_error, "build failed: partition %s of run %s not found",
                 l->partition_id ? l->partition_id : "(null)", l->run_id);
        PQclear(r);
        return LL_DB_OK;
    }
    l->command = json_object();
    json_object_set_new(l->command, "dispatchId", json_string(l->dispatch_id));
    json_object_set_new(l->command, "runId", json_string(l->run_id));
    json_object_set_new(l->command, "jobKey", json_string(l->job_key));
    json_object_set_new(l->command, "businessKey", json_string(l->business_key));
    json_object_set_new(l->command, "dispatchType", json_string(l->type));
    json_object_set_new(l->command, "attempt", json_integer(l->attempt));
    json_object_set_new(l->command, "createdAt", json_string(l->created_at ? l->created_at : ""));
    json_object_set_new(l->command, "partitionId", json_string(l->partition_id));
    json_object_set_new(l->command, "snapshotScn", opt(ll_db_text(r, 0, 0)));
    json_object_set_new(l->command, "hdfsRunPath", opt(ll_db_text(r, 0, 1)));
    json_object_set_new(l->command, "lowerBound", opt(ll_db_text(r, 0, 2)));
    json_object_set_new(l->command, "upperBound", opt(ll_db_text(r, 0, 3)));
    json_object_set_new(l->command, "upperInclusive", json_boolean(ll_db_bool(r, 0, 4)));
    json_object_set_new(l->command, "isNullPartition", json_boolean(ll_db_bool(r, 0, 5)));
    json_object_set_new(l->command, "expectedRowCount", json_integer(ll_db_ll(r, 0, 6, 0)));
    PQclear(r);
    return LL_DB_OK;
}

ll_db_rc outbox_build(ll_db *db, leased *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        leased *l = &rows[i];
        if (!l->job_key) {
            snprintf(l->build_error, sizeof l->build_error, "build failed: run %s not found", l->run_id);
        } else if (strcmp(l->type, "VALIDATE_RUN") == 0) {
            build_validate(l);
        } else {
            ll_db_rc rc = build_reissue(db, l);
            if (rc != LL_DB_OK)
                return rc;
        }
    }
    return LL_DB_OK;
}

struct settle_arg {
    const dispatch_settings *s;
    leased *rows;
    size_t n;
    long sent, retried, dead;
};

/* The row's settlement: SENT, RETRY (backoff) or DEAD (a command that could not be built too). */
static ll_send_outcome outcome_of(const dispatch_settings *s, const leased *l)
{
    if (!l->command)
        return LL_SEND_DEAD;
    return ll_dispatch_classify(l->http_status, l->attempt, (int)s->max_attempts);
}

/* Marks every delivered row SENT with one statement (ST_SENT); adds the rows changed to *sent.
 * Does nothing when no row was delivered. */
static ll_db_rc mark_sent(ll_db *db, const dispatch_settings *s, const leased *rows, size_t n, long *sent,
                          bool alone)
{
    ll_pgarray ids = {0}, https = {0}, attempts = {0};
    for (size_t i = 0; i < n; i++)
        if (outcome_of(s, &rows[i]) == LL_SEND_SENT) {
            ll_pgarray_add(&ids, rows[i].dispatch_id);
            ll_pgarray_add_ll(&https, rows[i].recorded_http_status);
            ll_pgarray_add_ll(&attempts, rows[i].attempt);
        }
    ll_db_rc rc = LL_DB_OK;
    if (ids.n > 0) {
        const char *p[3] = {ll_pgarray_text(&ids), ll_pgarray_text(&https), ll_pgarray_text(&attempts)};
        PGresult *r = alone ? exec_alone(db, &ST_SENT, p) : ll_db_exec(db, &ST_SENT, p);
        if (r) {
            *sent += ll_db_affected(r);
            PQclear(r);
        } else {
            rc = ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
        }
    }
    ll_pgarray_free(&ids);
    ll_pgarray_free(&https);
    ll_pgarray_free(&attempts);
    return rc;
}

static ll_db_rc mark_dead(ll_db *db, leased *l, const char *why, long *dead)
{
    char status[16], attempt[16];
    snprintf(status, sizeof status, "%d", l->recorded_http_status);
    snprintf(attempt, sizeof attempt, "%d", l->attempt);
    const char *p[4] = {l->dispatch_id, why, status, attempt};
    PGresult *r = ll_db_exec(db, &ST_DEAD, p);
    if (!r)
        return LL_DB_ERROR;
    int changed = PQntuples(r) == 1;
    PQclear(r);
    if (!changed)
        return LL_DB_OK;
    (*dead)++;
    json_t *details = json_pack(
        "{s:s,s:s,s:o,s:i}", "dispatchId", l->dispatch_id, "type", l->type, "httpStatus",
        l->recorded_http_status ? json_integer(l->recorded_http_status) : json_null(), "attempt", l->attempt);
    ll_event ev = {.name = "DISPATCH_DEAD",
                   .level = "ERROR",
                   .run_id = l->run_id,
                   .partition_id = l->partition_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = "DISPATCH_DEAD",
                   .message = why,
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    return rc;
}

static ll_db_rc mark_retry(ll_db *db, const dispatch_settings *s, leased *l, long *retried)
{
    char status[16], delay[24], attempt[16];
    snprintf(status, sizeof status, "%d", l->recorded_http_status);
    snprintf(delay, sizeof delay, "%lld",
             (long long)ll_dispatch_backoff_ms(l->attempt, s->backoff_min_ms, s->backoff_max_ms));
    snprintf(attempt, sizeof attempt, "%d", l->attempt);
    const char *p[5] = {l->dispatch_id, delay, l->error, status, attempt};
    PGresult *r = ll_db_exec(db, &ST_RETRY, p);
    if (!r)
        return LL_DB_ERROR;
    *retried += ll_db_affected(r);
    PQclear(r);
    return LL_DB_OK;
}

/* A lease with a failed or unbuildable row: the SENT statement, then each other row, in one
 * transaction (the DEAD rows' events with them). */
static ll_db_rc settle_tx(ll_db *db, void *arg)
{
    struct settle_arg *a = arg;
    a->sent = a->retried = a->dead = 0;
    ll_db_rc rc = mark_sent(db, a->s, a->rows, a->n, &a->sent, false);
    for (size_t i = 0; i < a->n && rc == LL_DB_OK; i++) {
        leased *l = &a->rows[i];
        switch (outcome_of(a->s, l)) {
        case LL_SEND_SENT:
            break;
        case LL_SEND_RETRY:
            rc = mark_retry(db, a->s, l, &a->retried);
            break;
        case LL_SEND_DEAD:
        default:
            if (!l->command) {
                rc = mark_dead(db, l, l->build_error[0] ? l->build_error : "build failed", &a->dead);
            } else {
                /* a permanent answer (4xx but 408/425/429) is DEAD on the first attempt */
                bool permanent = ll_dispatch_status_permanent(l->http_status);
                char why[700];
                snprintf(why, sizeof why, "%s%s", permanent ? "" : "max attempts reached: ", l->error);
                rc = mark_dead(db, l, why, &a->dead);
            }
            break;
        }
    }
    return rc;
}

ll_db_rc outbox_settle(ll_db *db, const dispatch_settings *s, leased *rows, size_t n, long *sent,
                       long *retried, long *dead)
{
    struct settle_arg a = {s, rows, n, 0, 0, 0};
    bool all_sent = true;
    for (size_t i = 0; i < n; i++)
        all_sent = all_sent && outcome_of(s, &rows[i]) == LL_SEND_SENT;
    /* every row delivered (the usual case): one statement, its own transaction */
    ll_db_rc rc = all_sent ? mark_sent(db, s, rows, n, &a.sent, true) : ll_db_transaction(db, settle_tx, &a);
    *sent = a.sent;
    *retried = a.retried;
    *dead = a.dead;
    return rc;
}

/* The outbox backlog (obs.h): one index-free count of the PENDING rows; the outbox holds the
 * rows of active runs, so it stays small. */
static const ll_stmt ST_BACKLOG = {
    "outbox_backlog",
    "SELECT count(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at))::float8, 0)"
    " FROM nifi_ops.load_dispatch WHERE status = 'PENDING'",
    0};

ll_db_rc outbox_backlog(ll_db *db, double *pending, double *oldest_age_s)
{
    PGresult *r = ll_db_exec(db, &ST_BACKLOG, NULL);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    char *end0, *end1;
    *pending = strtod(PQgetvalue(r, 0, 0), &end0);
    *oldest_age_s = strtod(PQgetvalue(r, 0, 1), &end1);
    int whole = *end0 == '\0' && *end1 == '\0'; /* count(*) and a float8: always whole numbers */
    PQclear(r);
    if (!whole) {
        *pending = *oldest_age_s = 0;
        return LL_DB_ERROR;
    }
    return LL_DB_OK;
}
