/*
 * redrive.c - the decisions of `loadctl redrive` (ll/redrive.h): coordinates, the link header,
 * the headers kept, and whether a dead letter may be redriven. No I/O.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ll/redrive.h"

/* Parses [p, end) as plain decimal digits up to max. Returns 0, or -1. */
static int digits(const char *p, const char *end, uint64_t max, uint64_t *out)
{
    if (p == end || end - p > 19)
        return -1;
    uint64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

int ll_coord_parse(const char *s, char *topic, size_t topic_len, int32_t *partition, int64_t *offset)
{
    if (!s)
        return -1;
    const char *b = strrchr(s, ':');
    if (!b || b == s)
        return -1;
    const char *a = b - 1;
    while (a > s && *a != ':')
        a--;
    if (a == s || *a != ':' || (size_t)(a - s) >= topic_len)
        return -1;
    uint64_t p, o;
    if (digits(a + 1, b, INT32_MAX, &p) != 0 || digits(b + 1, b + 1 + strlen(b + 1), INT64_MAX, &o) != 0)
        return -1;
    memcpy(topic, s, (size_t)(a - s));
    topic[a - s] = '\0';
    *partition = (int32_t)p;
    *offset = (int64_t)o;
    return 0;
}

int ll_redrive_link(const char *dlq_topic, int32_t partition, int64_t offset, char *out, size_t outlen)
{
    return snprintf(out, outlen, "%s/%" PRId32 "/%" PRId64, dlq_topic, partition, offset);
}

bool ll_redrive_keeps_header(const char *name)
{
    return name && strncmp(name, "ll.", 3) != 0;
}

ll_redrive_verdict ll_redrive_judge(bool linked, bool complete, bool force)
{
    if (force)
        return LL_REDRIVE_GO;
    if (linked)
        return LL_REDRIVE_ALREADY;
    return complete ? LL_REDRIVE_GO : LL_REDRIVE_UNCHECKED;
}
