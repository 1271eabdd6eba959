/*
 * args.c - the command line of one command: its own options, the common --db / --json / --help
 * wherever they appear after the command, positional arguments, and strict number and duration
 * parsing (a script passing "5x" gets a usage error, never 5).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/config.h"
#include "loadctl.h"

/* The spec named name (length len), or NULL. */
static const lc_optspec *find_spec(const lc_optspec *specs, const char *name, size_t len)
{
    for (const lc_optspec *s = specs; s && s->name; s++)
        if (strlen(s->name) == len && strncmp(s->name, name, len) == 0)
            return s;
    return NULL;
}

static int usage_error(const lc_opts *o, const char *usage, const char *fmt, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    lc_fail(o, LC_USAGE, "USAGE", NULL, "%s", msg);
    /* The synopsis only (up to the first blank line); --help has the rest. */
    const char *end = strstr(usage, "\n\n");
    fprintf(stderr, "\n%.*s\n", end ? (int)(end - usage) : (int)strlen(usage), usage);
    return LC_USAGE;
}

int lc_args(lc_opts *o, const char *usage, int argc, char **argv, const lc_optspec *specs, const char **pos,
            int min_pos, int max_pos, int *npos)
{
    static const lc_optspec common[] = {{"db", NULL, NULL}, {"json", NULL, NULL}, {NULL, NULL, NULL}};
    *npos = 0;
    bool only_pos = false;
    /* --json anywhere: even a usage error below is then reported as JSON. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            o->json = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (*npos >= max_pos)
                return usage_error(o, usage, "unexpected argument '%s'", a);
            pos[(*npos)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return LC_OK;
        }
        if (a[1] != '-')
            return usage_error(o, usage, "unknown option '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const lc_optspec *s = find_spec(specs, name, len);
        const lc_optspec *c = s ? NULL : find_spec(common, name, len);
        if (!s && !c)
            return usage_error(o, usage, "unknown option '%s'", a);
        bool is_flag = s ? s->flag != NULL : strcmp(c->name, "json") == 0;
        if (is_flag) {
            if (eq)
                return usage_error(o, usage, "option '%s' takes no value", a);
            if (s)
                *s->flag = true;
            else
                o->json = true;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val)
            return usage_error(o, usage, "option '%s' needs a value", a);
        if (s)
            *s->value = val;
        else
            o->conninfo = val;
    }
    if (*npos < min_pos)
        return usage_error(o, usage, "%s", min_pos == 1 ? "missing argument" : "missing arguments");
    return LC_CONTINUE;
}

int lc_parse_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int lc_parse_duration(const char *s, int64_t *out_ms)
{
    /* ll_parse_duration_ms reads numbers with strtod: keep to digits, '.' and the unit letters,
     * and at most 9 digits in a row, so no value can overflow the int64 it converts to. */
    if (!s || strlen(s) > 40)
        return -1;
    int run = 0;
    for (const char *p = s; *p; p++) {
        if (isdigit((unsigned char)*p)) {
            if (++run > 9)
                return -1;
            continue;
        }
        run = 0;
        if (!strchr(".PTDHMSptdhms", *p))
            return -1;
    }
    int64_t ms = 0;
    if (ll_parse_duration_ms(s, &ms) != 0 || ms < 0 || ms > INT64_C(100) * 366 * 86400 * 1000)
        return -1;
    *out_ms = ms;
    return 0;
}
