/*
 * metrics.c - the metrics registry (metrics.h; metrics_int.h maps its files): families, label
 * sets and updates; the text exposition is metrics_text.c's.
 *
 * One mutex per registry guards every family; updates are a lookup among at most max_series
 * label-value sets (linear: the sets are small and fixed) and an addition. Series are allocated
 * once, up front (max_series + 1 for the overflow series), so an update never allocates.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_int.h"

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
