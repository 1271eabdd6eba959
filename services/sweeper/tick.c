/*
 * tick.c - one sweeper tick (docs/contract.md §7): one transaction that first tries the advisory lock
 * on the text load_control_sweeper (held only by this transaction); then the gate (gate.c: no rule
 * acts while the ledger's lost inputs are not re-read); the rules in the fixed order, each in its
 * own savepoint so that a failing rule is rolled back alone and retried next tick.
 */
#include <stdio.h>

#include "ll/log.h"
#include "sweeper.h"

static const ll_stmt ST_TRY_LOCK = {"sweep_try_lock",
                                    "SELECT pg_try_advisory_xact_lock(hashtext('load_control_sweeper'))", 0};

typedef ll_db_rc (*rule_fn)(ll_db *db, const sweep_settings *s, sweep_counts *c);

static const struct {
    const char *name;
    rule_fn fn;
} RULES[] = {
    {"stale_partitions", rule_stale_partitions}, {"run_deadline", rule_run_deadline},
    {"ended_partitions", rule_ended_partitions}, {"unacked_dispatches", rule_unacked_dispatches},
    {"stale_alerts", rule_stale_alerts},         {"stalled_publish", rule_stalled_publish},
};

void sweep_interval_text(int64_t ms, char *out, size_t outlen)
{
    snprintf(out, outlen, "%lld milliseconds", (long long)ms);
}

struct tick_arg {
    const sweep_settings *s;
    sweep_gate *gate;
    sweep_counts *c;
    bool *acted;
};

static ll_db_rc tick_tx(ll_db *db, void *arg)
{
    struct tick_arg *a = arg;
    *a->c = (sweep_counts){0};
    PGresult *r = ll_db_exec(db, &ST_TRY_LOCK, NULL);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    *a->acted = ll_db_bool(r, 0, 0);
    PQclear(r);
    if (!*a->acted)
        return LL_DB_ROLLBACK;
    int open = sweep_gate_open(a->gate, db);
    if (open < 0)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    if (!open)
        return LL_DB_OK; /* its token committed, no rule run */
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++) {
        if (ll_db_command(db, "SAVEPOINT sweeper_rule") != LL_DB_OK)
            return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
        if (RULES[i].fn(db, a->s, a->c) != LL_DB_OK) {
            if (ll_db_err_is_unavailable(db))
                return LL_DB_UNAVAILABLE;
            ll_log(LL_ERROR, NULL, "sweeper_rule_error", "rule %s rolled back: %s %s", RULES[i].name,
                   db->err.sqlstate, db->err.message);
            if (ll_db_command(db, "ROLLBACK TO SAVEPOINT sweeper_rule") != LL_DB_OK)
                return LL_DB_ERROR;
        }
        if (ll_db_command(db, "RELEASE SAVEPOINT sweeper_rule") != LL_DB_OK)
            return LL_DB_ERROR;
    }
    return LL_DB_OK;
}

ll_db_rc sweep_tick(ll_db *db, const sweep_settings *s, sweep_gate *gate, sweep_counts *c, bool *acted)
{
    struct tick_arg a = {s, gate, c, acted};
    *acted = false;
    *c = (sweep_counts){0};
    ll_db_rc rc = ll_db_transaction(db, tick_tx, &a);
    if (rc == LL_DB_OK && *acted)
        sweep_gate_committed(gate);
    else
        sweep_gate_undone(gate);
    return rc == LL_DB_ROLLBACK ? LL_DB_OK : rc;
}
