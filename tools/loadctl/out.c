/*
 * out.c - what loadctl prints: failures on stderr naming their code (and as one JSON object on
 * stdout with --json), JSON documents, and ledger rows as JSON or table cells.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadctl.h"

/* The word a reader sees for an exit code. */
static const char *kind_of(int code)
{
    switch (code) {
    case LC_USAGE:
        return "usage";
    case LC_DB:
        return "database error";
    case LC_KAFKA:
        return "Kafka error";
    case LC_VIOLATED:
        return "violated";
    default:
        return "refused";
    }
}

json_t *lc_json_str(const char *s)
{
    if (!s)
        s = "";
    json_t *j = json_string(s);
    if (j)
        return j;
    /* Not UTF-8 (an argument as typed): keep the ASCII, mark the rest. */
    char *copy = strdup(s);
    if (!copy)
        return json_string("?");
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

int lc_fail(const lc_opts *o, int code, const char *err_code, json_t *details, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line: a libpq message brings its own newlines and tabs. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    for (size_t n = strlen(msg); n > 0 && msg[n - 1] == ' ';)
        msg[--n] = '\0';
    const char *kind = kind_of(code);
    if (code == LC_REFUSED && strstr(err_code, "NOT_FOUND"))
        kind = "not found";
    if (code == LC_USAGE)
        fprintf(stderr, "loadctl: usage: %s\n", msg);
    else
        fprintf(stderr, "loadctl: %s: %s (%s)\n", kind, err_code, msg);
    if (o && o->json) {
        json_t *j = json_pack("{s:b,s:i,s:s}", "ok", 0, "exitCode", code, "code", err_code);
        json_object_set_new(j, "message", lc_json_str(msg));
        json_object_set_new(j, "details", details ? details : json_object());
        lc_print_json(j);
    } else if (details) {
        json_decref(details);
    }
    return code;
}

int lc_fail_db(const lc_opts *o, const ll_db *db, const char *what)
{
    bool gone = ll_db_err_is_unavailable(db);
    json_t *d = json_pack("{s:s}", "sqlstate", db->err.sqlstate);
    return lc_fail(o, LC_DB, gone ? "DATABASE_UNAVAILABLE" : "DATABASE_ERROR", d, "%s: %s", what,
                   db->err.message[0] ? db->err.message : "no connection");
}

void lc_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s)
        puts(s);
    free(s);
    json_decref(j);
}

json_t *lc_cell_json(const PGresult *r, int row, int col, bool numeric)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    const char *v = PQgetvalue(r, row, col);
    return numeric ? json_integer(strtoll(v, NULL, 10)) : json_string(v);
}

json_t *lc_rows_json(const PGresult *r, const char *const *names)
{
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *obj = json_object();
        for (int c = 0; names[c] && c < PQnfields(r); c++) {
            bool num = names[c][0] == '#';
            json_object_set_new(obj, names[c] + num, lc_cell_json(r, i, c, num));
        }
        json_array_append_new(arr, obj);
    }
    return arr;
}

const char *lc_cell(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? "-" : PQgetvalue(r, row, col);
}
