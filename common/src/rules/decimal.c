/*
 * decimal.c - numeric comparison of DecimalStr values without converting them.
 *
 * SCNs and split bounds are Oracle NUMBERs of up to 38 digits (docs/contract.md §1 "SCN", §4.3
 * DecimalStr), beyond any C integer type, so they are compared as digit strings: sign, then
 * the count of significant digits, then the digits. "-0", "0" and "000" are all zero, as
 * Python's Decimal (the reference's type) has them. Used by the manifest invariants (§5.2).
 */
#include "ll/rules.h"

#include <string.h>

/* A decimal string seen as sign and significant digits (no leading zeros). */
typedef struct dec_view {
    bool negative;      /* false for any zero, whatever its sign */
    const char *digits; /* first significant digit */
    size_t len;         /* significant digits; 0 for zero */
} dec_view;

/* Reads an optional '-' and the run of digits after it; stops at the first non-digit. */
static dec_view dec_parse(const char *s)
{
    dec_view v = {false, s, 0};
    bool minus = *s == '-';
    if (minus)
        s++;
    while (*s == '0')
        s++;
    v.digits = s;
    while (v.digits[v.len] >= '0' && v.digits[v.len] <= '9')
        v.len++;
    v.negative = minus && v.len > 0;
    return v;
}

/* Compares magnitudes of two views: <0, 0, >0. */
static int dec_cmp_abs(const dec_view *a, const dec_view *b)
{
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    int c = memcmp(a->digits, b->digits, a->len);
    return (c > 0) - (c < 0);
}

/*
 * Numeric comparison of two DecimalStr values: <0 if a < b, 0 if equal, >0 if a > b.
 * Any number of digits is handled (not only 38). Inputs are meant to satisfy ll_is_decimal_str;
 * other strings are read up to their first non-digit (never past the NUL). NULL sorts before
 * every string and equals NULL.
 */
int ll_decimal_cmp(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return (a != NULL) - (b != NULL);
    dec_view va = dec_parse(a), vb = dec_parse(b);
    if (va.negative != vb.negative)
        return va.negative ? -1 : 1;
    int mag = dec_cmp_abs(&va, &vb);
    return va.negative ? -mag : mag;
}
