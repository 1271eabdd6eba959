/*
 * listen.c - the LISTEN load_dispatch wake-up (docs/contract.md §6): a dedicated connection; after every
 * (re)connection it wakes once at once; a dropped connection reconnects, waiting 5 s after a
 * failed attempt; polling every dispatch.poll_interval remains the fallback, and the only way
 * when the connection turns out to go through a transaction pooler (no LISTEN there).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include "dispatcher.h"
#include "ll/clock.h"
#include "ll/log.h"
#include "ll/redact.h"

/* The longest wait for the server's answer to the LISTEN set-up (ms); then it is retried later. */
#define LISTEN_ANSWER_MS 10000

/* Connects and LISTENs. true when a new connection was made. */
static bool connect_listener(listener *l)
{
    if (!l->conninfo || ll_now_ms() < l->retry_at_ms)
        return false;
    /* the conninfo may be key=value pairs or a URI: expanded by libpq, named for pg_stat_activity */
    static const char *const keys[] = {"connect_timeout", "dbname", "application_name", NULL};
    const char *vals[] = {"10", l->conninfo, "dispatcher-listen", NULL};
    l->conn = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(l->conn) == CONNECTION_OK && ll_db_conn_pooled(l->conn, LISTEN_ANSWER_MS) == 1) {
        /* a transaction pooler hands the session to others after the LISTEN: nothing would come */
        ll_log(LL_WARN, NULL, "listen_pooled",
               "db.listen_conninfo (default db.conninfo) reaches PostgreSQL through a transaction "
               "pooler, where LISTEN gets no notification: polling only; set db.listen_conninfo to a "
               "direct conninfo to be woken");
        PQfinish(l->conn);
        l->conn = NULL;
        l->conninfo = NULL;
        return false;
    }
    if (PQstatus(l->conn) == CONNECTION_OK) {
        bool late = false;
        PGresult *r = ll_pq_exec_bounded(l->conn, "LISTEN load_dispatch", LISTEN_ANSWER_MS, &late);
        bool ok = !late && PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (ok) {
            ll_log(LL_INFO, NULL, "listen_connected", "listening on channel load_dispatch");
            return true;
        }
    }
    char msg[512];
    ll_log(LL_WARN, NULL, "listen_error", "cannot listen: %s",
           ll_redact_secrets(PQerrorMessage(l->conn), l->conninfo, msg, sizeof msg));
    PQfinish(l->conn);
    l->conn = NULL;
    l->retry_at_ms = ll_now_ms() + 5000;
    return false;
}

static bool drain_notifications(listener *l)
{
    bool woke = false;
    PGnotify *n;
    while ((n = PQnotifies(l->conn)) != NULL) {
        woke = true;
        PQfreemem(n);
    }
    return woke;
}

bool listener_wait(listener *l, int64_t timeout_ms)
{
    if (!l->conn && connect_listener(l))
        return true;
    if (!l->conn) {
        struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return false;
    }
    int fd = PQsocket(l->conn);
    fd_set rf;
    FD_ZERO(&rf);
    FD_SET(fd, &rf);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int ready = select(fd + 1, &rf, NULL, NULL, &tv);
    if (ready > 0 && (!PQconsumeInput(l->conn) || PQstatus(l->conn) != CONNECTION_OK)) {
        ll_log(LL_WARN, NULL, "listen_connection_lost", "listener connection lost; reconnecting");
        PQfinish(l->conn);
        l->conn = NULL;
        return connect_listener(l);
    }
    return drain_notifications(l);
}

void listener_close(listener *l)
{
    if (l->conn)
        PQfinish(l->conn);
    l->conn = NULL;
}
