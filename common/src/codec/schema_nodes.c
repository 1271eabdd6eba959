/*
 * schema_nodes.c - the ll_node tree of a parsed schema (schema_int.h): nodes, Avro names and
 * namespaces (avro-c 1.11.1's rules), the named types of one parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema_int.h"

ll_node *ll_sch_new_node(pctx *c, ll_type t)
{
    ll_schema *s = c->s;
    if (s->nnodes == s->capnodes) {
        size_t cap = s->capnodes ? s->capnodes * 2 : 16;
        ll_node **v = realloc(s->nodes, cap * sizeof *v);
        if (v == NULL)
            goto oom;
        s->nodes = v;
        s->capnodes = cap;
    }
    ll_node *n = calloc(1, sizeof *n);
    if (n == NULL)
        goto oom;
    n->type = t;
    s->nodes[s->nnodes++] = n;
    return n;
oom:
    ll_codec_err(c->err, c->errlen, "out of memory");
    return NULL;
}

void ll_sch_free_node(ll_node *n)
{
    if (n == NULL)
        return;
    free(n->fullname);
    free(n->fields);
    free(n->symbols);
    free(n->branches);
    free(n);
}

/* avro-c's is_avro_id, restricted to ASCII: [A-Za-z_][A-Za-z0-9_]*. */
int ll_sch_is_id(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (size_t i = 0; s[i]; i++) {
        char ch = s[i];
        int alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
        int digit = ch >= '0' && ch <= '9';
        if (!(alpha || (i > 0 && digit)))
            return 0;
    }
    return 1;
}

/* avro-c's qualify_name: "ns.name" when ns is set and name has no dot, else name. */
char *ll_sch_qualify(const char *name, const char *ns)
{
    if (ns != NULL && strchr(name, '.') == NULL) {
        size_t len = strlen(ns) + strlen(name) + 2;
        char *r = malloc(len);
        if (r == NULL)
            return NULL;
        snprintf(r, len, "%s.%s", ns, name);
        return r;
    }
    return strdup(name);
}

ll_node *ll_sch_lookup_name(const pctx *c, const char *fullname)
{
    for (size_t i = 0; i < c->nnames; i++)
        if (strcmp(c->names[i].fullname, fullname) == 0)
            return c->names[i].node;
    return NULL;
}

static int register_name(pctx *c, ll_node *n)
{
    if (ll_sch_lookup_name(c, n->fullname) != NULL) {
        ll_codec_err(c->err, c->errlen, "duplicate type name %s", n->fullname);
        return -1;
    }
    if (c->nnames == c->capnames) {
        size_t cap = c->capnames ? c->capnames * 2 : 8;
        name_ent *v = realloc(c->names, cap * sizeof *v);
        if (v == NULL) {
            ll_codec_err(c->err, c->errlen, "out of memory");
            return -1;
        }
        c->names = v;
        c->capnames = cap;
    }
    c->names[c->nnames].fullname = n->fullname;
    c->names[c->nnames].node = n;
    c->nnames++;
    return 0;
}

/*
 * Names a record, enum or fixed as avro-c does: a dotted "name" carries its namespace, else
 * "namespace", else the enclosing namespace. *ns_out receives the namespace (malloc'd or NULL).
 */
int ll_sch_name_node(pctx *c, ll_node *n, json_t *json, const char *parent_ns, char **ns_out)
{
    const char *what = ll_type_name(n->type);
    json_t *jn = json_object_get(json, "name");
    if (!json_is_string(jn)) {
        ll_codec_err(c->err, c->errlen, "%s without a name", what);
        return -1;
    }
    const char *full = json_string_value(jn);
    const char *dot = strrchr(full, '.');
    char *ns = NULL;
    const char *shortname;
    json_t *jns = json_object_get(json, "namespace");
    if (dot != NULL) {
        ns = strndup(full, (size_t)(dot - full));
        shortname = dot + 1;
        if (ns == NULL)
            goto oom;
    } else if (json_is_string(jns)) { /* avro-c: an empty "namespace" is none */
        shortname = full;
        if (json_string_length(jns) > 0 && (ns = strdup(json_string_value(jns))) == NULL)
            goto oom;
    } else {
        shortname = full;
        if (parent_ns != NULL && (ns = strdup(parent_ns)) == NULL)
            goto oom;
    }
    if (!ll_sch_is_id(shortname)) {
        ll_codec_err(c->err, c->errlen, "invalid %s name \"%.64s\"", what, full);
        free(ns);
        return -1;
    }
    n->name = shortname;
    n->fullname = ll_sch_qualify(shortname, ns);
    if (n->fullname == NULL) {
        free(ns);
        goto oom;
    }
    if (register_name(c, n) != 0) {
        free(ns);
        return -1;
    }
    *ns_out = ns;
    return 0;
oom:
    ll_codec_err(c->err, c->errlen, "out of memory");
    return -1;
}

int ll_sch_same_branch_kind(const ll_node *a, const ll_node *b)
{
    if (a->type != b->type)
        return 0;
    if (a->type == LLT_RECORD || a->type == LLT_ENUM || a->type == LLT_FIXED)
        return strcmp(a->fullname, b->fullname) == 0;
    return 1;
}
