/*
 * redrive_publish.h - what the two files of `loadctl redrive` share (not a public header):
 *
 *   redrive.c          the command: coordinates, dead letters found, values prepared, links checked
 *   redrive_publish.c  the chosen records published to their source topics in one Kafka transaction
 */
#ifndef LC_REDRIVE_PUBLISH_H
#define LC_REDRIVE_PUBLISH_H

#include "deadletters.h"

/* The longest wait of a transactional call (ms). */
#define TXN_WAIT_MS 30000

/* One dead letter to redrive. */
typedef struct item {
    const char *coord;
    dl_record d;
    char link[320];       /* the ll.redrive.of value */
    unsigned char *value; /* what is published (owned) */
    size_t value_len;
    bool from_file;
    int64_t new_offset; /* set by the delivery report, -1 until then */
    rd_kafka_resp_err_t err;
} item;

/* redrive_publish.c: publishes every item (n of them; their new offsets and errors set) in one
 * transaction, with the ll.redrive.* headers (reason may be NULL). 0, or -1 with err (then
 * nothing is visible). */
int lc_redrive_publish(const dl_ctx *c, item *items, int n, const char *reason, char *err, size_t errlen);

#endif
