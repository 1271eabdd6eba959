/*
 * reply.h - the reply record every service builds for an input it answers: the fields every reply
 * schema shares (schemas/avro: the Decision and Outcome schemas), the correlation fields included
 * (kafka-edition.md: every input yields exactly one reply).
 */
#ifndef LL_REPLY_H
#define LL_REPLY_H

#include <jansson.h>

struct ll_msg;

/* A new reply object (owned by the caller, usually handed to the loop) with runId, partitionId,
 * outcome, code, message, runStatus, partitionStatus and the source coordinates of input m (its
 * topic, partition and offset) set; NULL strings become JSON null, a NULL part_status leaves
 * partitionStatus to the schema's default. Never NULL (jansson aborts on out of memory as the
 * loop does). */
json_t *ll_reply_new(const struct ll_msg *m, const char *run_id, const char *partition_id,
                     const char *outcome, const char *code, const char *message, const char *run_status,
                     const char *part_status);

#endif
