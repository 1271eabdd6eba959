/*
 * decode_cursor.c - for the decoder (decode_int.h): the binary encoding's values read at a cursor
 * over a datum that ll_prevalidate accepted (Avro 1.11 specification, "Binary Encoding"). Every read checks
 * the datum's end again all the same.
 */
#include <stdint.h>
#include <string.h>

#include "decode_int.h"

/* The datum ends before a value it declares (ll_prevalidate rules this out). -1, error at p. */
int ll_short_datum(ll_path *p, const char *what)
{
    ll_path_err(p, "truncated datum (%s)", what);
    return -1;
}

int ll_cur_long(ll_path *p, ll_cur *c, int64_t *v, const char *what)
{
    return ll_read_long(&c->p, c->end, v) == 0 ? 0 : ll_short_datum(p, what);
}

/* n raw bytes at the cursor into *b, the cursor past them. */
int ll_cur_raw(ll_path *p, ll_cur *c, size_t n, const unsigned char **b, const char *what)
{
    if ((size_t)(c->end - c->p) < n)
        return ll_short_datum(p, what);
    *b = c->p;
    c->p += n;
    return 0;
}

/* A length-prefixed string or bytes value: *b and *n into the datum. */
int ll_cur_bytes(ll_path *p, ll_cur *c, const unsigned char **b, size_t *n, const char *what)
{
    int64_t len;
    if (ll_cur_long(p, c, &len, what) != 0)
        return -1;
    if (len < 0)
        return ll_short_datum(p, what);
    *n = (size_t)len;
    return ll_cur_raw(p, c, *n, b, what);
}

/* The little-endian bytes of a float (4) or double (8) as an unsigned integer. */
int ll_cur_le(ll_path *p, ll_cur *c, int n, uint64_t *u)
{
    const unsigned char *b;
    if (ll_cur_raw(p, c, (size_t)n, &b, n == 4 ? "float" : "double") != 0)
        return -1;
    *u = 0;
    for (int i = n - 1; i >= 0; i--)
        *u = (*u << 8) | b[i];
    return 0;
}

/* An array's or map's next block count (0: the end). A negative count is followed by the block's
 * byte size, which ll_prevalidate matched against the items. */
int ll_cur_block(ll_path *p, ll_cur *c, int64_t *count)
{
    if (ll_cur_long(p, c, count, "block count") != 0)
        return -1;
    if (*count < 0) {
        int64_t bytes;
        if (*count == INT64_MIN || ll_cur_long(p, c, &bytes, "block size") != 0)
            return ll_short_datum(p, "block");
        *count = -*count;
    }
    return 0;
}
