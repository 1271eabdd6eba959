/*
 * gate.c - reads the stored metrics of one stage and applies the gate of docs/contract.md §3.5
 * (ll_validation_gate): never a verdict sent with a request, always what the ledger holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/rules.h"

/* Every query version of the stage; the newest measurement first for the count metric. */
static const ll_stmt ST_STAGE_METRICS = {
    "gate_stage_metrics",
    "SELECT metric_name, result, actual_value FROM nifi_ops.load_validation"
    " WHERE run_id = $1::uuid AND stage = $2 ORDER BY metric_name, measured_at DESC",
    2};

ll_db_rc read_gate(ll_db *db, const char *run_id, const char *stage, const char *count_metric,
                   ll_strlist *reasons, int64_t *count, size_t *n_metrics)
{
    const char *p[2] = {run_id, stage};
    PGresult *r = ll_db_exec(db, &ST_STAGE_METRICS, p);
    if (!r)
        return LL_DB_ERROR;
    size_t n = (size_t)PQntuples(r);
    *n_metrics = n;
    const char **names = calloc(n ? n : 1, sizeof *names);
    const char **results = calloc(n ? n : 1, sizeof *results);
    *count = -1;
    for (size_t i = 0; i < n; i++) {
        names[i] = PQgetvalue(r, (int)i, 0);
        results[i] = PQgetvalue(r, (int)i, 1);
        int64_t c;
        if (*count < 0 && strcmp(names[i], count_metric) == 0 &&
            ll_metric_count(ll_db_text(r, (int)i, 2), &c) == 0)
            *count = c;
    }
    int rc = ll_validation_gate(names, results, n, reasons);
    free(names);
    free(results);
    PQclear(r);
    return rc < 0 ? LL_DB_ERROR : LL_DB_OK;
}

json_t *reasons_json(const ll_strlist *reasons)
{
    json_t *a = json_array();
    for (size_t i = 0; i < reasons->n; i++)
        json_array_append_new(a, json_string(reasons->items[i]));
    return a;
}

ll_db_rc gated_move(ll_db *db, const char *run_id, const gated_step *g, int64_t count_override,
                    ll_strlist *reasons, bool *passed, bool *none)
{
    int64_t metric = -1;
    size_t n = 0;
    *passed = false;
    if (read_gate(db, run_id, g->stage, g->count_metric, reasons, &metric, &n) != LL_DB_OK)
        return LL_DB_ERROR;
    *none = n == 0;
    if (reasons->n > 0)
        return LL_DB_OK;
    int64_t count = count_override >= 0 ? count_override : metric;
    char c[24];
    snprintf(c, sizeof c, "%lld", (long long)count);
    const char *p[2] = {run_id, count >= 0 ? c : NULL};
    ll_event ev = {
        .name = g->event, .level = "INFO", .run_id = run_id, .chunk_index = -1, .row_count = count};
    if (ll_db_exec_discard(db, g->cas, p) != LL_DB_OK || ll_event_insert(db, &ev) != LL_DB_OK)
        return LL_DB_ERROR;
    *passed = true;
    return LL_DB_OK;
}

ll_apply gated_verdict(ll_db *db, const ll_msg *m, const char *run_id, const gated_step *g,
                       int64_t count_override, gate_reply_fn passed_reply, gate_reply_fn blocked,
                       ll_apply_out *out)
{
    ll_strlist reasons = {0};
    bool passed = false, none = false;
    ll_db_rc rc = gated_move(db, run_id, g, count_override, &reasons, &passed, &none);
    ll_apply a;
    if (rc != LL_DB_OK) {
        a = ll_apply_of_db(rc);
    } else if (!passed && none && !m->wait_expired) {
        snprintf(out->reason, sizeof out->reason, "no %s metric stored yet", g->stage);
        a = LL_APPLY_DEFER;
    } else {
        out->reply = passed ? passed_reply(m, run_id, NULL) : blocked(m, run_id, &reasons);
        a = passed ? LL_APPLY_COMMIT : LL_APPLY_ROLLBACK;
    }
    ll_strlist_clear(&reasons);
    return a;
}
