/*
 * fields.h - reading the fields of a decoded message and checking them against the contract's
 * input formats (§4.3). A message that fails a check cannot be applied at all: the service
 * returns LL_APPLY_DEAD with the reason the first failed check wrote (docs/contract.md K§4).
 */
#ifndef LL_FIELDS_H
#define LL_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/kloop.h"

/* The string value of a member, or NULL when absent, null or not a string. Borrowed. */
const char *ll_f_str(const json_t *o, const char *name);
/* The integer value of a member, or dflt when absent or not an integer. */
int64_t ll_f_int(const json_t *o, const char *name, int64_t dflt);
/* The boolean value of a member, or dflt. */
bool ll_f_bool(const json_t *o, const char *name, bool dflt);

/*
 * Checks: each returns true when the field passes; on failure it writes "INVALID_FIELD"
 * and "<field>: <why>" into out (only the first failure is kept) and returns false.
 */
bool ll_need_uuid(ll_apply_out *out, const json_t *o, const char *field, char canon[37]);
bool ll_need_str(ll_apply_out *out, const json_t *o, const char *field, bool (*format)(const char *),
                 const char *format_name, long min_chars, long max_chars, const char **value);
bool ll_need_opt_str(ll_apply_out *out, const json_t *o, const char *field, long max_chars,
                     const char **value);
bool ll_need_int(ll_apply_out *out, const json_t *o, const char *field, int64_t min, int64_t max,
                 int64_t *value);
/* Records a failure with a formatted reason (INVALID_FIELD). Always returns false. */
bool ll_invalid(ll_apply_out *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
