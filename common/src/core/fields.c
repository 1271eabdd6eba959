/*
 * fields.c - field access and format checks for decoded messages (docs/contract.md §4.3).
 */
#include "ll/fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ll/rules.h"

const char *ll_f_str(const json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

int64_t ll_f_int(const json_t *o, const char *name, int64_t dflt)
{
    json_t *v = json_object_get(o, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

bool ll_f_bool(const json_t *o, const char *name, bool dflt)
{
    json_t *v = json_object_get(o, name);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

bool ll_invalid(ll_apply_out *out, const char *fmt, ...)
{
    if (out->reason[0])
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
    snprintf(out->reason_code, sizeof out->reason_code, "INVALID_FIELD");
    return false;
}

bool ll_need_uuid(ll_apply_out *out, const json_t *o, const char *field, char canon[37])
{
    const char *v = ll_f_str(o, field);
    if (!v)
        return ll_invalid(out, "%s: required", field);
    if (ll_uuid_canonical(v, canon) != 0)
        return ll_invalid(out, "%s: '%.60s' is not a UUID", field, v);
    return true;
}

bool ll_need_str(ll_apply_out *out, const json_t *o, const char *field, bool (*format)(const char *),
                 const char *format_name, long min_chars, long max_chars, const char **value)
{
    const char *v = ll_f_str(o, field);
    *value = v;
    if (!v)
        return ll_invalid(out, "%s: required", field);
    if (format && !format(v))
        return ll_invalid(out, "%s: '%.60s' does not match %s", field, v, format_name);
    long n = ll_utf8_chars(v);
    if (n < 0)
        return ll_invalid(out, "%s: not valid UTF-8", field);
    if (n < min_chars || n > max_chars)
        return ll_invalid(out, "%s: length %ld outside %ld..%ld", field, n, min_chars, max_chars);
    return true;
}

bool ll_need_opt_str(ll_apply_out *out, const json_t *o, const char *field, long max_chars,
                     const char **value)
{
    *value = ll_f_str(o, field);
    if (!*value)
        return true;
    long n = ll_utf8_chars(*value);
    if (n < 0)
        return ll_invalid(out, "%s: not valid UTF-8", field);
    if (n > max_chars)
        return ll_invalid(out, "%s: length %ld over %ld", field, n, max_chars);
    return true;
}

bool ll_need_int(ll_apply_out *out, const json_t *o, const char *field, int64_t min, int64_t max,
                 int64_t *value)
{
    json_t *v = json_object_get(o, field);
    if (!json_is_integer(v))
        return ll_invalid(out, "%s: required integer", field);
    *value = (int64_t)json_integer_value(v);
    if (*value < min || *value > max)
        return ll_invalid(out, "%s: %lld outside %lld..%lld", field, (long long)*value, (long long)min,
                          (long long)max);
    return true;
}
