/*
 * redrive.h - the decisions of `loadctl redrive` (docs/contract.md K§4, tools/loadctl/README.md)
 * as pure functions: the coordinates an operator names, the link a redriven record carries, which
 * original headers it keeps, and whether a dead letter may be redriven.
 */
#ifndef LL_REDRIVE_H
#define LL_REDRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The header that links a redriven record to its dead letter. */
#define LL_REDRIVE_HEADER "ll.redrive.of"

/*
 * Parses "TOPIC:PARTITION:OFFSET", split at the last two colons: TOPIC non-empty and shorter
 * than topic_len, PARTITION 0..2^31-1 and OFFSET 0..2^63-1 in plain decimal digits (no sign,
 * no spaces, at most 19 digits). Returns 0, or -1 (nothing written to the outputs).
 */
int ll_coord_parse(const char *s, char *topic, size_t topic_len, int32_t *partition, int64_t *offset);

/* The value of LL_REDRIVE_HEADER: "<topic>/<partition>/<offset>" of the dead letter, into out
 * (cut to outlen). Returns the length it needed, as snprintf. */
int ll_redrive_link(const char *dlq_topic, int32_t partition, int64_t offset, char *out, size_t outlen);

/* Whether an original header goes into the redriven record: every one except the loop's ll.*
 * headers (the dead letter's own, and an earlier redrive's link). */
bool ll_redrive_keeps_header(const char *name);

/* May a dead letter be redriven? */
typedef enum ll_redrive_verdict {
    LL_REDRIVE_GO = 0,   /* publish it */
    LL_REDRIVE_ALREADY,  /* its link is on the source topic: refused (ALREADY_REDRIVEN) */
    LL_REDRIVE_UNCHECKED /* the search for the link was stopped by a bound: refused */
} ll_redrive_verdict;

/* linked: the link was found on the source topic; complete: that search read to its end;
 * force: the operator's --force (redrive anyway). */
ll_redrive_verdict ll_redrive_judge(bool linked, bool complete, bool force);

#endif
