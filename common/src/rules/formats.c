/*
 * formats.c - the shared input formats of the contract, checked by hand (no regex library).
 *
 * docs/contract.md §4.3 (JobKey, BusinessKey, PartitionId, DecimalStr, TablePrefix, HdfsPath), §4.1
 * (identifiers in paths are UUIDs; metric names), and the "chars" of ShortText/Message, which
 * count Unicode code points. Character classes are ASCII and locale-independent on purpose:
 * <ctype.h> would follow the process locale. Every check takes NULL as "does not match".
 */
#include "ll/rules.h"

#include <string.h>

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}
static bool is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}
static bool is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}
static bool is_alnum(unsigned char c)
{
    return is_digit(c) || is_upper(c) || is_lower(c);
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* [A-Z0-9_] */
static bool job_char(unsigned char c)
{
    return is_upper(c) || is_digit(c) || c == '_';
}
/* [A-Za-z0-9_] */
static bool word_char(unsigned char c)
{
    return is_alnum(c) || c == '_';
}
/* [0-9A-Za-z_.:\-] (business keys and metric names) */
static bool key_char(unsigned char c)
{
    return word_char(c) || c == '.' || c == ':' || c == '-';
}
/* [A-Za-z0-9_.=/\-] */
static bool path_char(unsigned char c)
{
    return word_char(c) || c == '.' || c == '=' || c == '/' || c == '-';
}

/* True when s is min..max bytes long and every byte satisfies ok. */
static bool all_of(const char *s, size_t min, size_t max, bool (*ok)(unsigned char))
{
    if (s == NULL)
        return false;
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= max || !ok((unsigned char)s[n]))
            return false;
    return n >= min;
}

/* §4.3 JobKey ^[A-Z0-9_]{1,200}$. */
bool ll_is_job_key(const char *s)
{
    return all_of(s, 1, 200, job_char);
}

/* §4.3 BusinessKey ^[0-9A-Za-z_.:\-]{1,200}$. */
bool ll_is_business_key(const char *s)
{
    return all_of(s, 1, 200, key_char);
}

/* §4.3 PartitionId ^([0-9]{4}|NULL)$. */
bool ll_is_partition_id(const char *s)
{
    return s != NULL && (strcmp(s, "NULL") == 0 || all_of(s, 4, 4, is_digit));
}

/* §4.3 DecimalStr ^-?[0-9]{1,38}$ ("-0" and leading zeros match; at most 38 digits). */
bool ll_is_decimal_str(const char *s)
{
    if (s == NULL)
        return false;
    return all_of(s[0] == '-' ? s + 1 : s, 1, 38, is_digit);
}

/* §4.3 TablePrefix ^[A-Za-z_][A-Za-z0-9_]{0,60}$. */
bool ll_is_table_prefix(const char *s)
{
    if (s == NULL || !(is_upper((unsigned char)s[0]) || is_lower((unsigned char)s[0]) || s[0] == '_'))
        return false;
    return all_of(s + 1, 0, 60, word_char);
}

/* §4.3 HdfsPath ^/[A-Za-z0-9_.=/\-]{1,1499}$ (2..1500 bytes, absolute). */
bool ll_is_hdfs_path(const char *s)
{
    return s != NULL && s[0] == '/' && all_of(s + 1, 1, 1499, path_char);
}

/* Metric names ^[A-Za-z0-9_.:\-]{1,150}$ (§5.8). */
bool ll_is_metric_name(const char *s)
{
    return all_of(s, 1, 150, key_char);
}

/* 8-4-4-4-12 hex digits, either case (mixed allowed), nothing before or after. */
bool ll_is_uuid(const char *s)
{
    if (s == NULL)
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !is_hex((unsigned char)s[i]))
            return false; /* also stops at a NUL before 36 */
    }
    return s[36] == '\0';
}

/* Lower-cases a UUID into out[37]. Returns 0, or -1 (out untouched) if s is not a UUID. */
int ll_uuid_canonical(const char *s, char out[37])
{
    if (!ll_is_uuid(s) || out == NULL)
        return -1;
    for (size_t i = 0; i < 36; i++)
        out[i] = is_upper((unsigned char)s[i]) ? (char)(s[i] - 'A' + 'a') : s[i];
    out[36] = '\0';
    return 0;
}

/* True when a and b are both UUIDs naming the same value (case-insensitive). NULL is never equal. */
bool ll_uuid_equal(const char *a, const char *b)
{
    char ca[37], cb[37];
    if (ll_uuid_canonical(a, ca) != 0 || ll_uuid_canonical(b, cb) != 0)
        return false;
    return memcmp(ca, cb, 36) == 0;
}

/*
 * Length in bytes of the valid UTF-8 sequence at p (1..4), or 0 if invalid: overlong forms,
 * surrogates (U+D800..DFFF) and values above U+10FFFF are rejected, as Python's decoder does.
 */
static size_t utf8_seq_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0; /* a NUL terminator also fails here, so we never read past it */
    return n;
}

/* Code points in s (the contract's "chars", e.g. Message ≤ 2000); -1 for NULL or invalid UTF-8. */
long ll_utf8_chars(const char *s)
{
    if (s == NULL)
        return -1;
    const unsigned char *p = (const unsigned char *)s;
    long chars = 0;
    while (*p != '\0') {
        size_t n = utf8_seq_len(p);
        if (n == 0)
            return -1;
        p += n;
        chars++;
    }
    return chars;
}
