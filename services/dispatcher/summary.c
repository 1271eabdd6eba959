/*
 * summary.c - the dispatcher's dispatch_summary log line (dispatcher.h; docs/operations.md,
 * "Versions and logs"): a row delivered is logged at debug only (dispatch_sent), its count goes
 * to loadledger_dispatches_total, and one info line at most every dispatch.log_summary says how
 * many rows were sent, retried and made DEAD since the previous one.
 */
#include "dispatcher.h"

#include "ll/log.h"

void summary_add(dispatch_summary *t, long sent, long retried, long dead)
{
    t->sent += sent;
    t->retried += retried;
    t->dead += dead;
}

bool summary_due(const dispatch_summary *t, int64_t now_ms, int64_t every_ms)
{
    return every_ms > 0 && now_ms - t->since_ms >= every_ms && (t->sent || t->retried || t->dead);
}

void summary_log(dispatch_summary *t, int64_t now_ms)
{
    if (t->sent || t->retried || t->dead) {
        long long secs = (long long)((now_ms - t->since_ms + 500) / 1000);
        ll_log_json(LL_INFO, NULL, "dispatch_summary",
                    json_pack("{s:I,s:I,s:I,s:I}", "sent", (json_int_t)t->sent, "retried",
                              (json_int_t)t->retried, "dead", (json_int_t)t->dead, "seconds",
                              (json_int_t)secs),
                    "%ld sent, %ld retried, %ld dead in the last %lld s", t->sent, t->retried, t->dead, secs);
    }
    *t = (dispatch_summary){now_ms, 0, 0, 0};
}
