/*
 * obs.c - the loadledger metric families, health and readiness, and the HTTP handler (obs.h);
 * the pure parts (statuses, lag, label sets) are obs_pure.c's.
 *
 * The main thread counts into one process-wide registry (metrics.h, its own mutex); the flags of
 * health and readiness are C11 atomics; the HTTP thread renders the registry and reads the flags.
 * Replies and dead letters are counted when the Kafka transaction that carries them commits (the
 * loop calls ll_obs_inputs / ll_obs_dead_letters then, commit.c), so the counts match what a
 * read_committed reader sees.
 */
#include "ll/clock.h"
#include "ll/obs.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ll/http.h"
#include "ll/log.h"
#include "ll/metrics.h"
#include "ll/version.h"

/* Bounds of the label sets (obs.h). */
#define OBS_INPUT_SERIES 64
#define OBS_LAG_SERIES   256
#define OBS_RUN_SERIES   16 /* the non-terminal run statuses (8) of the sweeper's gauges */
#define OBS_TYPE_SERIES  4  /* the dispatch types (2) */
/* runs ended: (LL_OBS_MAX_JOBS + "_other") x (8 terminal statuses + OTHER) */
#define OBS_ENDED_SERIES ((LL_OBS_MAX_JOBS + 1) * 9)

static const double LATENCY_BOUNDS[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,  0.5,    1,     2.5,  5,     10};
static const double BATCH_BOUNDS[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000};
/* A run's duration, seconds: 1 minute to 2 days (run_timeout PT6H by default, publish up to days). */
static const double RUN_BOUNDS[] = {60,    300,   600,   900,   1800,  3600,  7200,
                                    10800, 14400, 21600, 43200, 86400, 172800};

static struct {
    ll_metrics *reg;
    ll_http *http;
    ll_obs_kind kind;
    int64_t stall_ms;
    ll_metric *inputs, *dead, *held_msgs, *held_runs, *held_answered, *unreadable, *batch, *db_commit,
        *kafka_commit, *lag, *outbox, *outbox_age, *dispatches, *sweeps, *sweeper_waiting, *reread,
        *conflicts, *withheld, *turns, *rss, *start_time, *ready_g, *db_up_g, *active_runs, *runs_idle,
        *dead_dispatches, *build_info, *registry, *held_oldest, *prereq_wait, *runs_ended, *run_duration,
        *group_lag, *group_lag_ok, *group_lag_ts;
    ll_obs_jobs jobs; /* the load_job labels of the runs ended */
} g;

static atomic_llong last_turn_ms;
static atomic_int db_up, n_assigned, fenced;

/* Why the ledger's schema keeps the service not ready ("" when it does not): ll_obs_schema. */
static pthread_mutex_t schema_mu = PTHREAD_MUTEX_INITIALIZER;
static char schema_reason[400];

/* ---- the registry ----------------------------------------------------------------------------- */

static int families(void)
{
    ll_metrics *r = g.reg;
    size_t nl = sizeof LATENCY_BOUNDS / sizeof LATENCY_BOUNDS[0];
    g.inputs = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_inputs_total",
                              "Input messages answered, by input topic, reply outcome and code (counted "
                              "when the Kafka transaction with the reply commits)",
                              "topic,outcome,code", OBS_INPUT_SERIES, NULL, 0);
    g.dead = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_dead_letters_total",
                            "Input messages dead-lettered, by input topic and code", "topic,code",
                            OBS_INPUT_SERIES, NULL, 0);
    g.held_msgs = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_held_messages",
                                 "Messages held in memory because their run waits", "", 1, NULL, 0);
    g.held_runs =
        ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_held_runs", "Runs with held messages", "", 1, NULL, 0);
    g.held_answered =
        ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_held_answered_messages",
                       "Held messages answered before the database lost their effect, waiting for "
                       "their prerequisite to be read again (loop.reapplied_wait)",
                       "", 1, NULL, 0);
    g.unreadable = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_unreadable_offsets",
                                  "Input offsets the broker no longer holds below (or past) this instance's "
                                  "positions (deleted by retention before they were read): their partitions "
                                  "are stopped until an operator accepts the gap (loadctl accept-gap)",
                                  "", 1, NULL, 0);
    g.batch = ll_metrics_add(r, LL_METRIC_HISTOGRAM, "loadledger_batch_messages", "Messages per poll batch",
                             "", 1, BATCH_BOUNDS, sizeof BATCH_BOUNDS / sizeof BATCH_BOUNDS[0]);
    g.db_commit = ll_metrics_add(r, LL_METRIC_HISTOGRAM, "loadledger_db_commit_duration_seconds",
                                 "Duration of a database COMMIT", "", 1, LATENCY_BOUNDS, nl);
    g.kafka_commit = ll_metrics_add(r, LL_METRIC_HISTOGRAM, "loadledger_kafka_commit_duration_seconds",
                                    "Duration of a Kafka transaction commit (offsets sent and committed)", "",
                                    1, LATENCY_BOUNDS, nl);
    g.lag = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_consumer_lag_messages",
                           "Messages between the committed offset and the end of each assigned partition "
                           "(librdkafka statistics)",
                           "topic,partition", OBS_LAG_SERIES, NULL, 0);
    g.outbox = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_outbox_pending_dispatches",
                              "Outbox rows (load_dispatch) in status PENDING (dispatcher)", "", 1, NULL, 0);
    g.outbox_age =
        ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_outbox_oldest_pending_age_seconds",
                       "Age of the oldest PENDING outbox row, 0 when none (dispatcher)", "", 1, NULL, 0);
    g.dispatches = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_dispatches_total",
                                  "Outbox rows settled by the dispatcher, by result (sent, retried, dead)",
                                  "result", 4, NULL, 0);
    g.sweeps = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_sweeper_actions_total",
                              "Rows the sweeper acted on, by rule and action", "rule,action", 16, NULL, 0);
    g.sweeper_waiting =
        ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_sweeper_waiting",
                       "1 while the sweeper's rules wait for the ledger's lost inputs to be read "
                       "again (its start grace, or a detected loss not yet re-read)",
                       "", 1, NULL, 0);
    g.reread =
        ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_reread_offsets_total",
                       "Offsets read again at an assignment or rewind because the ledger's position "
                       "(behind=ledger: the database lost commits) or Kafka's (behind=kafka) was behind",
                       "behind", 2, NULL, 0);
    g.conflicts =
        ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_position_conflicts_total",
                       "Position writes and checks that found the ledger's read position not the one "
                       "this instance last read or wrote (the database went back in time, or another "
                       "instance took the partition): the batch undone, the positions merged again",
                       "", 1, NULL, 0);
    g.withheld = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_answers_withheld_total",
                                "Inputs applied again after the database lost them whose answer Kafka "
                                "already held (not answered twice)",
                                "", 1, NULL, 0);
    g.turns = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_loop_turns_total",
                             "Iterations of the service's main loop", "", 1, NULL, 0);
    g.ready_g = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_ready",
                               "1 when /readyz answers 200 (database up, partitions assigned, producer not "
                               "fenced)",
                               "", 1, NULL, 0);
    g.db_up_g = ll_metrics_add(
        r, LL_METRIC_GAUGE, "loadledger_db_up",
        "1 when the service's database connection answered on the main loop's last turn", "", 1, NULL, 0);
    g.active_runs = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_active_runs",
                                   "Runs in each non-terminal status, PUBLISH_UNKNOWN included (sweeper)",
                                   "status", OBS_RUN_SERIES, NULL, 0);
    g.runs_idle = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_active_runs_idle_seconds",
                                 "Seconds since the least recently active run in each non-terminal status "
                                 "progressed (heartbeat_at), 0 when none (sweeper)",
                                 "status", OBS_RUN_SERIES, NULL, 0);
    g.dead_dispatches =
        ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_dead_dispatches",
                       "Outbox rows (load_dispatch) in status DEAD whose run is still active, "
                       "by dispatch type (sweeper)",
                       "type", OBS_TYPE_SERIES, NULL, 0);
    g.registry = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_schema_registry_requests_total",
                                "Schema registry lookups of a writer schema id that asked the registry, by "
                                "result (ok, not_found, unavailable, invalid; docs/design.md §9)",
                                "result", 4, NULL, 0);
    g.held_oldest = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_held_oldest_wait_seconds",
                                   "Seconds the oldest held message waiting for a prerequisite has waited "
                                   "(since its run's first deferral on its partition; 0 when none)",
                                   "", 1, NULL, 0);
    g.prereq_wait = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_prerequisite_wait_seconds",
                                   "The configured loop.prerequisite_wait, seconds", "", 1, NULL, 0);
    g.runs_ended = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_runs_ended_total",
                                  "Runs that reached a terminal status since this sweeper started, by status "
                                  "and job key (load_job; at most 32 job keys, then _other) (sweeper)",
                                  "status,load_job", OBS_ENDED_SERIES, NULL, 0);
    g.run_duration =
        ll_metrics_add(r, LL_METRIC_HISTOGRAM, "loadledger_run_duration_seconds",
                       "Duration of the runs ended since this sweeper started (completed_at - "
                       "started_at), by job key (load_job) (sweeper)",
                       "load_job", LL_OBS_MAX_JOBS + 1, RUN_BOUNDS, sizeof RUN_BOUNDS / sizeof RUN_BOUNDS[0]);
    g.group_lag = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_group_lag_messages",
                                 "Messages between each consumer group's committed offset and the end (last "
                                 "stable offset) of the partition, read from the broker (sweeper)",
                                 "group,topic,partition", LL_OBS_GROUP_LAG_SERIES, NULL, 0);
    g.group_lag_ok = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_group_lag_read_ok",
                                    "1 when the last reading of the consumer groups' lag from the broker "
                                    "answered for every group (sweeper)",
                                    "", 1, NULL, 0);
    g.group_lag_ts = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_group_lag_read_timestamp_seconds",
                                    "Unix time of the last complete reading of the consumer groups' lag "
                                    "(sweeper)",
                                    "", 1, NULL, 0);
    g.rss = ll_metrics_add(r, LL_METRIC_GAUGE, "process_resident_memory_bytes",
                           "Resident memory size in bytes", "", 1, NULL, 0);
    g.start_time =
        ll_metrics_add(r, LL_METRIC_GAUGE, "process_start_time_seconds",
                       "Start time of the process since the Unix epoch in seconds", "", 1, NULL, 0);
    g.build_info = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_build_info",
                                  "1, labelled with the version and the commit the binary was built from "
                                  "(ll/version.h)",
                                  "version,commit", 1, NULL, 0);
    return g.build_info && g.inputs && g.dead && g.held_msgs && g.held_runs && g.held_answered &&
                   g.unreadable && g.batch && g.db_commit && g.kafka_commit && g.lag && g.outbox &&
                   g.outbox_age && g.dispatches && g.sweeps && g.reread && g.sweeper_waiting && g.conflicts &&
                   g.withheld && g.turns && g.ready_g && g.db_up_g && g.active_runs && g.runs_idle &&
                   g.dead_dispatches && g.registry && g.held_oldest && g.prereq_wait && g.runs_ended &&
                   g.run_duration && g.group_lag && g.group_lag_ok && g.group_lag_ts && g.rss && g.start_time
               ? 0
               : -1;
}

/* The schema reason into out (n bytes; "" when none); 1 when there is one. */
static int schema_blocked(char *out, size_t n)
{
    pthread_mutex_lock(&schema_mu);
    snprintf(out, n, "%s", schema_reason);
    pthread_mutex_unlock(&schema_mu);
    return out[0] != '\0';
}

static int ready_now(void)
{
    char why[sizeof schema_reason];
    if (schema_blocked(why, sizeof why))
        return 503;
    return ll_obs_ready_status(g.kind, atomic_load(&db_up), atomic_load(&n_assigned), atomic_load(&fenced));
}

/* Resident set size from /proc/self/statm (bytes), 0 when unreadable. */
static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    char line[128];
    if (!f)
        return 0;
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    /* "size resident shared ...", in pages */
    char *end;
    errno = 0;
    strtoull(line, &end, 10);
    unsigned long long res = strtoull(end, &end, 10);
    return errno == 0 && res > 0 ? (double)res * (double)sysconf(_SC_PAGESIZE) : 0;
}

static char *text(const char *s, size_t *len)
{
    char *b = strdup(s);
    *len = b ? strlen(b) : 0;
    return b;
}

/* The HTTP handler (http.h): called on the server's thread. */
static int handle(void *arg, const char *path, char **body, size_t *len, const char **ctype)
{
    (void)arg;
    if (strcmp(path, "/metrics") == 0) {
        ll_metric_set(g.rss, NULL, rss_bytes());
        ll_metric_set(g.ready_g, NULL, ready_now() == 200);
        ll_metric_set(g.db_up_g, NULL, atomic_load(&db_up));
        *body = ll_metrics_render(g.reg, len);
        *ctype = "text/plain; version=0.0.4; charset=utf-8";
        return *body ? 200 : 500;
    }
    if (strcmp(path, "/healthz") == 0) {
        int64_t last = atomic_load(&last_turn_ms), now = ll_now_ms();
        int st = ll_obs_health_status(last, now, g.stall_ms);
        char b[160];
        snprintf(b, sizeof b, "%s: main loop last turned %lld ms ago (limit %lld ms)\n",
                 st == 200 ? "ok" : "stalled", last ? (long long)(now - last) : -1LL, (long long)g.stall_ms);
        *body = text(b, len);
        return st;
    }
    if (strcmp(path, "/readyz") == 0) {
        int st = ready_now();
        char b[700], why[sizeof schema_reason];
        int blocked = schema_blocked(why, sizeof why);
        snprintf(b, sizeof b, "%s\ndatabase: %s\npartitions assigned: %d\nproducer: %s\nschema: %s\n",
                 st == 200 ? "ready" : "not ready", atomic_load(&db_up) ? "up" : "unreachable",
                 atomic_load(&n_assigned), atomic_load(&fenced) ? "fenced" : "ok", blocked ? why : "ok");
        *body = text(b, len);
        return st;
    }
    *body = text("not found: /metrics, /healthz, /readyz\n", len);
    return 404;
}

int ll_obs_start(const char *service, ll_obs_kind kind, const ll_config *cfg, char *err, size_t errlen)
{
    ll_obs_stop();
    g.kind = kind;
    g.stall_ms = 30000;
    if (ll_config_get(cfg, "http.stall_after") &&
        ll_config_duration_ms(cfg, "http.stall_after", &g.stall_ms, err, errlen) != 0)
        return -1;
    if (!(g.reg = ll_metrics_new()) || families() != 0) {
        snprintf(err, errlen, "metrics registry: out of memory");
        ll_obs_stop();
        return -1;
    }
    ll_metric_set(g.start_time, NULL, (double)time(NULL));
    const char *build[2] = {ll_version(), ll_version_commit()};
    ll_metric_set(g.build_info, build, 1);
    /* the series an alert watches for its first increase, present at 0 from the start (a series
     * that appears with its first sample defeats increase(); issue 39's rules) */
    if (kind == LL_OBS_CONSUMER) {
        static const char *const behind[2][1] = {{"ledger"}, {"kafka"}};
        ll_metric_add(g.reread, behind[0], 0);
        ll_metric_add(g.reread, behind[1], 0);
        ll_metric_add(g.conflicts, NULL, 0);
        ll_metric_set(g.held_answered, NULL, 0);
        ll_metric_set(g.unreadable, NULL, 0);
        ll_metric_set(g.held_oldest, NULL, 0);
        /* the registry's results, for LoadledgerRegistryUnavailable's ratio */
        static const char *const results[4][1] = {{"ok"}, {"not_found"}, {"unavailable"}, {"invalid"}};
        for (size_t i = 0; i < 4; i++)
            ll_metric_add(g.registry, results[i], 0);
    } else if (strcmp(service, "sweeper") == 0) {
        ll_metric_set(g.sweeper_waiting, NULL, 0);
    }
    atomic_store(&last_turn_ms, ll_now_ms());
    const char *listen = ll_config_get(cfg, "http.listen");
    if (listen && *listen) {
        if (!(g.http = ll_http_start(listen, handle, NULL, err, errlen))) {
            ll_obs_stop();
            return -1;
        }
        ll_log_json(LL_INFO, NULL, "http_listening",
                    json_pack("{s:s,s:i}", "listen", listen, "port", ll_http_port(g.http)),
                    "%s serves /metrics, /healthz, /readyz on port %d", service, ll_http_port(g.http));
    }
    return 0;
}

void ll_obs_stop(void)
{
    ll_http_stop(g.http); /* first: its thread reads the registry */
    g.http = NULL;
    ll_metrics_free(g.reg);
    memset(&g, 0, sizeof g);
    atomic_store(&db_up, 0);
    atomic_store(&n_assigned, 0);
    atomic_store(&fenced, 0);
}

int ll_obs_port(void)
{
    return ll_http_port(g.http);
}

/* ---- hooks ------------------------------------------------------------------------------------ */

void ll_obs_turn(int db_ok)
{
    atomic_store(&last_turn_ms, ll_now_ms());
    atomic_store(&db_up, db_ok ? 1 : 0);
    ll_metric_add(g.turns, NULL, 1);
}

void ll_obs_assigned(int n)
{
    atomic_store(&n_assigned, n);
}

void ll_obs_fenced(void)
{
    atomic_store(&fenced, 1);
}

void ll_obs_schema(const char *reason)
{
    pthread_mutex_lock(&schema_mu);
    snprintf(schema_reason, sizeof schema_reason, "%s", reason ? reason : "");
    pthread_mutex_unlock(&schema_mu);
}

void ll_obs_inputs(const char *topic, const char *outcome, const char *code, size_t n)
{
    const char *v[3] = {topic, outcome, code ? code : ""};
    if (g.reg && n > 0)
        ll_metric_add(g.inputs, v, (double)n);
}

void ll_obs_dead_letters(const char *topic, const char *code, size_t n)
{
    const char *v[2] = {topic, code};
    if (g.reg && n > 0)
        ll_metric_add(g.dead, v, (double)n);
}

void ll_obs_batch(size_t n)
{
    ll_metric_observe(g.batch, NULL, (double)n);
}

void ll_obs_unreadable(int64_t offsets)
{
    ll_metric_set(g.unreadable, NULL, (double)offsets);
}

void ll_obs_held(size_t msgs, size_t runs, size_t answered)
{
    ll_metric_set(g.held_msgs, NULL, (double)msgs);
    ll_metric_set(g.held_runs, NULL, (double)runs);
    ll_metric_set(g.held_answered, NULL, (double)answered);
}

void ll_obs_held_wait(double oldest_s, double prereq_wait_s)
{
    ll_metric_set(g.held_oldest, NULL, oldest_s);
    ll_metric_set(g.prereq_wait, NULL, prereq_wait_s);
}

void ll_obs_run_ended(const char *status, const char *job, double duration_s)
{
    if (!g.reg)
        return;
    const char *j = ll_obs_job_label(&g.jobs, job);
    const char *v[2] = {ll_obs_end_status(status), j};
    ll_metric_add(g.runs_ended, v, 1);
    const char *d[1] = {j};
    ll_metric_observe(g.run_duration, d, duration_s < 0 ? 0 : duration_s);
}

void ll_obs_group_lag_begin(void)
{
    ll_metric_reset(g.group_lag);
}

void ll_obs_group_lag_set(const char *group, const char *topic, int32_t partition, int64_t lag)
{
    char p[16];
    snprintf(p, sizeof p, "%d", (int)partition);
    const char *v[3] = {group, topic, p};
    ll_metric_set(g.group_lag, v, (double)lag);
}

void ll_obs_group_lag_read(int ok)
{
    ll_metric_set(g.group_lag_ok, NULL, ok ? 1 : 0);
    if (ok)
        ll_metric_set(g.group_lag_ts, NULL, (double)time(NULL));
}

void ll_obs_db_commit(double seconds)
{
    ll_metric_observe(g.db_commit, NULL, seconds);
}

void ll_obs_kafka_commit(double seconds)
{
    ll_metric_observe(g.kafka_commit, NULL, seconds);
}

void ll_obs_lag_begin(void)
{
    ll_metric_reset(g.lag);
}

void ll_obs_lag_set(const char *topic, int32_t partition, int64_t lag)
{
    char p[16];
    snprintf(p, sizeof p, "%d", (int)partition);
    const char *v[2] = {topic, p};
    ll_metric_set(g.lag, v, (double)lag);
}

void ll_obs_outbox(double pending, double oldest_age_s)
{
    ll_metric_set(g.outbox, NULL, pending);
    ll_metric_set(g.outbox_age, NULL, oldest_age_s);
}

void ll_obs_dispatch(const char *result, long n)
{
    const char *v[1] = {result};
    if (n > 0)
        ll_metric_add(g.dispatches, v, (double)n);
}

void ll_obs_registry(const char *result)
{
    const char *v[1] = {result};
    if (g.reg)
        ll_metric_add(g.registry, v, 1);
}

void ll_obs_reread(const char *behind, int64_t offsets)
{
    const char *v[1] = {behind};
    if (g.reg && offsets > 0)
        ll_metric_add(g.reread, v, (double)offsets);
}

void ll_obs_sweeper_waiting(int waiting)
{
    if (g.reg)
        ll_metric_set(g.sweeper_waiting, NULL, waiting ? 1 : 0);
}

void ll_obs_position_conflict(void)
{
    if (g.reg)
        ll_metric_add(g.conflicts, NULL, 1);
}

void ll_obs_answer_withheld(void)
{
    if (g.reg)
        ll_metric_add(g.withheld, NULL, 1);
}

void ll_obs_sweep(const char *rule, const char *action, long n)
{
    const char *v[2] = {rule, action};
    if (n > 0)
        ll_metric_add(g.sweeps, v, (double)n);
}

void ll_obs_ledger_runs(const char *status, double runs, double idle_s)
{
    const char *v[1] = {status};
    ll_metric_set(g.active_runs, v, runs);
    ll_metric_set(g.runs_idle, v, idle_s);
}

void ll_obs_ledger_dead_dispatches(const char *type, double n)
{
    const char *v[1] = {type};
    ll_metric_set(g.dead_dispatches, v, n);
}
