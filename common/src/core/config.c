/*
 * config.c - the `key = value` configuration file with LOADLEDGER_* environment overrides.
 * Every key is checked against the service's table; an unknown key stops the service at start.
 */
#include "ll/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define ENV_PREFIX "LOADLEDGER_"
/* The longest duration accepted: 100 years (s); guards the cast to int64 ms against inf/1e30. */
#define LL_DURATION_MAX_S (100.0 * 366 * 86400)

typedef struct entry {
    char *key;
    char *value;
} entry;

struct ll_config {
    entry *items;
    size_t n, cap;
    const ll_config_key *known;
};

static entry *find(const ll_config *c, const char *key)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->items[i].key, key) == 0)
            return &c->items[i];
    return NULL;
}

int ll_config_set(ll_config *c, const char *key, const char *value)
{
    entry *e = find(c, key);
    char *v = strdup(value);
    if (!v)
        return -1;
    if (e) {
        free(e->value);
        e->value = v;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        entry *items = realloc(c->items, cap * sizeof *items);
        if (!items) {
            free(v);
            return -1;
        }
        c->items = items;
        c->cap = cap;
    }
    c->items[c->n].key = strdup(key);
    if (!c->items[c->n].key) {
        free(v);
        return -1;
    }
    c->items[c->n].value = v;
    c->n++;
    return 0;
}

static const ll_config_key *known_key(const ll_config_key *known, const char *key)
{
    for (const ll_config_key *k = known; k && k->key; k++)
        if (strcmp(k->key, key) == 0)
            return k;
    return NULL;
}

/* topic.<logical>.<name|framing|schema_id> for a logical topic of the service. */
static int is_topic_key(const char *key, const char *const *topics)
{
    static const char *const fields[] = {"name", "framing", "schema_id", NULL};
    if (strncmp(key, "topic.", 6) != 0 || !topics)
        return 0;
    const char *logical = key + 6;
    const char *dot = strrchr(logical, '.');
    if (!dot)
        return 0;
    size_t llen = (size_t)(dot - logical);
    int topic_ok = 0;
    for (const char *const *t = topics; *t; t++)
        if (strlen(*t) == llen && strncmp(*t, logical, llen) == 0)
            topic_ok = 1;
    if (!topic_ok)
        return 0;
    for (const char *const *f = fields; *f; f++)
        if (strcmp(dot + 1, *f) == 0)
            return 1;
    return 0;
}

static int key_allowed(const ll_config *c, const char *key, const char *const *topics)
{
    if (known_key(c->known, key))
        return 1;
    if (strncmp(key, "kafka.", 6) == 0 && strlen(key) > 6)
        return 1;
    return is_topic_key(key, topics);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int load_file(ll_config *c, const char *path, const char *const *topics, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read configuration file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[8192];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected `key = value`", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        if (!key_allowed(c, key, topics)) {
            snprintf(err, errlen, "%s:%d: unknown configuration key '%s'", path, lineno, key);
            rc = -1;
            break;
        }
        if (ll_config_set(c, key, value) != 0) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* LOADLEDGER_DB__CONNINFO -> db.conninfo */
static void env_name_to_key(const char *name, char *out, size_t outlen)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 1 < outlen; i++) {
        if (name[i] == '_' && name[i + 1] == '_') {
            out[j++] = '.';
            i++;
        } else {
            out[j++] = (char)tolower((unsigned char)name[i]);
        }
    }
    out[j] = '\0';
}

static int load_env(ll_config *c, const char *const *topics, char *err, size_t errlen)
{
    size_t plen = strlen(ENV_PREFIX);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, ENV_PREFIX, plen) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char name[512], key[512];
        size_t nlen = (size_t)(eq - *e) - plen;
        if (nlen >= sizeof name)
            nlen = sizeof name - 1;
        memcpy(name, *e + plen, nlen);
        name[nlen] = '\0';
        env_name_to_key(name, key, sizeof key);
        if (!key_allowed(c, key, topics)) {
            snprintf(err, errlen, "environment %s%s: unknown configuration key '%s'", ENV_PREFIX, name, key);
            return -1;
        }
        if (ll_config_set(c, key, eq + 1) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

ll_config *ll_config_load(const char *path, const ll_config_key *known, const char *const *topics, char *err,
                          size_t errlen)
{
    ll_config *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->known = known;
    if ((path && load_file(c, path, topics, err, errlen) != 0) || load_env(c, topics, err, errlen) != 0) {
        ll_config_free(c);
        return NULL;
    }
    for (const ll_config_key *k = known; k && k->key; k++) {
        if (k->required && !ll_config_get(c, k->key)) {
            snprintf(err, errlen, "missing required configuration key '%s' (%s)", k->key,
                     k->help ? k->help : "");
            ll_config_free(c);
            return NULL;
        }
    }
    return c;
}

void ll_config_free(ll_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].key);
        free(c->items[i].value);
    }
    free(c->items);
    free(c);
}

const char *ll_config_get(const ll_config *c, const char *key)
{
    const entry *e = find(c, key);
    if (e)
        return e->value;
    const ll_config_key *k = known_key(c->known, key);
    return k ? k->default_value : NULL;
}

/* k's range as text into buf ("1..2000", "at least 1", durations with " ms"); returns buf. */
static const char *range_text(const ll_config_key *k, char *buf, size_t n)
{
    const char *unit = k->kind == LL_CONFIG_DURATION ? " ms" : "";
    if (k->max == LL_CONFIG_NO_MAX)
        snprintf(buf, n, "at least %lld%s", (long long)k->min, unit);
    else
        snprintf(buf, n, "%lld..%lld%s", (long long)k->min, (long long)k->max, unit);
    return buf;
}

static const char *kind_name(ll_config_kind kind)
{
    return kind == LL_CONFIG_INT ? "an integer" : kind == LL_CONFIG_DURATION ? "a duration" : "unchecked";
}

/*
 * The range check of the readers: v (of kind, as read) against key's entry in c's table. A key
 * without a range (or outside the table) passes. 0, or -1 with err naming the key, its range, v and
 * the key's help; or naming both kinds when the table gives key another kind than the reader's.
 */
static int check_range(const ll_config *c, const char *key, ll_config_kind kind, int64_t v, char *err,
                       size_t errlen)
{
    const ll_config_key *k = known_key(c->known, key);
    if (!k || k->kind == LL_CONFIG_UNCHECKED)
        return 0;
    if (k->kind != kind) {
        snprintf(err, errlen, "configuration key '%s' is read as %s but listed as %s", key, kind_name(kind),
                 kind_name(k->kind));
        return -1;
    }
    if (v >= k->min && v <= k->max)
        return 0;
    char range[64];
    snprintf(err, errlen, "configuration key '%s' must be %s, not %lld%s (%s)", key,
             range_text(k, range, sizeof range), (long long)v, kind == LL_CONFIG_DURATION ? " ms" : "",
             k->help ? k->help : "");
    return -1;
}

/* The allowed words as "a, b or c" into buf (cut at n bytes). */
static void words_text(const char *const *words, char *buf, size_t n)
{
    size_t count = 0, used = 0;
    while (words[count])
        count++;
    buf[0] = '\0';
    for (size_t i = 0; i < count && used < n; i++) {
        const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        int w = snprintf(buf + used, n - used, "%s%s", sep, words[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

int ll_config_enum(const char *key, const char *value, const char *const *words, char *err, size_t errlen)
{
    for (int i = 0; value && words[i]; i++)
        if (strcmp(value, words[i]) == 0)
            return i;
    if (err && errlen) {
        char allowed[512];
        words_text(words, allowed, sizeof allowed);
        if (!value || !*value)
            snprintf(err, errlen, "configuration key %s has no value: it must be %s", key, allowed);
        else
            snprintf(err, errlen, "configuration key %s must be %s, not '%s'", key, allowed, value);
    }
    return -1;
}

int ll_config_int(const ll_config *c, const char *key, int64_t *out, char *err, size_t errlen)
{
    const char *v = ll_config_get(c, key);
    char *end = NULL;
    if (!v || !*v) {
        snprintf(err, errlen, "configuration key '%s' has no value", key);
        return -1;
    }
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end) {
        snprintf(err, errlen, "configuration key '%s': '%s' is not an integer", key, v);
        return -1;
    }
    if (check_range(c, key, LL_CONFIG_INT, x, err, errlen) != 0)
        return -1;
    *out = x;
    return 0;
}

int ll_config_bool(const ll_config *c, const char *key, bool *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"true", "1", "yes", "on", NULL};
    static const char *const no[] = {"false", "0", "no", "off", NULL};
    const char *v = ll_config_get(c, key);
    for (int i = 0; v && yes[i]; i++)
        if (strcasecmp(v, yes[i]) == 0)
            return (*out = true), 0;
    for (int i = 0; v && no[i]; i++)
        if (strcasecmp(v, no[i]) == 0)
            return (*out = false), 0;
    snprintf(err, errlen, "configuration key '%s': '%s' is not a boolean", key, v ? v : "");
    return -1;
}

/* ISO-8601 duration PnDTnHnMnS (fractions allowed on every number) or plain seconds. */
int ll_parse_duration_ms(const char *text, int64_t *out_ms)
{
    char *end = NULL;
    if (!text || !*text)
        return -1;
    if (text[0] != 'P' && text[0] != 'p') {
        double s = strtod(text, &end);
        if (*end || !(s >= 0) || s > LL_DURATION_MAX_S)
            return -1;
        *out_ms = (int64_t)(s * 1000.0 + 0.5);
        return 0;
    }
    const char *p = text + 1;
    int in_time = 0, any = 0;
    double ms = 0;
    while (*p) {
        if (*p == 'T' || *p == 't') {
            in_time = 1;
            p++;
            continue;
        }
        double v = strtod(p, &end);
        if (end == p || !(v >= 0) || v > LL_DURATION_MAX_S)
            return -1;
        char unit = (char)toupper((unsigned char)*end);
        if (unit == 'D' && !in_time)
            ms += v * 86400000.0;
        else if (unit == 'H' && in_time)
            ms += v * 3600000.0;
        else if (unit == 'M' && in_time)
            ms += v * 60000.0;
        else if (unit == 'S' && in_time)
            ms += v * 1000.0;
        else
            return -1;
        any = 1;
        p = end + 1;
    }
    if (!any || ms > LL_DURATION_MAX_S * 1000.0)
        return -1;
    *out_ms = (int64_t)(ms + 0.5);
    return 0;
}

int ll_config_duration_ms(const ll_config *c, const char *key, int64_t *out_ms, char *err, size_t errlen)
{
    const char *v = ll_config_get(c, key);
    int64_t ms = 0;
    if (ll_parse_duration_ms(v, &ms) != 0) {
        snprintf(err, errlen, "configuration key '%s': '%s' is not a duration (PT90M or seconds)", key,
                 v ? v : "");
        return -1;
    }
    if (check_range(c, key, LL_CONFIG_DURATION, ms, err, errlen) != 0)
        return -1;
    *out_ms = ms;
    return 0;
}

void ll_config_foreach_prefix(const ll_config *c, const char *prefix,
                              void (*fn)(const char *key, const char *value, void *arg), void *arg)
{
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < c->n; i++)
        if (strncmp(c->items[i].key, prefix, plen) == 0)
            fn(c->items[i].key + plen, c->items[i].value, arg);
}

/* " (range)" (open and close: the brackets) for a key with a range, "" for one without, into buf;
 * returns buf. */
static const char *range_suffix(const ll_config_key *k, char *buf, size_t n, const char *open,
                                const char *close)
{
    char range[64];
    if (k->kind == LL_CONFIG_UNCHECKED)
        buf[0] = '\0';
    else
        snprintf(buf, n, " %s%s%s", open, range_text(k, range, sizeof range), close);
    return buf;
}

void ll_config_usage(FILE *out, const ll_config_key *keys)
{
    char range[80];
    for (const ll_config_key *k = keys; k && k->key; k++)
        fprintf(out, "  %-32s %s%s%s%s%s\n", k->key, k->help ? k->help : "",
                range_suffix(k, range, sizeof range, "[", "]"), k->default_value ? " [default " : "",
                k->default_value ? k->default_value : "",
                k->default_value ? "]" : (k->required ? " [required]" : ""));
}

void ll_config_write_example(FILE *out, const ll_config_key *keys)
{
    char range[80];
    for (const ll_config_key *k = keys; k && k->key; k++) {
        fprintf(out, "\n# %s%s\n", k->help ? k->help : k->key,
                range_suffix(k, range, sizeof range, "(", ")"));
        if (k->default_value)
            fprintf(out, "#%s = %s\n", k->key, k->default_value);
        else
            fprintf(out, "# %s\n#%s =\n", k->required ? "required" : "optional, no default", k->key);
    }
}
