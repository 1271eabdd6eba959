/*
 * sweeper.h - what nobody asks for (docs/contract.md §7): stale partitions, the run deadline,
 * unacknowledged dispatches, stalled validation alerts, stalled publishes. One tick is one
 * transaction under a transaction-scoped advisory lock, so one sweeper acts at a time; each
 * rule runs in its own savepoint and is a set of conditional statements with an event per row.
 */
#ifndef SWEEPER_H
#define SWEEPER_H

#include <stdint.h>

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
        abandon_dispatch, stale_alert, publish_unknown;
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

/* The rules, each inside the tick's transaction (rule_*.c). Return LL_DB_OK or LL_DB_ERROR. */
ll_db_rc rule_stale_partitions(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_run_deadline(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_unacked_dispatches(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_stale_alerts(ll_db *db, const sweep_settings *s, sweep_counts *c);
ll_db_rc rule_stalled_publish(ll_db *db, const sweep_settings *s, sweep_counts *c);

/* Times out a run and its unfinished partitions (rules 1 and 2). */
ll_db_rc sweep_timeout_run(ll_db *db, const char *run_id, const char *reason, const char *message,
                           json_t *details);

/* Milliseconds as the text of a PostgreSQL interval parameter ("1500 milliseconds"). */
void sweep_interval_text(int64_t ms, char *out, size_t outlen);

#endif
