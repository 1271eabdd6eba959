/*
 * reply.c - the reply record the services build (ll/reply.h).
 */
#include "ll/reply.h"

#include "ll/kloop.h"

json_t *ll_reply_new(const ll_msg *m, const char *run_id, const char *partition_id, const char *outcome,
                     const char *code, const char *message, const char *run_status, const char *part_status)
{
    json_t *r = json_object();
    json_object_set_new(r, "runId", json_string(run_id ? run_id : ""));
    json_object_set_new(r, "partitionId", partition_id ? json_string(partition_id) : json_null());
    json_object_set_new(r, "outcome", json_string(outcome));
    json_object_set_new(r, "code", code ? json_string(code) : json_null());
    json_object_set_new(r, "message", message ? json_string(message) : json_null());
    json_object_set_new(r, "runStatus", run_status ? json_string(run_status) : json_null());
    if (part_status) /* absent: the schema's default (null), and legal for replies without it */
        json_object_set_new(r, "partitionStatus", json_string(part_status));
    json_object_set_new(r, "sourceTopic", json_string(m->topic));
    json_object_set_new(r, "sourcePartition", json_integer(m->partition));
    json_object_set_new(r, "sourceOffset", json_integer(m->offset));
    return r;
}
