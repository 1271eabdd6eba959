/*
 * decode_match.c - schema resolution for the decoder (decode_int.h): which reader type a writer
 * type is read as (same type, promotion, same short name, a union branch, logical types), and the
 * type names used in error messages.
 */
#include <stdio.h>
#include <string.h>

#include "decode_int.h"

static int is_named(ll_type t)
{
    return t == LLT_RECORD || t == LLT_ENUM || t == LLT_FIXED;
}

/*
 * How a value of writer type w with a logical type (or read as a reader logical type) is read
 * as r: 1 as the text of the writer's logical value, 0 as the plain value, -1 not at all. The
 * writer's logical type decides: decimal -> text (into a string, bytes, or a decimal of the same
 * scale and no smaller precision); date/timestamps -> ISO text into a string, else the number
 * into the same type (plain or the same logical type); uuid -> text. A reader decimal needs a
 * writer decimal (plain bytes are not a decimal).
 */
int ll_dec_logical_read(const ll_node *w, const ll_node *r)
{
    if (w->logical == LLL_NONE)
        return r->logical == LLL_DECIMAL ? -1 : 0;
    int same_or_plain = r->logical == LLL_NONE || r->logical == w->logical;
    if (r->type == LLT_STRING)
        return same_or_plain ? 1 : -1;
    switch (w->logical) {
    case LLL_DECIMAL:
        if (r->type != LLT_BYTES && r->type != LLT_FIXED)
            return -1;
        if (r->logical == LLL_NONE ||
            (r->logical == LLL_DECIMAL && r->scale == w->scale && r->precision >= w->precision))
            return 1;
        return -1;
    case LLL_UUID:
        return (r->type == LLT_BYTES || r->type == w->type) && same_or_plain ? 1 : -1;
    default:
        return r->type == w->type && same_or_plain ? 0 : -1;
    }
}

/* 2: same type (named: same full name); 1: promotion or same short name; 0: same named kind. */
int ll_dec_match_level(const ll_node *w, const ll_node *r)
{
    if (w->logical != LLL_NONE || r->logical != LLL_NONE) {
        int lr = ll_dec_logical_read(w, r);
        if (lr < 0)
            return -1;
        if (lr == 1 && (r->type == LLT_STRING || (r->type == LLT_BYTES && w->type != LLT_BYTES)))
            return 1; /* the logical value's text */
    }
    if (w->type == r->type) {
        if (!is_named(w->type))
            return 2;
        if (strcmp(w->fullname, r->fullname) == 0)
            return 2;
        if (strcmp(w->name, r->name) == 0)
            return 1;
        if (w->type == LLT_FIXED && w->size != r->size)
            return -1;
        return 0;
    }
    switch (w->type) {
    case LLT_INT:
        return (r->type == LLT_LONG || r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? 1 : -1;
    case LLT_LONG:
        return (r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? 1 : -1;
    case LLT_FLOAT:
        return r->type == LLT_DOUBLE ? 1 : -1;
    case LLT_STRING:
        return r->type == LLT_BYTES ? 1 : -1;
    case LLT_BYTES:
        return r->type == LLT_STRING ? 1 : -1;
    default:
        return -1;
    }
}

/* The reader union branch a writer (non-union) type is read as, or -1. */
int ll_dec_match_branch(const ll_node *w, const ll_node *ru)
{
    for (int level = 2; level >= 0; level--)
        for (size_t i = 0; i < ru->n; i++)
            if (ll_dec_match_level(w, ru->branches[i]) == level)
                return (int)i;
    return -1;
}

static const char *tname(const ll_node *n)
{
    return n->fullname ? n->fullname : ll_type_name(n->type);
}

/* A type for error messages, with its logical type: "bytes(decimal(38,2))", "long(date)". */
const char *ll_dec_lname(const ll_node *n, char *buf, size_t len)
{
    if (n->logical == LLL_DECIMAL)
        snprintf(buf, len, "%s(decimal(%d,%d))", tname(n), n->precision, n->scale);
    else if (n->logical != LLL_NONE)
        snprintf(buf, len, "%s(%s)", tname(n), ll_logical_name(n->logical));
    else
        snprintf(buf, len, "%s", tname(n));
    return buf;
}

/* "[null, string]": the branches of a reader union, for error messages. */
const char *ll_dec_union_name(const ll_node *u, char *buf, size_t len)
{
    size_t k = 0;
    k += (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < u->n && k < len; i++) {
        char b[80];
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "",
                              ll_dec_lname(u->branches[i], b, sizeof b));
    }
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}
