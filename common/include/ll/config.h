/*
 * config.h - a service's configuration: one file of `key = value` lines plus environment
 * overrides, every key known in advance.
 *
 * File: `key = value` per line, `#` starts a comment line, blank lines ignored; the value is the
 * rest of the line, trimmed (it may contain spaces: a libpq conninfo). Environment: a variable
 * LOADLEDGER_<KEY> overrides a key, with the key upper-cased and every `.` written `__`
 * (LOADLEDGER_DB__CONNINFO -> db.conninfo, LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS ->
 * kafka.bootstrap.servers). Precedence: environment > file > defaults.
 *
 * Unknown keys (in the file or the environment) are refused at start with the key's name.
 * A key is known when it is in the service's table, or starts with `kafka.` (passed through to
 * librdkafka as is), or is `topic.<logical>.<field>` for a topic of the service.
 *
 * Durations accept ISO-8601 (PT90M, P3D, PT0.5S) or a number of seconds (docs/contract.md §9).
 */
#ifndef LL_CONFIG_H
#define LL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What a key's value is, for its range check and for --help (ll_config_key.kind). */
typedef enum ll_config_kind {
    LL_CONFIG_UNCHECKED = 0, /* no range: text, or a value whose reader checks its form only */
    LL_CONFIG_INT,           /* an integer (ll_config_int), within min..max */
    LL_CONFIG_DURATION       /* a duration (ll_config_duration_ms), within min..max milliseconds */
} ll_config_kind;

/* The last three fields of a key without a range: {"key", "default", false, "help", LL_CONFIG_NO_RANGE}. */
#define LL_CONFIG_NO_RANGE LL_CONFIG_UNCHECKED, 0, 0
/* No upper bound (ll_config_key.max). */
#define LL_CONFIG_NO_MAX INT64_MAX
/* Units of a duration key's range (ll_config_key.min/max are in ms): LL_CONFIG_DURATION, 1 * LL_SEC,
 * 30 * LL_DAY reads PT1S..P30D. */
#define LL_SEC  1000LL
#define LL_MIN  (60 * LL_SEC)
#define LL_HOUR (60 * LL_MIN)
#define LL_DAY  (24 * LL_HOUR)

/*
 * One known key: its name, its default (NULL = no default; required when `required`), a help
 * line, and for an integer or a duration its range: ll_config_int and ll_config_duration_ms
 * refuse a value outside min..max (inclusive; durations in ms; max LL_CONFIG_NO_MAX: none), with
 * the key, the bounds and the value named. The range is written here only: the readers take it
 * from the table, and --help and --config-keys print it. A key without a range ends with
 * LL_CONFIG_NO_RANGE. A table ends with an entry whose key is NULL.
 */
typedef struct ll_config_key { /* NOLINT(clang-analyzer-optin.performance.Padding): the first four fields keep
                                * their order for the tables' positional entries; 8 bytes a key */
    const char *key;
    const char *default_value;
    bool required;
    const char *help;
    ll_config_kind kind;
    int64_t min, max;
} ll_config_key;

/* A loaded configuration. Opaque; free with ll_config_free. */
typedef struct ll_config ll_config;

/*
 * Loads path (NULL = no file) with the environment overrides, checking every key against
 * `known` (terminated by a {NULL} entry) and `topics` (NULL-terminated logical topic names
 * allowed in topic.<logical>.<name|framing|schema_id>). Returns NULL with a message in err
 * naming the file, line or key at fault: unknown key, missing required key, unreadable file.
 */
ll_config *ll_config_load(const char *path, const ll_config_key *known, const char *const *topics, char *err,
                          size_t errlen);
/* Frees a configuration (NULL allowed). */
void ll_config_free(ll_config *c);

/* The value of key, or its default, or NULL. Borrowed; valid while c lives. */
const char *ll_config_get(const ll_config *c, const char *key);
/* Sets a value (used by tests and by derived defaults). Returns 0, or -1 on allocation failure. */
int ll_config_set(ll_config *c, const char *key, const char *value);

/* Integer value of key into *out. Returns 0, or -1 with err naming the key if not an integer, or,
 * for a key of kind LL_CONFIG_INT, if outside its range (err names the bounds, the value and the
 * key's help). */
int ll_config_int(const ll_config *c, const char *key, int64_t *out, char *err, size_t errlen);
/* Boolean (true/false/1/0/yes/no/on/off). Returns 0, or -1 with err naming the key. */
int ll_config_bool(const ll_config *c, const char *key, bool *out, char *err, size_t errlen);
/* Duration in milliseconds (ISO-8601 or seconds). Returns 0, or -1 with err naming the key if not
 * a duration, or, for a key of kind LL_CONFIG_DURATION, if outside its range (as ll_config_int). */
int ll_config_duration_ms(const ll_config *c, const char *key, int64_t *out_ms, char *err, size_t errlen);

/*
 * The one check of an enum-valued key (a value that is one of a fixed set of words: recovery.mode,
 * dispatch.sink, db.pooler, log.level, topic.<logical>.framing, ...): the index of value in words, a
 * NULL-terminated list of the allowed words compared exactly (case included). Returns that index
 * (0 for the first word), or -1 with err "configuration key K must be a, b or c, not 'v'" naming
 * every allowed word ("... has no value: it must be ..." for value NULL or empty). key, value and
 * words are borrowed; err may be NULL with errlen 0 (a parser that only wants the index). Pure.
 */
int ll_config_enum(const char *key, const char *value, const char *const *words, char *err, size_t errlen);

/* Parses a duration (ISO-8601 PnDTnHnMnS with fractions, or seconds) into ms. Returns 0 or -1. */
int ll_parse_duration_ms(const char *text, int64_t *out_ms);

/* Prints one line per key (name, help, range, default or [required]) to out, for --help. */
void ll_config_usage(FILE *out, const ll_config_key *keys);

/*
 * Writes keys as an example configuration file to out (`--config-keys`): per key a `# help`
 * comment line (with the key's range in parentheses, if it has one), then the key commented out with its
 * default (`#key = default`), or, for a key without default, `#key =` after a `# required` / `# optional, no
 * default` line. Uncommenting a default line gives a file ll_config_load accepts with the same value.
 */
void ll_config_write_example(FILE *out, const ll_config_key *keys);

/* Calls fn(key_without_prefix, value, arg) for every set key that starts with prefix. */
void ll_config_foreach_prefix(const ll_config *c, const char *prefix,
                              void (*fn)(const char *key, const char *value, void *arg), void *arg);

#endif
