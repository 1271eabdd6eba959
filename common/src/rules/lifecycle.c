/*
 * lifecycle.c - where a run is on its forward path (docs/contract.md §3.1), and the validation gate of
 * /stage-validated and /success (docs/contract.md §3.5). Pure functions.
 */
#include <string.h>

#include "ll/rules.h"

bool ll_run_may_reach(ll_run_status current, ll_run_status target)
{
    int c = ll_run_status_rank(current), t = ll_run_status_rank(target);
    return c >= 0 && t >= 0 && c < t;
}

bool ll_run_should_wait(ll_run_status current, ll_run_status needed, bool wait_expired)
{
    return !wait_expired && ll_run_may_reach(current, needed);
}

bool ll_is_metric_result(const char *s)
{
    return s && (strcmp(s, "PASS") == 0 || strcmp(s, "FAIL") == 0 || strcmp(s, "WARN") == 0);
}

int ll_validation_gate(const char *const *names, const char *const *results, size_t n, ll_strlist *out)
{
    if (n == 0)
        return ll_strlist_addf(out, "NO_METRICS") == 0 ? 1 : -1;
    int blocked = 0;
    for (size_t i = 0; i < n; i++) {
        if (results[i] && strcmp(results[i], "FAIL") == 0) {
            if (ll_strlist_addf(out, "FAIL %s", names[i]) != 0)
                return -1;
            blocked++;
        }
    }
    return blocked;
}

int ll_metric_count(const char *actual, int64_t *out)
{
    size_t n = actual ? strlen(actual) : 0;
    if (n == 0 || n > 18)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (actual[i] < '0' || actual[i] > '9')
            return -1;
        v = v * 10 + (actual[i] - '0');
    }
    *out = v;
    return 0;
}
