/*
 * metrics.c - the metrics registry and its Prometheus text exposition (metrics.h).
 *
 * One mutex per registry guards every family; updates are a lookup among at most max_series
 * label-value sets (linear: the sets are small and fixed) and an addition. Series are allocated
 * once, up front (max_series + 1 for the overflow series), so an update never allocates.
 */
#include "ll/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct series {
    char values[LL_METRIC_MAX_LABELS][LL_METRIC_VALUE_MAX];
    double value;                                /* counter, gauge; histogram: the sum */
    uint64_t buckets[LL_METRIC_MAX_BUCKETS + 1]; /* histogram: per bucket (not cumulative), +Inf last */
    uint64_t count;                              /* histogram: observations */
} series;

struct ll_metric {
    ll_metrics *reg;
    ll_metric_type type;
    char *name, *help;
    size_t n_labels;
    char label_names[LL_METRIC_MAX_LABELS][64];
    double bounds[LL_METRIC_MAX_BUCKETS];
    size_t n_bounds;
    size_t max_series, n_series;
    int has_overflow;
    series *s; /* max_series regular slots, then the overflow slot */
};

struct ll_metrics {
    pthread_mutex_t mu;
    ll_metric *fam[LL_METRICS_MAX_FAMILIES];
    size_t n;
};

ll_metrics *ll_metrics_new(void)
{
    ll_metrics *r = calloc(1, sizeof *r);
    if (r)
        pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void family_free(ll_metric *m)
{
    if (!m)
        return;
    free(m->name);
    free(m->help);
    free(m->s);
    free(m);
}

void ll_metrics_free(ll_metrics *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        family_free(r->fam[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* A metric or label name: [a-zA-Z_:][a-zA-Z0-9_:]* (labels: no colon; not checked apart). */
static int name_ok(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

static int parse_labels(ll_metric *m, const char *labels)
{
    m->n_labels = 0;
    if (!labels || !*labels)
        return 0;
    for (const char *p = labels;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (m->n_labels == LL_METRIC_MAX_LABELS || len >= sizeof m->label_names[0] || !name_ok(p, len) ||
            (len == 2 && strncmp(p, "le", 2) == 0))
            return -1;
        memcpy(m->label_names[m->n_labels], p, len);
        m->label_names[m->n_labels++][len] = '\0';
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

ll_metric *ll_metrics_add(ll_metrics *r, ll_metric_type type, const char *name, const char *help,
                          const char *labels, size_t max_series, const double *bounds, size_t n_bounds)
{
    if (!r || !name || !name_ok(name, strlen(name)) || max_series < 1 || max_series > 100000 ||
        (type == LL_METRIC_HISTOGRAM && (n_bounds == 0 || n_bounds > LL_METRIC_MAX_BUCKETS || !bounds)))
        return NULL;
    if (type == LL_METRIC_HISTOGRAM)
        for (size_t i = 1; i < n_bounds; i++)
            if (!(bounds[i] > bounds[i - 1]))
                return NULL;
    ll_metric *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->reg = r;
    m->type = type;
    m->max_series = max_series;
    m->name = strdup(name);
    m->help = strdup(help ? help : "");
    m->s = calloc(max_series + 1, sizeof *m->s);
    if (type == LL_METRIC_HISTOGRAM) {
        memcpy(m->bounds, bounds, n_bounds * sizeof *bounds);
        m->n_bounds = n_bounds;
    }
    if (!m->name || !m->help || !m->s || parse_labels(m, labels) != 0) {
        family_free(m);
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    int ok = r->n < LL_METRICS_MAX_FAMILIES;
    for (size_t i = 0; ok && i < r->n; i++)
        ok = strcmp(r->fam[i]->name, name) != 0;
    if (ok)
        r->fam[r->n++] = m;
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        family_free(m);
        return NULL;
    }
    return m;
}

/* The series of values (created when new; the overflow series when max_series are taken).
 * Called with the mutex held. NULL only when values is NULL for a labelled family. */
static series *find(ll_metric *m, const char *const *values, int create)
{
    if (m->n_labels && !values)
        return NULL;
    for (size_t i = 0; i < m->n_series; i++) {
        size_t k = 0;
        while (k < m->n_labels && strncmp(m->s[i].values[k], values[k], LL_METRIC_VALUE_MAX - 1) == 0)
            k++;
        if (k == m->n_labels)
            return &m->s[i];
    }
    if (!create)
        return NULL;
    series *s;
    if (m->n_series < m->max_series) {
        s = &m->s[m->n_series++];
        for (size_t k = 0; k < m->n_labels; k++)
            snprintf(s->values[k], sizeof s->values[k], "%s", values[k] ? values[k] : "");
    } else {
        s = &m->s[m->max_series];
        if (!m->has_overflow) {
            m->has_overflow = 1;
            for (size_t k = 0; k < m->n_labels; k++)
                snprintf(s->values[k], sizeof s->values[k], "_other");
        }
    }
    return s;
}

void ll_metric_add(ll_metric *m, const char *const *values, double v)
{
    if (!m || m->type == LL_METRIC_HISTOGRAM || isnan(v) || (m->type == LL_METRIC_COUNTER && v < 0))
        return;
    pthread_mutex_lock(&m->reg->mu);
    series *s = find(m, values, 1);
    if (s)
        s->value += v;
    pthread_mutex_unlock(&m->reg->mu);
}

void ll_metric_set(ll_metric *m, const char *const *values, double v)
{
    if (!m || m->type == LL_METRIC_HISTOGRAM)
        return;
    pthread_mutex_lock(&m->reg->mu);
    series *s = find(m, values, 1);
    if (s)
        s->value = v;
    pthread_mutex_unlock(&m->reg->mu);
}

void ll_metric_observe(ll_metric *m, const char *const *values, double v)
{
    if (!m || m->type != LL_METRIC_HISTOGRAM || isnan(v))
        return;
    size_t b = 0;
    while (b < m->n_bounds && v > m->bounds[b])
        b++;
    pthread_mutex_lock(&m->reg->mu);
    series *s = find(m, values, 1);
    if (s) {
        s->buckets[b]++;
        s->count++;
        s->value += v;
    }
    pthread_mutex_unlock(&m->reg->mu);
}

void ll_metric_reset(ll_metric *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->reg->mu);
    memset(m->s, 0, (m->max_series + 1) * sizeof *m->s);
    m->n_series = 0;
    m->has_overflow = 0;
    pthread_mutex_unlock(&m->reg->mu);
}

double ll_metric_value(ll_metric *m, const char *const *values)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->reg->mu);
    series *s = find(m, values, 0);
    if (!s && m->has_overflow && values) {
        int all_other = 1;
        for (size_t k = 0; k < m->n_labels; k++)
            all_other &= strcmp(values[k], "_other") == 0;
        if (all_other)
            s = &m->s[m->max_series];
    }
    double v = !s ? 0 : m->type == LL_METRIC_HISTOGRAM ? (double)s->count : s->value;
    pthread_mutex_unlock(&m->reg->mu);
    return v;
}

size_t ll_metric_series(ll_metric *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->reg->mu);
    size_t n = m->n_series + (size_t)m->has_overflow;
    pthread_mutex_unlock(&m->reg->mu);
    return n;
}

/* ---- exposition ---------------------------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* A sample value: integers without a fraction, +Inf/-Inf/NaN as the format spells them. */
static void put_number(buf *b, double v)
{
    if (isnan(v))
        put(b, "NaN");
    else if (isinf(v))
        put(b, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        put(b, "%.0f", v);
    else
        put(b, "%.15g", v);
}

/* Escapes text for a HELP line (quote 0) or a label value (quote 1). */
static void put_escaped(buf *b, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            put(b, "\\\\");
        else if (*s == '\n')
            put(b, "\\n");
        else if (quote && *s == '"')
            put(b, "\\\"");
        else
            put(b, "%c", *s);
    }
}

/* {a="x",b="y"} plus an optional le="bound" label; nothing at all for no labels. */
static void put_labels(buf *b, const ll_metric *m, const series *s, const char *le)
{
    if (m->n_labels == 0 && !le)
        return;
    put(b, "{");
    for (size_t k = 0; k < m->n_labels; k++) {
        put(b, "%s%s=\"", k ? "," : "", m->label_names[k]);
        put_escaped(b, s->values[k], 1);
        put(b, "\"");
    }
    if (le)
        put(b, "%sle=\"%s\"", m->n_labels ? "," : "", le);
    put(b, "}");
}

static void put_series(buf *b, const ll_metric *m, const series *s)
{
    if (m->type != LL_METRIC_HISTOGRAM) {
        put(b, "%s", m->name);
        put_labels(b, m, s, NULL);
        put(b, " ");
        put_number(b, s->value);
        put(b, "\n");
        return;
    }
    uint64_t cum = 0;
    for (size_t i = 0; i <= m->n_bounds; i++) {
        char le[40];
        if (i < m->n_bounds)
            snprintf(le, sizeof le, "%.15g", m->bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        cum += s->buckets[i];
        put(b, "%s_bucket", m->name);
        put_labels(b, m, s, le);
        put(b, " %llu\n", (unsigned long long)cum);
    }
    put(b, "%s_sum", m->name);
    put_labels(b, m, s, NULL);
    put(b, " ");
    put_number(b, s->value);
    put(b, "\n%s_count", m->name);
    put_labels(b, m, s, NULL);
    put(b, " %llu\n", (unsigned long long)s->count);
}

char *ll_metrics_render(ll_metrics *r, size_t *len)
{
    static const char *const TYPES[] = {"counter", "gauge", "histogram"};
    buf b = {malloc(4096), 0, 4096, 0};
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        const ll_metric *m = r->fam[i];
        put(&b, "# HELP %s ", m->name);
        put_escaped(&b, m->help, 0);
        put(&b, "\n# TYPE %s %s\n", m->name, TYPES[m->type]);
        if (m->n_labels == 0 && m->n_series == 0) {
            series zero;
            memset(&zero, 0, sizeof zero);
            put_series(&b, m, &zero); /* an unlabelled family always has its one sample */
        }
        for (size_t k = 0; k < m->n_series; k++)
            put_series(&b, m, &m->s[k]);
        if (m->has_overflow)
            put_series(&b, m, &m->s[m->max_series]);
    }
    pthread_mutex_unlock(&r->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}

/* ---- reading an exposition ----------------------------------------------------------------- */

/* Parses the label set at *p (just after '{') up to its '}': *match is set when label = value
 * (or label is NULL). Returns the position after '}', or NULL when malformed. */
static const char *scan_labels(const char *p, const char *label, const char *value, int *match)
{
    *match = label == NULL;
    char lv[LL_METRIC_VALUE_MAX * 2];
    while (*p == ' ')
        p++;
    while (*p != '}') {
        const char *n = p;
        while (*p && *p != '=' && *p != '\n')
            p++;
        if (*p != '=' || p[1] != '"')
            return NULL;
        size_t nlen = (size_t)(p - n), k = 0;
        int overflow = 0;
        for (p += 2; *p && *p != '"' && *p != '\n'; p++) {
            char c = *p;
            if (c == '\\') {
                c = *++p;
                if (c == 'n')
                    c = '\n';
                else if (c != '\\' && c != '"')
                    return NULL;
            }
            if (k + 1 < sizeof lv)
                lv[k++] = c;
            else
                overflow = 1;
        }
        if (*p != '"')
            return NULL;
        lv[k] = '\0';
        if (label && !overflow && strlen(label) == nlen && strncmp(n, label, nlen) == 0 &&
            strcmp(lv, value) == 0)
            *match = 1;
        p++;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        else if (*p != '}')
            return NULL;
        while (*p == ' ')
            p++;
    }
    return p + 1;
}

int ll_metrics_text_sum(const char *text, const char *name, const char *label, const char *value, double *sum,
                        double *max)
{
    size_t nlen = strlen(name);
    int n = 0;
    *sum = *max = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (*line == '#' || strncmp(line, name, nlen) != 0 || (line[nlen] != '{' && line[nlen] != ' '))
            continue;
        const char *p = line + nlen;
        int match = 1;
        if (*p == '{' && !(p = scan_labels(p + 1, label, value, &match)))
            return -1;
        if (label && *line && line[nlen] != '{')
            match = 0;
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p || (*end != '\n' && *end != ' ' && *end != '\0'))
            return -1;
        if (!match)
            continue;
        *max = n == 0 || v > *max ? v : *max;
        *sum += v;
        n++;
    }
    return n;
}
