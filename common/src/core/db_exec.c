/*
 * db_exec.c - running SQL on the connection: a statement (ll_db_exec: prepared by name once per
 * connection, or unnamed behind a transaction pooler), a plain command (ll_db_command), and the
 * retrying transaction helper of docs/contract.md §2.8 (deadlock and serialization failures re-run the
 * whole transaction). Every answer is awaited at most db.response_timeout (db_wait.c).
 */
#include "db_int.h"
#include "ll/clock.h"
#include "ll/obs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ll_db_forget_prepared(ll_db *db)
{
    for (size_t i = 0; i < db->n_prepared; i++)
        free(db->prepared[i]);
    db->n_prepared = 0;
}

/*
 * The answer to the statement just sent (sent: what PQsend* returned), awaited at most
 * db.response_timeout. NULL with db->err filled when nothing could be sent or no answer came in
 * time; in the latter case the connection is dropped (the next ll_db_ensure reconnects), since
 * whatever it carries next would wait behind the lost answer.
 */
PGresult *ll_db_await_answer(ll_db *db, int sent)
{
    if (!sent) {
        ll_db_set_conn_err(db, "08006");
        return NULL;
    }
    bool late = false;
    int64_t t0 = ll_now_us();
    PGresult *res = ll_pq_await(db->conn, db->response_timeout_ms, &late);
    db->wait_us += ll_now_us() - t0;
    if (late) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "no answer from PostgreSQL within db.response_timeout (%lld ms): connection dropped",
                 (long long)db->response_timeout_ms);
        ll_db_set_err(db, "08006", "", msg);
        PQfinish(db->conn);
        db->conn = NULL;
        ll_db_forget_prepared(db);
        return NULL;
    }
    if (!res)
        ll_db_set_conn_err(db, "08006");
    return res;
}

static bool is_prepared(const ll_db *db, const char *name)
{
    for (size_t i = 0; i < db->n_prepared; i++)
        if (strcmp(db->prepared[i], name) == 0)
            return true;
    return false;
}

static int prepare(ll_db *db, const ll_stmt *st)
{
    if (is_prepared(db, st->name))
        return 0;
    PGresult *res = ll_db_await_answer(db, PQsendPrepare(db->conn, st->name, st->sql, st->nparams, NULL));
    if (!res)
        return -1;
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        ll_db_set_err_from_result(db, res);
        PQclear(res);
        return -1;
    }
    PQclear(res);
    if (db->n_prepared == db->cap_prepared) {
        size_t cap = db->cap_prepared ? db->cap_prepared * 2 : 32;
        char **p = realloc(db->prepared, cap * sizeof *p);
        if (!p)
            return -1;
        db->prepared = p;
        db->cap_prepared = cap;
    }
    db->prepared[db->n_prepared++] = strdup(st->name);
    return 0;
}

/* Runs meanwhile once (if any) and clears it. */
static void run_meanwhile(ll_db_meanwhile_fn *meanwhile, void *arg)
{
    ll_db_meanwhile_fn fn = *meanwhile;
    *meanwhile = NULL;
    if (fn)
        fn(arg);
}

/* One statement: prepared by name on a direct connection, unnamed on a pooled one; *meanwhile
 * (if set) runs between the send and the wait, and is cleared. */
static PGresult *exec_one(ll_db *db, const ll_stmt *st, const char *const *params,
                          ll_db_meanwhile_fn *meanwhile, void *arg)
{
    int sent;
    if (db->pooled) {
        sent = PQsendQueryParams(db->conn, st->sql, st->nparams, NULL, params, NULL, NULL, 0);
    } else {
        if (prepare(db, st) != 0) {
            run_meanwhile(meanwhile, arg);
            return NULL;
        }
        sent = PQsendQueryPrepared(db->conn, st->name, st->nparams, params, NULL, NULL, 0);
    }
    if (sent)
        PQflush(db->conn); /* the whole statement on its way before the client's work */
    run_meanwhile(meanwhile, arg);
    PGresult *res = ll_db_await_answer(db, sent);
    if (!res)
        return NULL;
    ExecStatusType s = PQresultStatus(res);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        return res;
    ll_db_set_err_from_result(db, res);
    PQclear(res);
    return NULL;
}

PGresult *ll_db_exec_meanwhile(ll_db *db, const ll_stmt *st, const char *const *params,
                               ll_db_meanwhile_fn meanwhile, void *arg)
{
    if (!db->conn) {
        ll_db_set_err(db, "08003", "", "no connection");
        run_meanwhile(&meanwhile, arg);
        return NULL;
    }
    if (!db->pooled || PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        return exec_one(db, st, params, &meanwhile, arg);
    /* Pooled and outside a transaction: a transaction of its own, so the limits bound it too. */
    run_meanwhile(&meanwhile, arg);
    if (ll_db_command(db, "BEGIN ISOLATION LEVEL READ COMMITTED") != LL_DB_OK)
        return NULL;
    PGresult *res = exec_one(db, st, params, &meanwhile, arg);
    if (res && ll_db_command(db, "COMMIT") == LL_DB_OK)
        return res;
    ll_db_error saved = db->err;
    if (PQstatus(db->conn) == CONNECTION_OK && PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        ll_db_command(db, "ROLLBACK");
    db->err = saved;
    PQclear(res);
    return NULL;
}

PGresult *ll_db_exec(ll_db *db, const ll_stmt *st, const char *const *params)
{
    return ll_db_exec_meanwhile(db, st, params, NULL, NULL);
}

ll_db_rc ll_db_exec_discard(ll_db *db, const ll_stmt *st, const char *const *params)
{
    PGresult *r = ll_db_exec(db, st, params);
    if (!r)
        return LL_DB_ERROR;
    PQclear(r);
    return LL_DB_OK;
}

ll_db_rc ll_db_command(ll_db *db, const char *sql)
{
    if (!db->conn) {
        ll_db_set_err(db, "08003", "", "no connection");
        return LL_DB_UNAVAILABLE;
    }
    int commit = strcmp(sql, "COMMIT") == 0;
    int64_t t0 = commit ? ll_now_us() : 0;
    PGresult *res = ll_db_await_answer(db, PQsendQuery(db->conn, sql));
    if (!res)
        return LL_DB_UNAVAILABLE;
    if (PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK) {
        PQclear(res);
        if (commit)
            ll_obs_db_commit((double)(ll_now_us() - t0) / 1e6);
        if (db->pooled && strncmp(sql, "BEGIN", 5) == 0 && ll_db_apply_timeouts(db, true) != 0) {
            ll_db_error saved = db->err; /* the transaction is aborted: end it, keep the cause */
            if (db->conn)
                PQclear(ll_db_await_answer(db, PQsendQuery(db->conn, "ROLLBACK")));
            db->err = saved;
            return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
        }
        return LL_DB_OK;
    }
    ll_db_set_err_from_result(db, res);
    PQclear(res);
    return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
}

long ll_db_affected(const PGresult *res)
{
    long long n = 0;
    return ll_db_parse_ll(PQcmdTuples((PGresult *)res), &n) == 0 ? (long)n : 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

ll_db_rc ll_db_transaction(ll_db *db, ll_tx_fn fn, void *arg)
{
    for (int attempt = 0; attempt < db->tx_attempts; attempt++) {
        if (ll_db_ensure(db) != LL_DB_OK)
            return LL_DB_UNAVAILABLE;
        ll_db_rc rc = ll_db_command(db, "BEGIN ISOLATION LEVEL READ COMMITTED");
        if (rc == LL_DB_OK) {
            rc = fn(db, arg);
            if (rc == LL_DB_OK) {
                rc = ll_db_command(db, "COMMIT");
                if (rc == LL_DB_OK)
                    return LL_DB_OK;
            } else {
                ll_db_error saved = db->err;
                if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
                    ll_db_command(db, "ROLLBACK");
                db->err = saved;
                if (rc == LL_DB_ROLLBACK)
                    return LL_DB_ROLLBACK;
            }
        }
        if (ll_db_err_is_unavailable(db))
            return LL_DB_UNAVAILABLE;
        if (!ll_db_err_is_retryable(db))
            return LL_DB_ERROR;
        sleep_ms(50L << attempt);
    }
    return LL_DB_ERROR;
}
