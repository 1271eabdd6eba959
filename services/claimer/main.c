/*
 * ll-claimer - ownership of partitions: PENDING/RETRY -> RUNNING for one claim token, same-token
 * retries, attempt counts, the reissue ACK; and of the publish: STAGING_VALIDATED -> PUBLISHING
 * for one publish token. docs/contract.md §5.3, §5.13; docs/contract.md K§2, K§6.
 */
#include "claimer.h"
#include "ll/svc.h"

static const ll_input inputs[] = {
    {.logical = "partition-claims",
     .schema_file = "PartitionClaim.avsc",
     .reply_logical = "claim-decisions",
     .reply_schema = "ClaimDecision.avsc",
     .apply = claimer_apply_partition_claim},
    {.logical = "publish-claims",
     .schema_file = "PublishClaim.avsc",
     .reply_logical = "publish-claim-decisions",
     .reply_schema = "PublishClaimDecision.avsc",
     .apply = claimer_apply_publish_claim},
};

int main(int argc, char **argv)
{
    ll_service svc = {.name = "claimer",
                      .summary = "ownership: partition claims and publish claims",
                      .inputs = inputs,
                      .n_inputs = sizeof inputs / sizeof inputs[0]};
    return ll_service_main(argc, argv, &svc);
}
