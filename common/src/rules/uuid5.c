/*
 * uuid5.c - name-based ids: RFC 4122 version-5 UUIDs under loadledger's own namespace.
 *
 * docs/contract.md K§4: ids the ledger mints (dispatch ids) must be reproducible on a replay,
 * so they are derived from natural keys with SHA-1 name-based UUIDs instead of drawn at random.
 * The SHA-1 and the version/variant bits come from libuuid (util-linux >= 2.31,
 * uuid_generate_sha1); this file only fixes the namespace and the text forms.
 */
#include "ll/rules.h"

#include <string.h>
#include <uuid/uuid.h>

/*
 * The namespace of every loadledger-derived id. A random (version 4) UUID drawn once when the
 * project started; it must never change, or every derived id changes with it.
 */
const char LL_UUID_NAMESPACE[37] = "7eaec1d8-c2fc-466e-8a95-850016384688";

/*
 * RFC 4122 §4.3 version-5 UUID of the bytes of name (no terminator) in namespace ns (a UUID
 * in either case), written lower-case into out[37]. Returns 0, or -1 if ns is not a UUID or an
 * argument is NULL (out untouched).
 */
int ll_uuid_v5(const char *ns, const char *name, char out[37])
{
    char canon[37];
    uuid_t ns_bin, id;
    if (name == NULL || out == NULL || ll_uuid_canonical(ns, canon) != 0 || uuid_parse(canon, ns_bin) != 0)
        return -1;
    uuid_generate_sha1(id, ns_bin, name, strlen(name));
    uuid_unparse_lower(id, out);
    return 0;
}
