/*
 * schema_gate.c - the start-up check of the ledger's schema version (schema_gate.h).
 */
#include "ll/schema_gate.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ll/db.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/redact.h"

/* The ledger's version: the highest NNNN of the recorded migrations (version = "NNNN_name"). */
static const char SQL_VERSION[] = "SELECT coalesce(max(substring(version FROM '^[0-9]+')::int), 0)"
                                  " FROM nifi_ops.schema_migrations";

int ll_schema_read_version(const char *conninfo, const char *app, int *version, int *too_old, char *why,
                           size_t whylen)
{
    char timeout[16], raw[600];
    snprintf(timeout, sizeof timeout, "%d", LL_SCHEMA_QUERY_TIMEOUT_MS / 1000);
    /* the conninfo last: its own connect_timeout or application_name wins (libpq: the last value) */
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {timeout, app, conninfo ? conninfo : "", NULL};
    *too_old = 0;
    int rc = -1;
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        snprintf(raw, sizeof raw, "database unreachable: %s", c ? PQerrorMessage(c) : "out of memory");
    } else {
        bool timed_out = false;
        PGresult *r = ll_pq_exec_bounded(c, SQL_VERSION, LL_SCHEMA_QUERY_TIMEOUT_MS, &timed_out);
        if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            *version = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
            rc = 0;
        } else if (r) {
            const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            /* 42P01 no such table, 3F000 no such schema, 42501 permission denied (before 0010) */
            *too_old =
                st && (strcmp(st, "42P01") == 0 || strcmp(st, "3F000") == 0 || strcmp(st, "42501") == 0);
            snprintf(raw, sizeof raw, "%s: %s",
                     *too_old ? "no readable migration history nifi_ops.schema_migrations"
                              : "cannot read the schema version",
                     PQresultErrorMessage(r));
        } else {
            snprintf(raw, sizeof raw, "cannot read the schema version: %s",
                     timed_out ? "no answer in time" : PQerrorMessage(c));
        }
        PQclear(r);
    }
    PQfinish(c);
    if (rc == 0)
        return 0;
    /* libpq may quote the conninfo (a malformed URI) with its password: never in a log line */
    ll_redact_secrets(raw, conninfo, why, whylen);
    /* one line: libpq's messages end with a newline */
    for (char *p = why; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    for (size_t n = strlen(why); n > 0 && why[n - 1] == ' ';)
        why[--n] = '\0';
    return -1;
}

/* The reason for an operator of a verdict that does not let the service run, into out. */
static void refusal(const char *service, int version, ll_schema_verdict v, char *out, size_t n)
{
    if (v == LL_SCHEMA_TOO_OLD)
        snprintf(out, n,
                 "ledger schema version %04d is older than the %04d ll-%s needs: run `loadctl migrate` "
                 "(this build accepts %04d..%04d)",
                 version, LL_SCHEMA_MIN, service, LL_SCHEMA_MIN, LL_SCHEMA_MAX_COMPAT);
    else
        snprintf(out, n,
                 "ledger schema version %04d is newer than ll-%s accepts (%04d..%04d): upgrade ll-%s "
                 "(a contracting migration needs a newer release)",
                 version, service, LL_SCHEMA_MIN, LL_SCHEMA_MAX_COMPAT, service);
}

static void sleep_ms(int64_t ms, volatile sig_atomic_t *stop)
{
    while (ms > 0 && !*stop) {
        int64_t step = ms < 200 ? ms : 200;
        struct timespec ts = {step / 1000, (step % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

int ll_schema_gate(const char *service, const ll_config *cfg, volatile sig_atomic_t *stop)
{
    char reason[400], last[400] = "";
    const char *conninfo = ll_config_get(cfg, "db.conninfo");
    while (!*stop) {
        int version = 0, too_old = 0;
        ll_schema_verdict v = LL_SCHEMA_TOO_OLD;
        char why[300];
        bool have_version =
            ll_schema_read_version(conninfo, service, &version, &too_old, why, sizeof why) == 0;
        if (have_version) {
            v = ll_schema_judge(version, LL_SCHEMA_MIN, LL_SCHEMA_MAX_KNOWN, LL_SCHEMA_MAX_COMPAT);
            if (ll_schema_may_run(v)) {
                ll_obs_schema(NULL);
                json_t *f = json_pack("{s:i,s:s,s:i,s:i}", "schema_version", version, "verdict",
                                      ll_schema_verdict_name(v), "schema_min", LL_SCHEMA_MIN,
                                      "schema_max_compat", LL_SCHEMA_MAX_COMPAT);
                if (v == LL_SCHEMA_NEWER_COMPATIBLE)
                    ll_log_json(LL_WARN, NULL, "schema_newer", f,
                                "ledger schema version %04d is newer than this build's %04d and within its "
                                "compatible range (up to %04d): running",
                                version, LL_SCHEMA_MAX_KNOWN, LL_SCHEMA_MAX_COMPAT);
                else
                    ll_log_json(LL_INFO, NULL, "schema_checked", f, "ledger schema version %04d", version);
                return 0;
            }
            refusal(service, version, v, reason, sizeof reason);
        } else if (too_old) {
            snprintf(reason, sizeof reason, "%s: run `loadctl migrate` (ll-%s needs schema version %04d)",
                     why, service, LL_SCHEMA_MIN);
        } else {
            snprintf(reason, sizeof reason, "%s (schema version not checked yet)", why);
        }
        ll_obs_schema(reason);
        /* a line per change of reason, not per try */
        if (strcmp(reason, last) != 0 && !too_old && !have_version) {
            ll_log(LL_WARN, NULL, "db_unavailable",
                   "database not reachable at start: %s (nothing applied; trying again every %d s)", why,
                   LL_SCHEMA_DB_RETRY_MS / 1000);
            snprintf(last, sizeof last, "%s", reason);
        } else if (strcmp(reason, last) != 0) {
            ll_log_json(LL_ERROR, NULL, "schema_refused",
                        json_pack("{s:i,s:s}", "schema_version", version, "verdict",
                                  too_old || v == LL_SCHEMA_TOO_OLD ? "too_old" : ll_schema_verdict_name(v)),
                        "not applying anything: %s; checking again every %d s", reason,
                        LL_SCHEMA_RETRY_MS / 1000);
            snprintf(last, sizeof last, "%s", reason);
        }
        ll_obs_turn(have_version || too_old); /* the database answered, or not */
        sleep_ms(have_version || too_old ? LL_SCHEMA_RETRY_MS : LL_SCHEMA_DB_RETRY_MS, stop);
    }
    return 1;
}
