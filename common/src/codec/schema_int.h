/*
 * schema_int.h - what the schema files share (common/src/codec only; codec_internal.h has the
 * codec's types):
 *
 *   schema.c        loading a schema: our checking parse, the budgets; references, the
 *                   embedded writer schemas' cache, accessors
 *   schema_nodes.c  the ll_node tree: nodes, names and namespaces (avro-c 1.11.1's rules)
 *   schema_parse.c  the checking parse of the schema JSON, type by type
 *   schema_check.c  the expansion budget
 *   schema_ids.c    schema-id tables (the Confluent framing)
 */
#ifndef LL_SCHEMA_INT_H
#define LL_SCHEMA_INT_H

#include "codec_internal.h"

/* A named type registered during one parse. */
typedef struct name_ent {
    const char *fullname; /* owned by the node */
    ll_node *node;
} name_ent;

/* One parse: the schema being built, its named types, where errors go. */
typedef struct pctx {
    ll_schema *s;
    name_ent *names;
    size_t nnames, capnames;
    char *err;
    size_t errlen;
} pctx;

/* schema_nodes.c */
/* A new node of type t, owned by c->s (NULL with c->err on memory exhaustion). */
ll_node *ll_sch_new_node(pctx *c, ll_type t);
/* Frees one node's own allocations. */
void ll_sch_free_node(ll_node *n);
/* Whether s is an Avro name ([A-Za-z_][A-Za-z0-9_]*). */
int ll_sch_is_id(const char *s);
/* name qualified by namespace ns (a dotted name stays as it is); caller frees; NULL: no memory. */
char *ll_sch_qualify(const char *name, const char *ns);
/* The named type fullname of this parse, or NULL. */
ll_node *ll_sch_lookup_name(const pctx *c, const char *fullname);
/* Names node n from its JSON (name, namespace) and registers it; *ns_out: its namespace (or NULL;
 * the caller frees it). 0, or -1 with c->err. */
int ll_sch_name_node(pctx *c, ll_node *n, json_t *json, const char *parent_ns, char **ns_out);
/* Whether two union branches are of one kind (a union may not hold two). */
int ll_sch_same_branch_kind(const ll_node *a, const ll_node *b);

/* schema_parse.c: the node of a type's JSON (depth: nesting so far). NULL with c->err. */
ll_node *ll_sch_parse_type(pctx *c, json_t *json, const char *parent_ns, int depth);

/* schema_check.c */
/* Walks the schema as a datum would, every type reached taking one unit of c. 0, or -1 + err. */
int ll_sch_expand(ll_node *n, ll_counter *c, int depth, int dyn, char *err, size_t errlen);

#endif
