/*
 * claimer.h - ownership: partition claims (docs/contract.md §5.3) with the claim-token history.
 */
#ifndef CLAIMER_H
#define CLAIMER_H

#include "ll/kloop.h"

/* Applies one partition claim (topic partition-claims). See partition_claim.c. */
ll_apply claimer_apply_partition_claim(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

/* Applies one publish claim (topic publish-claims, docs/contract.md §5.13). See publish_claim.c. */
ll_apply claimer_apply_publish_claim(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

#endif
