/*
 * ll-dispatcher - delivers the transactional outbox (load_dispatch): lease due rows with
 * FOR UPDATE SKIP LOCKED, publish the validate-run / reissue-partition command, mark SENT, back
 * off, or DEAD. Woken by LISTEN/NOTIFY, polling as the fallback. docs/contract.md §6.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatcher.h"
#include "ll/clock.h"
#include "ll/daemon.h"
#include "ll/dispatch_config.h"
#include "ll/schema_gate.h"
#include "ll/kloop.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/rules.h"
#include "ll/svc.h"
#include "ll/registry.h"
#include "ll/topics.h"

static const ll_config_key keys[] = {
    {"db.listen_conninfo", NULL, false,
     "conninfo of the LISTEN connection, direct to PostgreSQL (LISTEN does not work through a "
     "transaction pooler); default db.conninfo; 'none' = polling only",
     LL_CONFIG_NO_RANGE},
    LL_TOPIC_KEYS,
    LL_REGISTRY_CONFIG_KEYS,
    {"dispatch.batch", "20", false,
     "rows per lease, leased, published and marked SENT together (bounds the size of its statements)",
     LL_CONFIG_INT, 1, 1000},
    {"dispatch.lease", "PT60S", false, "how long a leased row stays invisible to other dispatchers",
     LL_CONFIG_DURATION, LL_SEC, LL_HOUR},
    {"dispatch.poll_interval", "PT5S", false, "polling fallback when no NOTIFY comes", LL_CONFIG_DURATION,
     LL_SEC / 10, LL_HOUR},
    LL_DISPATCH_MAX_ATTEMPTS_KEY,
    {"dispatch.backoff_min", "PT5S", false, "first retry delay", LL_CONFIG_DURATION, LL_SEC / 10, LL_HOUR},
    {"dispatch.backoff_max", "PT5M", false, "longest retry delay", LL_CONFIG_DURATION, LL_SEC / 10, LL_DAY},
    {"dispatch.delivery_timeout", "PT10S", false, "how long to wait for the broker's ack", LL_CONFIG_DURATION,
     LL_SEC / 10, 10 * LL_MIN},
    {"dispatch.sink", "kafka", false,
     "kafka (publish to the command topics) or http (POST to a NiFi receiver)", LL_CONFIG_NO_RANGE},
    {"nifi.receiver_url", NULL, false,
     "http sink: base URL of the NiFi ListenHTTP/HandleHttpRequest receiver", LL_CONFIG_NO_RANGE},
    {"nifi.timeout", "PT10S", false, "http sink: timeout of every phase of a POST", LL_CONFIG_DURATION,
     LL_SEC / 10, 10 * LL_MIN},
    {"nifi.ca_bundle", NULL, false, "http sink: CA bundle of the receiver's certificate", LL_CONFIG_NO_RANGE},
    {"nifi.client_cert", NULL, false, "http sink: client certificate (used when client_key is set too)",
     LL_CONFIG_NO_RANGE},
    {"nifi.client_key", NULL, false, "http sink: client key", LL_CONFIG_NO_RANGE},
    {"dispatch.log_summary", "PT1M", false,
     "at most this often one info line dispatch_summary counts the rows sent, retried and DEAD since the "
     "last (a row sent is logged at debug only); PT0S: no summary",
     LL_CONFIG_DURATION, 0, LL_DAY},
    {"fault.crash_after_publish", "0", false,
     "drills only: kill -9 self after this many acknowledged batches, before marking them SENT",
     LL_CONFIG_NO_RANGE},
    {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

/* The settings (their defaults and ranges: the table above). 0, or -1 with err naming the key. */
static int read_settings(const ll_config *cfg, dispatch_settings *s, char *err, size_t n)
{
    return ll_config_int(cfg, "dispatch.batch", &s->batch, err, n) ||
                   ll_config_duration_ms(cfg, "dispatch.lease", &s->lease_ms, err, n) ||
                   ll_config_duration_ms(cfg, "dispatch.poll_interval", &s->poll_ms, err, n) ||
                   ll_config_int(cfg, "dispatch.max_attempts", &s->max_attempts, err, n) ||
                   ll_config_duration_ms(cfg, "dispatch.backoff_min", &s->backoff_min_ms, err, n) ||
                   ll_config_duration_ms(cfg, "dispatch.backoff_max", &s->backoff_max_ms, err, n) ||
                   ll_config_duration_ms(cfg, "dispatch.delivery_timeout", &s->delivery_ms, err, n) ||
                   ll_config_duration_ms(cfg, "dispatch.log_summary", &s->summary_ms, err, n) ||
                   ll_config_int(cfg, "fault.crash_after_publish", &s->crash_after_publish, err, n)
               ? -1
               : 0;
}

/* The earliest due time of a PENDING row: a backoff running out, or another dispatcher's lease. */
static const ll_stmt ST_NEXT_DUE = {
    "dispatch_next_due",
    "SELECT ceil(extract(epoch FROM min(next_attempt_at) - clock_timestamp()) * 1000)::bigint"
    " FROM nifi_ops.load_dispatch WHERE status = 'PENDING'",
    0};

/*
 * How long to sleep before the next drain unless a NOTIFY comes first: until the earliest
 * PENDING row is due, at most poll_interval (the fallback for a lost notification, or for rows
 * written by a transaction that did not notify). At least 100 ms, so a due row that another
 * transaction keeps locked does not turn the loop into a busy one.
 */
static int64_t next_wait_ms(ll_db *db, const dispatch_settings *s)
{
    int64_t wait = s->poll_ms;
    PGresult *r = ll_db_ensure(db) == LL_DB_OK ? ll_db_exec(db, &ST_NEXT_DUE, NULL) : NULL;
    if (r) {
        long long due = ll_db_ll(r, 0, 0, wait);
        PQclear(r);
        if (due < wait)
            wait = due;
    }
    return wait < 100 ? 100 : wait;
}

/* Publishes (or POSTs) the commands of one lease and waits for their acknowledgements. */
static void deliver(dispatch_sink *sink, leased *rows, size_t n, const dispatch_settings *s)
{
    if (sink->http)
        http_sink_deliver(&sink->web, rows, n);
    else
        sink_deliver(&sink->kafka, rows, n, s->delivery_ms);
}

static bool delivered(const leased *l)
{
    return ll_dispatch_delivered(l->http_status);
}

/* Opens the configured sink. 0, or -1 with err. */
static int open_sink(dispatch_sink *sink, const ll_config *cfg, char *err, size_t errlen)
{
    static const char *const kinds[] = {"kafka", "http", NULL}; /* dispatch.sink */
    memset(sink, 0, sizeof *sink);
    int kind = ll_config_enum("dispatch.sink", ll_config_get(cfg, "dispatch.sink"), kinds, err, errlen);
    if (kind < 0)
        return -1;
    if (kind == 1) {
        sink->http = true;
        return http_sink_open(&sink->web, cfg, err, errlen);
    }
    return sink_open(&sink->kafka, cfg, err, errlen);
}

static void close_sink(dispatch_sink *sink)
{
    if (sink->http)
        http_sink_close(&sink->web);
    else
        sink_close(&sink->kafka);
}

/*
 * The crash point of the drills: the broker has acknowledged the batch's commands, the rows are
 * not SENT yet. After a restart the lease runs out and the same rows (same dispatch ids, same
 * keys) are published again: the validation start's CAS keeps one winner (docs/contract.md §5.7).
 */
static void crash_point(const leased *rows, size_t n, const dispatch_settings *s)
{
    static int64_t published;
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any |= delivered(&rows[i]);
    if (s->crash_after_publish <= 0 || !any || ++published < s->crash_after_publish)
        return;
    ll_log(LL_WARN, NULL, "fault_injected", "killing self after published batch %lld, before marking it SENT",
           (long long)published);
    raise(SIGKILL);
}

/*
 * One tick (docs/contract.md §6 "drain"): lease up to dispatch.batch due rows with one statement,
 * publish them all and wait once for the broker's acknowledgements, mark the delivered ones
 * SENT with one statement; again while a lease comes back full.
 */
static void drain(ll_db *db, dispatch_sink *sink, const dispatch_settings *s, dispatch_summary *sum)
{
    for (;;) {
        leased *rows = NULL;
        size_t n = 0;
        int64_t t0 = ll_now_ms();
        ll_db_rc rc = outbox_lease(db, s, &rows, &n);
        if (rc == LL_DB_OK && n > 0)
            rc = outbox_build(db, rows, n);
        if (rc != LL_DB_OK || n == 0) {
            if (rc != LL_DB_OK)
                ll_log(LL_WARN, NULL, "dispatch_loop_error", "%s", db->err.message);
            outbox_free(rows, n);
            return;
        }
        int64_t t1 = ll_now_ms();
        deliver(sink, rows, n, s);
        int64_t t2 = ll_now_ms();
        crash_point(rows, n, s);
        long sent = 0, retried = 0, dead = 0;
        rc = outbox_settle(db, s, rows, n, &sent, &retried, &dead);
        if (rc == LL_DB_OK) {
            ll_obs_dispatch("sent", sent);
            ll_obs_dispatch("retried", retried);
            ll_obs_dispatch("dead", dead);
            summary_add(sum, sent, retried, dead);
        }
        int64_t t3 = ll_now_ms();
        ll_log_json(LL_DEBUG, NULL, "dispatch_batch",
                    json_pack("{s:I,s:I,s:I,s:I}", "rows", (json_int_t)n, "leaseMs", (json_int_t)(t1 - t0),
                              "deliverMs", (json_int_t)(t2 - t1), "settleMs", (json_int_t)(t3 - t2)),
                    "%zu rows: lease %lld ms, deliver %lld ms, settle %lld ms", n, (long long)(t1 - t0),
                    (long long)(t2 - t1), (long long)(t3 - t2));
        for (size_t i = 0; i < n; i++) {
            ll_log_ctx ctx = {rows[i].run_id, rows[i].partition_id, NULL, -1, -1};
            bool ok = delivered(&rows[i]);
            ll_log(ok ? LL_DEBUG : LL_WARN, &ctx, ok ? "dispatch_sent" : "dispatch_retry",
                   "%s %s attempt %d%s%s", rows[i].type, rows[i].dispatch_id, rows[i].attempt, ok ? "" : ": ",
                   ok ? "" : rows[i].error);
        }
        outbox_free(rows, n);
        if (rc != LL_DB_OK) {
            /* the lease expires and the rows come again: at least once */
            ll_log(LL_WARN, NULL, "dispatch_loop_error", "settle: %s", db->err.message);
            return;
        }
        if (dead)
            ll_log(LL_ERROR, NULL, "dispatch_dead", "%ld dispatches DEAD", dead);
        /* a short lease took every row due at its start; a row committed since then came with
         * a NOTIFY (or falls due later), which wakes the loop again */
        if (n < (size_t)s->batch)
            return;
    }
}

/* For /metrics and /healthz (obs.h): the loop turned; the outbox backlog at most once a second
 * while the HTTP endpoint runs (no query without it). */
static void observe(ll_db *db, int64_t *backlog_at)
{
    double pending = 0, age = 0;
    int64_t now = ll_now_ms();
    if (now >= *backlog_at && ll_obs_port() > 0) {
        *backlog_at = now + 1000;
        if (ll_db_ensure(db) == LL_DB_OK && outbox_backlog(db, &pending, &age) == LL_DB_OK)
            ll_obs_outbox(pending, age);
    }
    ll_obs_turn(db->conn && PQstatus(db->conn) == CONNECTION_OK);
}

int main(int argc, char **argv)
{
    ll_daemon d;
    int rc = ll_daemon_start(&d, argc, argv, "dispatcher",
                             "delivers the outbox (load_dispatch) to Kafka or a NiFi HTTP receiver", keys,
                             "  kafka.<property>                 passed to librdkafka\n");
    if (rc >= 0)
        return rc;
    char err[1024];
    dispatch_settings s;
    dispatch_sink sink;
    if (read_settings(d.cfg, &s, err, sizeof err) != 0)
        return ll_daemon_fail(&d, err);
    if (open_sink(&sink, d.cfg, err, sizeof err) != 0) {
        close_sink(&sink);
        return ll_daemon_fail(&d, err);
    }
    if (ll_daemon_open_db(&d, err, sizeof err) != 0 ||
        ll_obs_start("dispatcher", sink.http ? LL_OBS_PLAIN : LL_OBS_PRODUCER, d.cfg, err, sizeof err) != 0) {
        close_sink(&sink);
        return ll_daemon_fail(&d, err);
    }
    const char *lc = ll_config_get(d.cfg, "db.listen_conninfo");
    listener lis = {NULL, NULL, 0};
    if (!lc && d.db.pooler == LL_DB_POOLER_TRANSACTION) {
        /* LISTEN needs a session: through a transaction pooler no notification would come */
        lc = "none";
        ll_log(
            LL_INFO, NULL, "listen_disabled",
            "polling only: db.pooler=transaction and no db.listen_conninfo (a direct conninfo for LISTEN)");
    } else if (!lc) {
        lc = ll_config_get(d.cfg, "db.conninfo");
    }
    if (strcmp(lc, "none") != 0)
        lis.conninfo = (char *)lc;
    else
        ll_log(LL_INFO, NULL, "listen_disabled", "polling only");
    ll_log(LL_INFO, NULL, "service_started", "dispatcher started (poll %lld ms, lease %lld ms)",
           (long long)s.poll_ms, (long long)s.lease_ms);
    if (ll_schema_gate("dispatcher", d.cfg, &ll_daemon_stopping) != 0) {
        close_sink(&sink); /* stopped while waiting for a schema it knows */
        ll_daemon_end(&d);
        return 0;
    }
    /* Drain at start, then whenever a NOTIFY comes (or the listener reconnects), a row falls
     * due, or poll_interval passes. The wait is cut into slices of at most 1 s so that a stop
     * signal arriving between two checks is honoured within a second. */
    rc = 0;
    char fatal[512];
    dispatch_summary sum = {ll_now_ms(), 0, 0, 0};
    drain(&d.db, &sink, &s, &sum);
    int64_t drain_at = ll_now_ms() + next_wait_ms(&d.db, &s), backlog_at = 0;
    while (!ll_daemon_stopping) {
        if (!sink.http && rd_kafka_fatal_error(sink.kafka.producer, fatal, sizeof fatal)) {
            /* the idempotent producer cannot deliver any more: let the supervisor restart us;
             * the leased rows come due again after their lease */
            ll_log(LL_ERROR, NULL, "kafka_fatal", "producer: %s", fatal);
            ll_obs_fenced();
            rc = 2;
            break;
        }
        int64_t now = ll_now_ms();
        observe(&d.db, &backlog_at);
        if (summary_due(&sum, now, s.summary_ms))
            summary_log(&sum, now);
        if (now < drain_at) {
            int64_t slice = drain_at - now < 1000 ? drain_at - now : 1000;
            if (!listener_wait(&lis, slice))
                continue;
        }
        if (ll_daemon_stopping)
            break;
        drain(&d.db, &sink, &s, &sum);
        drain_at = ll_now_ms() + next_wait_ms(&d.db, &s);
    }
    if (s.summary_ms > 0)
        summary_log(&sum, ll_now_ms()); /* what the last interval settled */
    ll_log(LL_INFO, NULL, "service_stopped", "dispatcher stopped (exit %d)", rc);
    listener_close(&lis);
    close_sink(&sink);
    ll_daemon_end(&d);
    return rc;
}
