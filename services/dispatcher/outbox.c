/*
 * outbox.c - the SQL of the outbox (contract §6): the lease, the command's inputs, and the
 * settlement of each delivery. A lease is a short transaction; nothing is held open while the
 * command travels. Every update after delivery is conditional on PENDING, so an ACK that came
 * first (validation started) stays ACKED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher.h"
#include "ll/ledger.h"
#include "ll/log.h"
#include "ll/rules.h"

static const ll_stmt ST_LEASE = {
    "outbox_lease",
    "WITH due AS (SELECT dispatch_id FROM nifi_ops.load_dispatch"
    "   WHERE status = 'PENDING' AND next_attempt_at <= clock_timestamp()"
    "   ORDER BY next_attempt_at LIMIT $1::int FOR UPDATE SKIP LOCKED)"
    " UPDATE nifi_ops.load_dispatch d SET attempt_count = d.attempt_count + 1,"
    "   next_attempt_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000)"
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

static const ll_stmt ST_SENT = {
    "outbox_sent",
    "UPDATE nifi_ops.load_dispatch SET status = 'SENT', sent_at = clock_timestamp(),"
    " last_http_status = nullif($2::int, 0), last_error = NULL"
    " WHERE dispatch_id = $1::uuid AND status = 'PENDING'",
    2};

static const ll_stmt ST_RETRY = {
    "outbox_retry",
    "UPDATE nifi_ops.load_dispatch SET"
    " next_attempt_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000),"
    " last_http_status = nullif($4::int, 0), last_error = left($3, 2000)"
    " WHERE dispatch_id = $1::uuid AND status = 'PENDING'",
    4};

static const ll_stmt ST_DEAD = {
    "outbox_dead",
    "UPDATE nifi_ops.load_dispatch SET status = 'DEAD', last_http_status = nullif($3::int, 0),"
    " last_error = left($2, 2000) WHERE dispatch_id = $1::uuid AND status = 'PENDING'"
    " RETURNING run_id::text, partition_id, dispatch_type, attempt_count",
    3};

struct lease_arg {
    const dispatch_settings *s;
    leased *rows;
    size_t n;
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static ll_db_rc lease_tx(ll_db *db, void *arg)
{
    struct lease_arg *a = arg;
    char batch[24], lease[24];
    snprintf(batch, sizeof batch, "%lld", (long long)a->s->batch);
    snprintf(lease, sizeof lease, "%lld", (long long)a->s->lease_ms);
    const char *p[2] = {batch, lease};
    PGresult *r = ll_db_exec(db, &ST_LEASE, p);
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
    ll_db_rc rc = ll_db_transaction(db, lease_tx, &a);
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

/* REISSUE_PARTITION: the contract §6 payload, read from the run and partition at send time. */
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

static ll_db_rc mark_dead(ll_db *db, leased *l, const char *why, long *dead)
{
    char status[16];
    snprintf(status, sizeof status, "%d", l->recorded_http_status);
    const char *p[3] = {l->dispatch_id, why, status};
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
    ll_event ev = {"DISPATCH_DEAD", "ERROR", l->run_id, l->partition_id, -1, -1, NULL,
                   "DISPATCH_DEAD", why,     details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    return rc;
}

static ll_db_rc settle_tx(ll_db *db, void *arg)
{
    struct settle_arg *a = arg;
    a->sent = a->retried = a->dead = 0;
    for (size_t i = 0; i < a->n; i++) {
        leased *l = &a->rows[i];
        ll_db_rc rc = LL_DB_OK;
        if (!l->command) {
            rc = mark_dead(db, l, l->build_error[0] ? l->build_error : "build failed", &a->dead);
        } else {
            char status[16];
            snprintf(status, sizeof status, "%d", l->recorded_http_status);
            switch (ll_dispatch_classify(l->http_status, l->attempt, (int)a->s->max_attempts)) {
            case LL_SEND_SENT: {
                const char *p[2] = {l->dispatch_id, status};
                PGresult *r = ll_db_exec(db, &ST_SENT, p);
                if (!r)
                    return LL_DB_ERROR;
                a->sent += ll_db_affected(r);
                PQclear(r);
                break;
            }
            case LL_SEND_RETRY: {
                char delay[24];
                snprintf(delay, sizeof delay, "%lld",
                         (long long)ll_dispatch_backoff_ms(l->attempt, a->s->backoff_min_ms,
                                                           a->s->backoff_max_ms));
                const char *p[4] = {l->dispatch_id, delay, l->error, status};
                PGresult *r = ll_db_exec(db, &ST_RETRY, p);
                if (!r)
                    return LL_DB_ERROR;
                a->retried += ll_db_affected(r);
                PQclear(r);
                break;
            }
            case LL_SEND_DEAD:
            default: {
                /* a permanent answer (4xx but 408/425/429) is DEAD on the first attempt */
                bool permanent = ll_dispatch_classify(l->http_status, 1, 1 << 30) == LL_SEND_DEAD;
                char why[700];
                snprintf(why, sizeof why, "%s%s", permanent ? "" : "max attempts reached: ", l->error);
                rc = mark_dead(db, l, why, &a->dead);
                break;
            }
            }
        }
        if (rc != LL_DB_OK)
            return rc;
    }
    return LL_DB_OK;
}

ll_db_rc outbox_settle(ll_db *db, const dispatch_settings *s, leased *rows, size_t n, long *sent,
                       long *retried, long *dead)
{
    struct settle_arg a = {s, rows, n, 0, 0, 0};
    ll_db_rc rc = ll_db_transaction(db, settle_tx, &a);
    *sent = a.sent;
    *retried = a.retried;
    *dead = a.dead;
    return rc;
}
