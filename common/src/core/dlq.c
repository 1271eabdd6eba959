/*
 * dlq.c - planning a dead-letter record that always fits (dlq.h).
 */
#include "ll/dlq.h"

#include <openssl/evp.h>
#include <stdio.h>

/* The record's size in bytes with the chosen parts, as the producer and broker count it (plus
 * the framing allowance). */
static size_t record_size(const ll_dlq_fit *f, size_t key_len, size_t value_len, size_t headers_len,
                          size_t own_headers_len)
{
    return (f->keep_key ? key_len : 0) + (f->keep_value ? value_len : 0) +
           (f->keep_headers ? headers_len : 0) + own_headers_len + LL_DLQ_OVERHEAD;
}

int ll_dlq_fit_decide(size_t key_len, size_t value_len, size_t headers_len, size_t own_headers_len,
                      size_t limit, ll_dlq_fit *out)
{
    /* in the order the parts are given up: the value, then the original headers, then the key */
    static const ll_dlq_fit tries[] = {
        {true, true, true}, {false, true, true}, {false, false, true}, {false, false, false}};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++)
        if (record_size(&tries[i], key_len, value_len, headers_len, own_headers_len) <= limit) {
            *out = tries[i];
            return 0;
        }
    *out = tries[3];
    return -1;
}

int ll_dlq_limits_check(int64_t max_message_bytes, int64_t producer_max, int64_t topic_max, char *err,
                        size_t errlen)
{
    int64_t limit = producer_max < topic_max ? producer_max : topic_max;
    if (max_message_bytes + LL_DLQ_HEADROOM <= limit)
        return 0;
    snprintf(
        err, errlen,
        "loop.max_message_bytes (%lld) cannot be dead-lettered whole: it needs %d bytes of headroom under "
        "min(kafka.message.max.bytes = %lld, loop.dead_letter_max_bytes = %lld); lower it or raise both",
        (long long)max_message_bytes, LL_DLQ_HEADROOM, (long long)producer_max, (long long)topic_max);
    return -1;
}

void ll_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    static const char hex[] = "0123456789abcdef";
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1)
        n = 0;
    for (unsigned int i = 0; i < n && i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[n < 32 ? 2 * n : 64] = '\0';
}
