/*
 * dispatch.c - outbox delivery decisions: how long to back off, and what a send's result means.
 *
 * docs/contract.md §6 ("Backoff" and the "Outcome handling" table; §12 records that 408/425/429 are
 * retried and that the backoff exponent is attempt-1). The dispatcher leases a row (attempt
 * count + 1), sends it, and then asks ll_dispatch_classify what to write; for a RETRY it waits
 * ll_dispatch_backoff_ms before the row is due again.
 */
#include "ll/rules.h"

/*
 * §6: backoff_min_ms × 2^(attempt−1), at most backoff_max_ms (milliseconds). attempt < 1 counts
 * as 1 and the exponent stops at 30, so 5 s/300 s give 5, 10, 20, 40, 80, 160, 300, 300 ... s.
 * Negative bounds count as 0. Never overflows: a product beyond INT64_MAX is capped by max.
 */
int64_t ll_dispatch_backoff_ms(int attempt, int64_t backoff_min_ms, int64_t backoff_max_ms)
{
    int64_t lo = backoff_min_ms > 0 ? backoff_min_ms : 0;
    int64_t hi = backoff_max_ms > 0 ? backoff_max_ms : 0;
    int shift = attempt <= 1 ? 0 : (attempt - 1 > 30 ? 30 : attempt - 1);
    int64_t delay = lo > (INT64_MAX >> shift) ? INT64_MAX : lo * ((int64_t)1 << shift);
    return delay < hi ? delay : hi;
}

/* 4xx codes that a proxy or rate limiter answers transiently (§6, §12). */
static bool retryable_4xx(int http_status)
{
    return http_status == 408 || http_status == 425 || http_status == 429;
}

/* §6: 2xx is delivered. */
bool ll_dispatch_delivered(int http_status)
{
    return http_status >= 200 && http_status <= 299;
}

/* §6, §12: a 4xx answer is the receiver's final word, except the three a proxy or rate limiter
 * answers transiently. */
bool ll_dispatch_status_permanent(int http_status)
{
    return http_status >= 400 && http_status <= 499 && !retryable_4xx(http_status);
}

/*
 * §6 outcome table. http_status is the receiver's HTTP status, 0 for a transport error (a Kafka
 * sink: 200 delivered, 0 failed); attempt is the leased attempt_count (already incremented).
 *   2xx                         -> SENT
 *   4xx except 408, 425, 429    -> DEAD (permanent)
 *   anything else (0, 1xx, 3xx, 408, 425, 429, 5xx, ...) -> RETRY, or DEAD once
 *                                  attempt >= max_attempts
 */
ll_send_outcome ll_dispatch_classify(int http_status, int attempt, int max_attempts)
{
    if (ll_dispatch_delivered(http_status))
        return LL_SEND_SENT;
    if (ll_dispatch_status_permanent(http_status))
        return LL_SEND_DEAD;
    return ll_dispatch_ack_timeout(attempt, max_attempts);
}

/* §6, §7.3: the attempts are used up once attempt_count reached dispatch.max_attempts. */
ll_send_outcome ll_dispatch_ack_timeout(int attempts, int max_attempts)
{
    return attempts >= max_attempts ? LL_SEND_DEAD : LL_SEND_RETRY;
}
