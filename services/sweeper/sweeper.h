/*
 * sweeper.h - what nobody asks for (docs/contract.md §7): stale partitions, the run deadline,
 * the unfinished partitions of ended runs, unacknowledged dispatches, stalled validation alerts,
 * stalled publishes. One tick is one
 * transaction under a transaction-scoped advisory lock, so one sweeper acts at a time; each
 * rule runs in its own savepoint and is a set of conditional statements with an event per row.
 */
#ifndef SWEEPER_H
#define SWEEPER_H

#include <stdint.h>

#include "ll/config.h"
#include "ll/db.h"
#include "ll/rules.h"

/* Settings of docs/contract.md §9 (recovery.*, dispatch.*): durations in ms, with their configured text
 * for messages such as "no publish result within PT2H". */
typedef struct sweep_settings {
    int64_t stale_ms, run_timeout_ms, validation_stale_ms, publish_stale_ms, ack_timeout_ms;
    int64_t start_grace_ms, reread_window_ms; /* the gate's (gate.c) */
    int64_t interval_ms;
    int max_attempts, dispatch_max_attempts;
    ll_recovery_mode mode;
    const char *run_timeout_text, *publish_stale_text;
} sweep_settings;

/* Counts of one tick, by rule (docs/contract.md §7 result map). */
typedef struct sweep_counts {
    long reissue_partition, timeout_stale_partition, timeout_run_deadline, requeue_dispatch, dead_dispatch,
        abandon_dispatch, stale_alert, publish_unknown, timeout_ended_partition;
} sweep_counts;

/* Whether the rules may act in a tick (gate.c; docs/design.md §5, "The sweeper waits for the
 * re-read"): private to gate.c. */
typedef struct sweep_gate sweep_gate;

/* A gate for this sweeper instance (instance_id copied: its row in nifi_ops.sweeper_instance),
 * closed for grace_ms (recovery.start_grace) from now, reading the detected losses of the last
 * window_ms (recovery.reread_window). NULL when out of memory; free with sweep_gate_free. */
sweep_gate *sweep_gate_new(const char *instance_id, int64_t grace_ms, int64_t window_ms);
void sweep_gate_free(sweep_gate *g);
/* Inside the tick's transaction, after its lock: writes this tick's token (the grace starts again
 * when the row did not hold the last committed one, or the connection is new), then 1 when the
 * rules may act, 0 when they wait (the reason logged when it changes; the gauge
 * loadledger_sweeper_waiting), -1 with db->err. */
int sweep_gate_open(sweep_gate *g, ll_db *db);
/* After the tick's transaction: committed (its token is what the next tick expects), or undone. */
void sweep_gate_committed(sweep_gate *g);
void sweep_gate_undone(sweep_gate *g);

/* Runs one tick: false in *acted when another sweeper held the lock; the rules run only when the
 * gate is open (their counts zero otherwise). LL_DB_OK or an error. */
ll_db_rc sweep_tick(ll_db *db, const sweep_settings *s, sweep_gate *gate, sweep_counts *c, bool *acted);

/* Sets the gauges of the ledger's state (runs by non-terminal status and their idle age, DEAD
 * dispatches of active runs; obs.h) from one read-only statement (gauges.c). Called after every
 * tick by every sweeper, lock or not. LL_DB_OK or an error (the gauges keep their last values). */
ll_db_rc sweep_gauges(ll_db *db);

/* The runs ended (runs_ended.c; obs.h ll_obs_run_ended): the watermark of one sweeper process,
 * private to runs_ended.c. */
typedef struct sweep_ended sweep_ended;
/* A watermark set at the first read to the database's clock minus settle_ms
 * (metrics.runs_ended_settle): only runs that end from then on are counted. NULL when out of
 * memory; free with sweep_ended_free (NULL is a no-op). */
sweep_ended *sweep_ended_new(int64_t settle_ms);
void sweep_ended_free(sweep_ended *e);
/* Counts the runs ended past the watermark up to the settle before now, at most 5000 a call (the
 * rest at the next), in one read-only transaction through ix_load_run_completed; the watermark
 * moves past what was counted. LL_DB_OK or an error (what was not counted is read again). */
ll_db_rc sweep_runs_ended(ll_db *db, sweep_ended *e);

/* The consumer-group lag from the broker (lag.c; obs.h ll_obs_group_lag_*), private to lag.c. */
typedef struct sweep_lag sweep_lag;
/* A reader of the groups' lag configured from cfg's kafka.* keys (group.id, transactional.id and
 * group.instance.id ignored: it never joins a group nor commits) and lag.groups; each broker
 * request waits at most timeout_ms (lag.timeout). NULL with err "" when kafka.bootstrap.servers is
 * not set (no lag is exported), NULL with err when librdkafka refuses a setting. Free with
 * sweep_lag_free (NULL is a no-op). */
sweep_lag *sweep_lag_new(const ll_config *cfg, int64_t timeout_ms, char *err, size_t errlen);
void sweep_lag_free(sweep_lag *s);
/* One reading of every group's lag into the metrics, bounded by 4 x timeout_ms (lag.c). s NULL is a
 * no-op. */
void sweep_lag_read(sweep_lag *s);

/* The rules, each inside the tick's transaction (rule_*.c). Return LL_DB_OK or LL_DB_ERROR. */
ll_db_rc rule_stale_partitions(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_run_deadline(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_unacked_dispatches(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_stale_alerts(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_stalled_publish(ll_db *db, const sweep_settings *s, sweep_counts *c);
/* docs/contract.md §7.6: the unfinished partitions of runs ended FAILED_* or TIMED_OUT, silent for
 * recovery.stale, -> TIMED_OUT (RUN_ENDED); the runs of at most 100 stale partitions and 100 ended
 * runs a tick (rule_ended.c). */
ll_db_rc rule_ended_partitions(ll_db *db, const sweep_settings *s, sweep_counts *c);

/* Times out a run and its unfinished partitions (rules 1 and 2). */
ll_db_rc sweep_timeout_run(ll_db *db, const char *run_id, const char *reason, const char *message,
                           json_t *details);

/* Milliseconds as the text of a PostgreSQL interval parameter ("1500 milliseconds"). */
void sweep_interval_text(int64_t ms, char *out, size_t outlen);

#endif
