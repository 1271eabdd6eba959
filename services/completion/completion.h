/*
 * completion.h - every gate decision after a claim: chunk reports (contract §5.4), partition
 * failure reports (§5.5), the completion CAS with its outbox row (§5.11, §5.12).
 */
#ifndef COMPLETION_H
#define COMPLETION_H

#include "ll/kloop.h"
#include "ll/ledger.h"

/* Applies one chunk report (topic chunks). See chunk_report.c. */
ll_apply completion_apply_chunk(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one partition failure report (topic partition-failures). See partition_failure.c. */
ll_apply completion_apply_partition_failure(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

/* A locked partition row (ownership.c). Strings owned by the struct. */
typedef struct owned_partition {
    ll_run_row run;
    ll_part_status status;
    char stored_token[37]; /* "" when NULL */
    int64_t expected_rows;
} owned_partition;

/* How the reporter's token relates to the partition (ownership.c). */
typedef enum ownership {
    OWN_MATCH = 0,      /* the stored token is the reporter's */
    OWN_MISMATCH,       /* superseded or never claimable: CLAIM_MISMATCH at once */
    OWN_NOT_YET,        /* a token the ledger has not seen while a claim could still be granted: defer */
    OWN_NO_RUN,         /* run not in the ledger yet: defer */
    OWN_RUN_REFUSED,    /* the run request was refused: RUN_NOT_FOUND */
    OWN_NO_PARTITION,   /* manifest applied, partition unknown: PARTITION_NOT_FOUND */
    OWN_NO_MANIFEST     /* run CREATED: the manifest is not applied yet: defer */
} ownership;

/*
 * Locks run then partition (contract §2.8) and compares tokens, consulting the token history
 * (kafka-edition.md §6). *rc is LL_DB_OK unless a query failed. Free with owned_partition_clear.
 */
ownership lock_owned_partition(ll_db *db, const char *run_id, const char *partition_id,
                               const char *token, owned_partition *op, ll_db_rc *rc);
/* Frees the run row inside. */
void owned_partition_clear(owned_partition *op);

#endif
