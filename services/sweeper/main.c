/*
 * ll-sweeper - finds what stalled when nobody reports (docs/contract.md §7): stale partitions (FAIL, or
 * REISSUE with the same SCN), the run deadline, unacknowledged dispatches, stalled validation
 * alerts, stalled publishes. Any number of instances may run: an advisory lock lets one act per
 * tick. Settings are checked at start (recovery.stale > recovery.extract_query_timeout).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ll/config.h"
#include "ll/daemon.h"
#include "ll/dispatch_config.h"
#include "ll/schema_gate.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/topics.h"
#include "sweeper.h"

static const ll_config_key keys[] = {
    {"recovery.run_timeout", "PT6H", false, "CREATED/EXTRACTING deadline", LL_CONFIG_DURATION, LL_SEC,
     30 * LL_DAY},
    {"recovery.extract_query_timeout", "PT60M", false, "must equal NiFi EXTRACT.QUERY.TIMEOUT",
     LL_CONFIG_DURATION, LL_SEC, LL_DAY},
    {"recovery.stale", "PT90M", false,
     "a RUNNING partition without heartbeat this long is stale; must exceed extract_query_timeout",
     LL_CONFIG_DURATION, LL_SEC, 7 * LL_DAY},
    {"recovery.mode", "FAIL", false, "FAIL or REISSUE", LL_CONFIG_NO_RANGE},
    {"recovery.max_attempts", "3", false, "claims allowed per partition in REISSUE mode", LL_CONFIG_NO_RANGE},
    {"recovery.validation_stale", "PT2H", false, "alert threshold for runs waiting on validation or publish",
     LL_CONFIG_DURATION, LL_SEC, 30 * LL_DAY},
    {"recovery.publish_stale", "PT2H", false, "PUBLISHING -> PUBLISH_UNKNOWN threshold", LL_CONFIG_DURATION,
     LL_SEC, 30 * LL_DAY},
    {"recovery.sweeper_interval", "PT1M", false, "time between ticks", LL_CONFIG_DURATION, LL_SEC / 10,
     LL_HOUR},
    {"recovery.start_grace", "PT2M", false,
     "no rule acts this long after the sweeper's start, a new database connection, or a tick that found the"
     " ledger gone back in time: the consuming services find and re-read what the ledger lost first",
     LL_CONFIG_DURATION, 0, LL_DAY},
    {"recovery.reread_window", "PT6H", false,
     "detected database losses (nifi_ops.position_rewind) this recent keep the rules waiting until their"
     " consumer groups have read them again",
     LL_CONFIG_DURATION, 0, 30 * LL_DAY},
    {"dispatch.ack_timeout", "PT10M", false, "SENT without ACK this long is resent", LL_CONFIG_DURATION,
     LL_SEC, LL_DAY},
    LL_DISPATCH_MAX_ATTEMPTS_KEY,
    {"metrics.runs_ended_settle", "PT30S", false,
     "runs are counted in loadledger_runs_ended_total this long after their completed_at (a transaction that"
     " ended a run commits within it)",
     LL_CONFIG_DURATION, LL_SEC / 10, LL_HOUR},
    {"lag.groups", NULL, false,
     "consumer groups whose lag is read from the broker (comma-separated); unset: every group the broker"
     " lists, the first 16 by name. No lag without kafka.bootstrap.servers",
     LL_CONFIG_NO_RANGE},
    {"lag.timeout", "PT5S", false,
     "the longest wait of one broker request of the lag reading (the reading:"
     " four times it)",
     LL_CONFIG_DURATION, LL_SEC / 10, 60 * LL_SEC},
    {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

static int read_settings(const ll_config *cfg, sweep_settings *s, char *err, size_t n)
{
    int64_t max_attempts = 0, dispatch_max = 0; /* defaults and ranges: the table above */
    if (ll_config_duration_ms(cfg, "recovery.run_timeout", &s->run_timeout_ms, err, n) ||
        ll_config_duration_ms(cfg, "recovery.stale", &s->stale_ms, err, n) ||
        ll_config_duration_ms(cfg, "recovery.validation_stale", &s->validation_stale_ms, err, n) ||
        ll_config_duration_ms(cfg, "recovery.publish_stale", &s->publish_stale_ms, err, n) ||
        ll_config_duration_ms(cfg, "recovery.sweeper_interval", &s->interval_ms, err, n) ||
        ll_config_duration_ms(cfg, "dispatch.ack_timeout", &s->ack_timeout_ms, err, n) ||
        ll_config_duration_ms(cfg, "recovery.start_grace", &s->start_grace_ms, err, n) ||
        ll_config_duration_ms(cfg, "recovery.reread_window", &s->reread_window_ms, err, n) ||
        ll_config_int(cfg, "recovery.max_attempts", &max_attempts, err, n) ||
        ll_config_int(cfg, "dispatch.max_attempts", &dispatch_max, err, n))
        return -1;
    int64_t query_timeout = 0;
    if (ll_config_duration_ms(cfg, "recovery.extract_query_timeout", &query_timeout, err, n))
        return -1;
    int mode =
        ll_config_enum("recovery.mode", ll_config_get(cfg, "recovery.mode"), LL_RECOVERY_MODE_NAMES, err, n);
    if (mode < 0)
        return -1;
    s->mode = (ll_recovery_mode)mode;
    s->max_attempts = (int)max_attempts;
    s->dispatch_max_attempts = (int)dispatch_max;
    s->run_timeout_text = ll_config_get(cfg, "recovery.run_timeout");
    s->publish_stale_text = ll_config_get(cfg, "recovery.publish_stale");
    return ll_recovery_settings_check(s->stale_ms, query_timeout, s->max_attempts, err, n);
}

static void report(const sweep_counts *c)
{
    long total = c->reissue_partition + c->timeout_stale_partition + c->timeout_run_deadline +
                 c->requeue_dispatch + c->dead_dispatch + c->abandon_dispatch + c->stale_alert +
                 c->publish_unknown + c->timeout_ended_partition;
    if (total == 0)
        return;
    json_t *f = json_object();
    const struct {
        const char *rule, *k;
        long v;
    } items[] = {{"stale_partitions", "reissue_partition", c->reissue_partition},
                 {"stale_partitions", "timeout_stale_partition", c->timeout_stale_partition},
                 {"run_deadline", "timeout_run_deadline", c->timeout_run_deadline},
                 {"ended_partitions", "timeout_ended_partition", c->timeout_ended_partition},
                 {"unacked_dispatches", "requeue_dispatch", c->requeue_dispatch},
                 {"unacked_dispatches", "dead_dispatch", c->dead_dispatch},
                 {"unacked_dispatches", "abandon_dispatch", c->abandon_dispatch},
                 {"stale_alerts", "stale_alert", c->stale_alert},
                 {"stalled_publish", "publish_unknown", c->publish_unknown}};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        ll_obs_sweep(items[i].rule, items[i].k, items[i].v);
        if (items[i].v)
            json_object_set_new(f, items[i].k, json_integer(items[i].v));
    }
    ll_log_json(LL_WARN, NULL, "sweeper_actions", f, "sweeper acted on %ld rows", total);
}

/* Sleeps ms in steps of 200 ms (a stop signal ends it), the loop turning for /healthz. */
static void sleep_ms(ll_db *db, int64_t ms)
{
    while (ms > 0 && !ll_daemon_stopping) {
        ll_obs_turn(db->conn && PQstatus(db->conn) == CONNECTION_OK);
        int64_t step = ms < 200 ? ms : 200;
        struct timespec ts = {step / 1000, (step % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

int main(int argc, char **argv)
{
    ll_daemon d;
    int rc = ll_daemon_start(&d, argc, argv, "sweeper",
                             "finds stalled partitions, runs, dispatches and publishes", keys, NULL);
    if (rc >= 0)
        return rc;
    char err[1024];
    sweep_settings s;
    if (read_settings(d.cfg, &s, err, sizeof err) != 0)
        return ll_daemon_fail(&d, err);
    if (ll_daemon_open_db(&d, err, sizeof err) != 0 ||
        ll_obs_start("sweeper", LL_OBS_PLAIN, d.cfg, err, sizeof err) != 0)
        return ll_daemon_fail(&d, err);
    ll_log(LL_INFO, NULL, "service_started", "sweeper started (mode %s, interval %lld ms)",
           ll_config_get(d.cfg, "recovery.mode"), (long long)s.interval_ms);
    if (ll_schema_gate("sweeper", d.cfg, &ll_daemon_stopping) != 0) {
        ll_daemon_end(&d); /* stopped while waiting for a schema it knows */
        return 0;
    }
    char host[256] = "sweeper";
    const char *instance = ll_config_get(d.cfg, "service.instance_id");
    if (!instance || !*instance) {
        if (gethostname(host, sizeof host - 1) != 0)
            snprintf(host, sizeof host, "sweeper");
        instance = host;
    }
    sweep_gate *gate = sweep_gate_new(instance, s.start_grace_ms, s.reread_window_ms);
    int64_t settle_ms = 0, lag_timeout_ms = 0;
    if (ll_config_duration_ms(d.cfg, "metrics.runs_ended_settle", &settle_ms, err, sizeof err) ||
        ll_config_duration_ms(d.cfg, "lag.timeout", &lag_timeout_ms, err, sizeof err))
        return ll_daemon_fail(&d, err);
    sweep_ended *ended = sweep_ended_new(settle_ms);
    sweep_lag *lag = sweep_lag_new(d.cfg, lag_timeout_ms, err, sizeof err);
    if (!lag && err[0])
        return ll_daemon_fail(&d, err);
    if (!gate || !ended)
        return ll_daemon_fail(&d, "out of memory");
    while (!ll_daemon_stopping) {
        sweep_counts c;
        bool acted = false;
        if (sweep_tick(&d.db, &s, gate, &c, &acted) != LL_DB_OK)
            ll_log(LL_WARN, NULL, "sweeper_error", "tick failed: %s %s", d.db.err.sqlstate, d.db.err.message);
        else if (acted)
            report(&c);
        if (sweep_gauges(&d.db) != LL_DB_OK)
            ll_log(LL_WARN, NULL, "sweeper_gauges_error", "ledger gauges not read: %s %s", d.db.err.sqlstate,
                   d.db.err.message);
        if (sweep_runs_ended(&d.db, ended) != LL_DB_OK)
            ll_log(LL_WARN, NULL, "sweeper_runs_ended_error", "runs ended not read: %s %s", d.db.err.sqlstate,
                   d.db.err.message);
        sweep_lag_read(lag);
        sleep_ms(&d.db, s.interval_ms);
    }
    sweep_gate_free(gate);
    sweep_ended_free(ended);
    sweep_lag_free(lag);
    ll_log(LL_INFO, NULL, "service_stopped", "sweeper stopped");
    ll_daemon_end(&d);
    return 0;
}
