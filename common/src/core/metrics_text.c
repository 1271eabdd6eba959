/*
 * metrics_text.c - the Prometheus text exposition of a metrics registry (metrics.h,
 * metrics_int.h): rendered under the registry's mutex (numbers, escaped label values, histogram
 * buckets cumulated), and a rendered text read back (a family's sum over matching series).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_int.h"

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
