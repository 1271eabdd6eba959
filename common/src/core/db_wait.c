/*
 * db_wait.c - a bounded wait for a PostgreSQL answer (db.response_timeout). libpq's PQexec waits
 * for the server without any limit: a connection whose peer stays up but passes no byte (a network
 * black hole, a half-open connection behind a proxy or a NAT that lost its state) would hold a
 * service forever, since the server-side limits (statement_timeout) never reach it and TCP
 * keepalives are answered by whatever holds the connection. Every statement is therefore sent with
 * the asynchronous calls and its answer awaited with poll() up to a deadline.
 */
#include "ll/clock.h"
#include "ll/db.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <time.h>

int ll_db_response_timeout_check(int64_t statement_timeout_ms, int64_t response_timeout_ms)
{
    if (response_timeout_ms <= 0)
        return -1;
    if (statement_timeout_ms > 0 && response_timeout_ms <= statement_timeout_ms)
        return -1;
    return 0;
}

int ll_db_wait_slice_ms(int64_t now_ms, int64_t deadline_ms)
{
    if (deadline_ms <= 0)
        return -1; /* no deadline: poll without a limit */
    int64_t left = deadline_ms - now_ms;
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* Sends what libpq has queued and waits until a result can be taken without blocking.
 * 1 = ready (or the connection failed: PQgetResult then reports it), 0 = the deadline passed. */
static int wait_ready(PGconn *conn, int64_t deadline_ms)
{
    for (;;) {
        int f = PQflush(conn);
        if (f < 0)
            return 1;
        if (f == 0 && !PQisBusy(conn))
            return 1;
        int slice = ll_db_wait_slice_ms(ll_now_ms(), deadline_ms);
        if (slice == 0)
            return 0;
        struct pollfd p = {.fd = PQsocket(conn), .events = (short)(POLLIN | (f == 1 ? POLLOUT : 0))};
        if (p.fd < 0)
            return 1;
        int n = poll(&p, 1, slice);
        if (n < 0 && errno != EINTR)
            return 1;
        if (n > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) && !PQconsumeInput(conn))
            return 1;
    }
}

PGresult *ll_pq_await(PGconn *conn, int64_t timeout_ms, bool *timed_out)
{
    int64_t deadline = timeout_ms > 0 ? ll_now_ms() + timeout_ms : 0;
    PGresult *last = NULL;
    *timed_out = false;
    for (;;) {
        if (!wait_ready(conn, deadline)) {
            PQclear(last);
            *timed_out = true;
            return NULL;
        }
        PGresult *r = PQgetResult(conn);
        if (!r)
            return last;
        /* as PQexec: the last result, except that an error is kept over what follows it */
        if (last && PQresultStatus(last) == PGRES_FATAL_ERROR) {
            PQclear(r);
        } else {
            PQclear(last);
            last = r;
        }
        ExecStatusType s = PQresultStatus(last);
        if (s == PGRES_COPY_IN || s == PGRES_COPY_OUT || s == PGRES_COPY_BOTH)
            return last; /* not used by the services; the caller sees the state */
    }
}

PGresult *ll_pq_exec_bounded(PGconn *conn, const char *sql, int64_t timeout_ms, bool *timed_out)
{
    *timed_out = false;
    if (!PQsendQuery(conn, sql))
        return NULL;
    return ll_pq_await(conn, timeout_ms, timed_out);
}
