/*
 * db_cells.c - reading a result's cells: text or NULL, integers parsed whole (ll_db_parse_ll),
 * booleans.
 */
#include "ll/db.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

const char *ll_db_text(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    return PQgetvalue(res, row, col);
}

long long ll_db_ll(const PGresult *res, int row, int col, long long dflt)
{
    long long v = dflt;
    return ll_db_parse_ll(ll_db_text(res, row, col), &v) == 0 ? v : dflt;
}

int ll_db_parse_ll(const char *text, long long *out)
{
    if (text == NULL || !(isdigit((unsigned char)text[0]) || text[0] == '-' || text[0] == '+'))
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

bool ll_db_bool(const PGresult *res, int row, int col)
{
    const char *v = ll_db_text(res, row, col);
    return v && v[0] == 't';
}
