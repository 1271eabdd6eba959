/*
 * logical.c - the text of a value whose writer type carries a logical type (codec.h):
 * decimal -> exact decimal text with the writer's scale, date -> ISO date, timestamps ->
 * ISO-8601 date-time in the writer's unit, uuid (fixed of 16) -> canonical text.
 */
#include <stdio.h>
#include <string.h>

#include "codec_internal.h"

int ll_decimal_text(const unsigned char *b, size_t n, int precision, int scale, char *out, size_t outlen,
                    char *err, size_t errlen)
{
    if (n == 0) {
        ll_codec_err(err, errlen, "decimal of 0 bytes");
        return -1;
    }
    int neg = (b[0] & 0x80) != 0;
    /* drop sign-extension bytes: 00 before a byte < 0x80, ff before a byte >= 0x80 */
    while (n > 1 && ((b[0] == 0x00 && !(b[1] & 0x80)) || (b[0] == 0xff && (b[1] & 0x80)))) {
        b++;
        n--;
    }
    unsigned char mag[17];
    if (n > sizeof mag) { /* 2^128 > 10^38: more bytes cannot fit 38 digits */
        ll_codec_err(err, errlen, "decimal of more than %d digits (precision %d)", 38, precision);
        return -1;
    }
    memcpy(mag, b, n);
    if (neg) { /* magnitude of a two's complement value: invert, add one */
        unsigned carry = 1;
        for (size_t i = n; i-- > 0;) {
            unsigned v = (unsigned)(unsigned char)~mag[i] + carry;
            mag[i] = (unsigned char)v;
            carry = v >> 8;
        }
    }
    char digits[48];
    int nd = 0;
    for (;;) { /* repeated division by ten, most significant byte first */
        unsigned rem = 0;
        int zero = 1;
        for (size_t i = 0; i < n; i++) {
            unsigned cur = (rem << 8) | mag[i];
            mag[i] = (unsigned char)(cur / 10);
            rem = cur % 10;
            if (mag[i])
                zero = 0;
        }
        digits[nd++] = (char)('0' + rem);
        if (zero)
            break;
        if (nd > 40)
            break; /* over any precision allowed; refused below */
    }
    if (nd > precision) {
        ll_codec_err(err, errlen, "decimal of %d digits over its precision %d", nd, precision);
        return -1;
    }
    /* digits holds the unscaled value least significant first; at least scale + 1 are shown */
    int shown = nd > scale ? nd : scale + 1;
    size_t need = (size_t)neg + (size_t)shown + (scale > 0) + 1;
    if (need > outlen) {
        ll_codec_err(err, errlen, "decimal text too long");
        return -1;
    }
    size_t k = 0;
    if (neg)
        out[k++] = '-';
    for (int i = shown - 1; i >= 0; i--) {
        out[k++] = i < nd ? digits[i] : '0';
        if (i == scale && scale > 0)
            out[k++] = '.';
    }
    out[k] = '\0';
    return 0;
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Year, month and day of a day count since 1970-01-01; -1 outside years 0001..9999. */
static int civil_date(int64_t days, int *year, int *month, int *day)
{
    /* 9999-12-31 is day 3652058 after 0001-01-01, 1970-01-01 day 719162 */
    if (days < -719162 || days > 3652058 - 719162)
        return -1;
    int64_t z = days + 719162;          /* days since 0001-01-01, >= 0 */
    int64_t y = 1 + 400 * (z / 146097); /* a 400-year cycle has 146097 days */
    z %= 146097;
    for (;;) {
        int64_t diy = is_leap(y) ? 366 : 365;
        if (z < diy)
            break;
        z -= diy;
        y++;
    }
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int m = 0;
    for (;; m++) {
        int dm = mdays[m] + (m == 1 && is_leap(y));
        if (z < dm)
            break;
        z -= dm;
    }
    *year = (int)y;
    *month = m + 1;
    *day = (int)z + 1;
    return 0;
}

int ll_date_text(int64_t days, char *out, size_t outlen, char *err, size_t errlen)
{
    int y, m, d;
    if (civil_date(days, &y, &m, &d) != 0) {
        ll_codec_err(err, errlen, "date %lld outside years 0001..9999", (long long)days);
        return -1;
    }
    snprintf(out, outlen, "%04d-%02d-%02d", y, m, d);
    return 0;
}

int ll_timestamp_text(int64_t v, ll_logical l, char *out, size_t outlen, char *err, size_t errlen)
{
    int micros = l == LLL_TS_MICROS || l == LLL_LTS_MICROS;
    int64_t unit = micros ? 1000000 : 1000;
    int64_t secs = v / unit, frac = v % unit;
    if (frac < 0) { /* floor: before 1970 the fraction still counts forward */
        frac += unit;
        secs--;
    }
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    int y, m, d;
    if (civil_date(days, &y, &m, &d) != 0) {
        ll_codec_err(err, errlen, "%s %lld outside years 0001..9999", ll_logical_name(l), (long long)v);
        return -1;
    }
    const char *zone = (l == LLL_TS_MILLIS || l == LLL_TS_MICROS) ? "Z" : "";
    snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%0*lld%s", y, m, d, (int)(sod / 3600),
             (int)(sod / 60 % 60), (int)(sod % 60), micros ? 6 : 3, (long long)frac, zone);
    return 0;
}

void ll_uuid_text(const unsigned char b[16], char out[37])
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[k++] = '-';
        out[k++] = hex[b[i] >> 4];
        out[k++] = hex[b[i] & 15];
    }
    out[k] = '\0';
}
