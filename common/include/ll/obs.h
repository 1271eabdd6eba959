/*
 * obs.h - what a running service shows an operator over HTTP (docs/design.md §12): its Prometheus
 * metrics (the families docs/operations.md lists), /healthz (the main loop turns) and /readyz
 * (database reachable, partitions assigned, producer not fenced). One process-wide registry;
 * the HTTP server (http.h) is started only when `http.listen` is set.
 *
 * The hooks below are cheap and safe to call when ll_obs_start has not run (they do nothing).
 * They are called from the service's main thread; the HTTP server reads from its own thread.
 *
 * Label bounds: topic = the broker names of the service's input topics (at most 8 per service); outcome =
 * ACCEPTED, REPLAY, REJECTED or OTHER; code = an upper-case contract code of at most 40
 * characters, else OTHER; 64 topic/outcome/code sets at most (then "_other"); 256 partitions for
 * the lag; rule/action from the sweeper's fixed table; status and type from the ledger's fixed sets
 * (the sweeper's gauges). The sweeper's runs ended: status = a terminal status or OTHER, load_job =
 * at most LL_OBS_MAX_JOBS job keys (the first ones seen), any later one "_other"; its group lag:
 * at most LL_OBS_MAX_GROUPS consumer groups and LL_OBS_GROUP_LAG_SERIES group/topic/partition
 * sets. metrics.h bounds each family.
 *
 * The functions are obs.c's (the registry, the HTTP handler, the hooks) and obs_pure.c's.
 */
#ifndef LL_OBS_H
#define LL_OBS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/config.h"

/* The keys of the HTTP endpoint (http.listen, http.stall_after), for the services' key tables. */
#define LL_OBS_KEYS                                                                                          \
    {"http.listen", NULL, false,                                                                             \
     "host:port of /metrics, /healthz, /readyz (IPv4, e.g. 127.0.0.1:9464; port 0: any free port, "          \
     "logged as http_listening); unset: no HTTP endpoint",                                                   \
     LL_CONFIG_NO_RANGE},                                                                                    \
    {                                                                                                        \
        "http.stall_after", "PT30S", false,                                                                  \
            "/healthz answers 503 when the main loop has not turned for this long", LL_CONFIG_DURATION,      \
            LL_SEC, LL_HOUR                                                                                  \
    }

/* What a service's readiness needs besides a reachable database. */
typedef enum ll_obs_kind {
    LL_OBS_CONSUMER = 0, /* a Kafka consumer: partitions assigned, producer not fenced */
    LL_OBS_PRODUCER,     /* dispatcher: producer not fenced */
    LL_OBS_PLAIN         /* sweeper: the database only */
} ll_obs_kind;

/*
 * Sets up the registry for `service` and, when http.listen is set, starts the HTTP server (its
 * own thread, bounded connections and timeouts). 0, or -1 with err (a bad http.listen or
 * http.stall_after, a port in use). Call once, before the main loop; ll_obs_stop at the end.
 */
int ll_obs_start(const char *service, ll_obs_kind kind, const ll_config *cfg, char *err, size_t errlen);
/* Stops the HTTP server and frees the registry. */
void ll_obs_stop(void);
/* The HTTP server's port (the one bound for port 0), or 0 when none runs. */
int ll_obs_port(void);

/* The main loop turned (health); db_ok: its database connection is up (readiness). */
void ll_obs_turn(int db_ok);
/* The consumer's assignment changed: n partitions now (0 on revocation). */
void ll_obs_assigned(int n);
/* The producer was fenced or hit a fatal error: not ready any more. */
void ll_obs_fenced(void);
/* The ledger's schema is not one this build runs on (schema_gate.h): /readyz answers 503 with
 * `schema: <reason>` in its body while reason is set; NULL (or "") clears it. The text is copied
 * (at most 400 bytes kept). Callable before ll_obs_start (then kept for it). */
void ll_obs_schema(const char *reason);
/* Offsets read again after an assignment or a rewind because one side's position was behind the
 * other's (behind: "ledger" = the database lost commits, "kafka" = a Kafka commit was lost). */
void ll_obs_reread(const char *behind, int64_t offsets);
/* The sweeper's rules wait (1) or act (0): loadledger_sweeper_waiting (services/sweeper/gate.c). */
void ll_obs_sweeper_waiting(int waiting);
/* A position write or check found the ledger's read position not the one this instance last read
 * or wrote (position.c; docs/design.md §5): counted in loadledger_position_conflicts_total. */
void ll_obs_position_conflict(void);
/* The input offsets the broker no longer holds below (or past) this instance's positions, over
 * its stopped partitions (partition.c): loadledger_unreadable_offsets; 0 once every gap was
 * accepted by an operator. */
void ll_obs_unreadable(int64_t offsets);
/* One schema registry lookup of a writer schema id that asked the registry (not from its cache nor
 * answered by its backoff): result "ok", "not_found", "unavailable" or "invalid" (registry.h). */
void ll_obs_registry(const char *result);
/* An input applied again after the database lost it, whose answer Kafka's commit already held:
 * not answered a second time (counted at the database commit; docs/design.md §5). */
void ll_obs_answer_withheld(void);

/* The outcome ("ACCEPTED", ...) and code ("" when none) of a reply record, sanitised to the
 * bounded label sets, into the given buffers (outcome >= 16 bytes, code >= 48 bytes). */
void ll_obs_reply_labels(const json_t *reply, char *outcome, size_t olen, char *code, size_t clen);
/* Counts n replies to inputs of topic with outcome and code ("" when none) in
 * loadledger_inputs_total, or n dead letters of inputs of topic with code in
 * loadledger_dead_letters_total. The loop calls them when the Kafka transaction that carries the
 * records commits (the labels travel on the staged records, commit.c), so the counts match
 * what a read_committed reader sees and a transaction that aborts is not counted. */
void ll_obs_inputs(const char *topic, const char *outcome, const char *code, size_t n);
void ll_obs_dead_letters(const char *topic, const char *code, size_t n);

/* One poll batch of n messages (n > 0). */
void ll_obs_batch(size_t n);
/* Messages held now (all partitions), the distinct runs they belong to, and of those messages the
 * ones answered before the database lost their effect, waiting for their prerequisite's re-read
 * (loop.reapplied_wait; docs/design.md §5). */
void ll_obs_held(size_t msgs, size_t runs, size_t answered);
/* The wait of the oldest held message that waits for a prerequisite (not one answered before a
 * database loss, which waits loop.reapplied_wait instead), seconds since its run's first deferral
 * on its partition (0 when none), next to the configured loop.prerequisite_wait (seconds):
 * loadledger_held_oldest_wait_seconds and loadledger_prerequisite_wait_seconds, so that an alert
 * compares them without knowing the setting. */
void ll_obs_held_wait(double oldest_s, double prereq_wait_s);
/* Durations of a database COMMIT and of a Kafka commit (send offsets + commit), in seconds. */
void ll_obs_db_commit(double seconds);
void ll_obs_kafka_commit(double seconds);
/* A fresh lag sample begins: the lag gauges are emptied (revoked partitions disappear). */
void ll_obs_lag_begin(void);
/* The consumer lag of one assigned partition (messages). */
void ll_obs_lag_set(const char *topic, int32_t partition, int64_t lag);
/* The dispatcher's outbox: PENDING rows and the age of the oldest (seconds; 0 when none). */
void ll_obs_outbox(double pending, double oldest_age_s);
/* The dispatcher settled n rows with result "sent", "retried" or "dead". */
void ll_obs_dispatch(const char *result, long n);
/* The sweeper's rule acted n times with action (e.g. "stale_partitions", "reissue_partition"). */
void ll_obs_sweep(const char *rule, const char *action, long n);
/* The sweeper's gauges of the ledger's state (docs/design.md §12, "The sweeper's view"), set from
 * one statement per tick: the runs in one non-terminal status (CREATED ... PUBLISH_UNKNOWN) and
 * the seconds since the least recently active of them progressed (heartbeat_at; 0 when none). */
void ll_obs_ledger_runs(const char *status, double runs, double idle_s);
/* The sweeper's gauge of DEAD outbox rows of dispatch type (VALIDATE_RUN, REISSUE_PARTITION)
 * whose run is still active. */
void ll_obs_ledger_dead_dispatches(const char *type, double n);

/* The sweeper saw a run end (sweeper/runs_ended.c): status its terminal status (else counted as
 * OTHER), job its job_key (label load_job, capped by ll_obs_job_label; the label is not `job`,
 * which Prometheus gives the scrape target), duration_s completed_at - started_at in seconds:
 * loadledger_runs_ended_total{status,load_job} += 1 and loadledger_run_duration_seconds{load_job}
 * observes duration_s. The strings are copied. */
void ll_obs_run_ended(const char *status, const char *job, double duration_s);
/* The consumer-group lag read from the broker (sweeper/lag.c): a fresh reading begins (the
 * series are emptied, so a group or partition that went away disappears), then one value per
 * group/topic/partition (messages between the group's committed offset and the partition's end).
 * ll_obs_group_lag_read marks the end of a reading: ok 1 when every group answered (the gauge
 * loadledger_group_lag_read_ok; the timestamp of the last good reading in
 * loadledger_group_lag_read_timestamp_seconds). */
void ll_obs_group_lag_begin(void);
void ll_obs_group_lag_set(const char *group, const char *topic, int32_t partition, int64_t lag);
void ll_obs_group_lag_read(int ok);

/* ---- pure parts (unit-tested; obs_pure.c, with ll_obs_reply_labels) --------------------------- */

/* One partition of a librdkafka statistics document (borrowed for the callback's duration). */
typedef struct ll_obs_part_stats {
    const char *topic;
    int32_t partition;
    int64_t end; /* the last stable offset (read_committed), else the high watermark */
    int64_t lo;  /* the log start offset, -1 when unknown */
} ll_obs_part_stats;
/* Called once per partition this consumer fetches. */
typedef void (*ll_obs_lag_fn)(void *arg, const ll_obs_part_stats *p);
/* Reads every partition of a librdkafka statistics document (statistics.interval.ms) that this
 * consumer fetches (desired, a real partition, a known end offset). Number of partitions
 * reported, or -1 when the document does not parse. librdkafka's own consumer_lag is not used:
 * it counts from the consumer's commits, and the loop commits through its producer's
 * transaction, which the consumer's statistics never see. */
int ll_obs_lag_parse(const char *json, size_t len, ll_obs_lag_fn fn, void *arg);
/* The lag of a partition: end - max(committed, lo) (messages not yet done), at least 0; committed
 * is the loop's own first offset not done. */
int64_t ll_obs_lag(int64_t end, int64_t committed, int64_t lo);
/* 1 when s is a label value of the code set: [A-Z0-9_]{1,40}. */
int ll_obs_code_ok(const char *s);
/* A label value as a small number, to keep with each staged record (commit.c): the outcome
 * of a reply (ACCEPTED 0, REPLAY 1, REJECTED 2, anything else 3 = OTHER), and a code (0 = "", a
 * code of codes.h its place in the table + 1, anything else the id of OTHER). The names back:
 * static strings. Pure. */
uint8_t ll_obs_outcome_id(const char *outcome);
const char *ll_obs_outcome_name(uint8_t id);
uint16_t ll_obs_code_id(const char *code);
const char *ll_obs_code_name(uint16_t id);
/* The bound of the load_job label of the runs ended (obs.h, "Label bounds"). */
#define LL_OBS_MAX_JOBS 32
/* The bounds of the broker's consumer-group lag (sweeper/lag.c). */
#define LL_OBS_MAX_GROUPS       16
#define LL_OBS_GROUP_LAG_SERIES 1024
/* The first job keys seen (at most LL_OBS_MAX_JOBS, copied, NUL-terminated, at most 79 bytes). */
typedef struct ll_obs_jobs {
    char name[LL_OBS_MAX_JOBS][80];
    size_t n;
} ll_obs_jobs;
/* The load_job label of job: itself when it is one of the first LL_OBS_MAX_JOBS distinct job keys
 * seen by t (it is added when there is room), "_other" when it is a later one, or empty/NULL, or
 * longer than 79 bytes. Borrowed: t's copy or a static string. Pure. */
const char *ll_obs_job_label(ll_obs_jobs *t, const char *job);
/* The status label of a run ended: status when it is one of the terminal statuses
 * (LL_SQL_RUN_TERMINAL: SUCCESS, FAILED_*, TIMED_OUT), else "OTHER". Static. Pure. */
const char *ll_obs_end_status(const char *status);
/* The sweeper's watermark of the runs ended (sweeper/runs_ended.c) after one page of n rows of a
 * statement limited to `limit` rows read up to hi: a full page moves it to its last row (last_at,
 * last_id: that row's completed_at text and run_id), for the next page to read on from there; a
 * page not full read everything up to hi, so it moves to (hi, the largest uuid). Writes at_out
 * (at_len bytes) and id_out (id_len bytes; >= 37). Pure. */
void ll_obs_ended_next(int n, int limit, const char *last_at, const char *last_id, const char *hi,
                       char *at_out, size_t at_len, char *id_out, size_t id_len);
/* /healthz: 200 when the loop turned within stall_ms before now_ms (last 0: never), else 503. */
int ll_obs_health_status(int64_t last_turn_ms, int64_t now_ms, int64_t stall_ms);
/* /readyz: 200 when the database is up, a consumer has partitions, the producer is not fenced;
 * else 503. */
int ll_obs_ready_status(ll_obs_kind kind, int db_ok, int assigned, int fenced);

#endif
