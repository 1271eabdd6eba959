/*
 * ll-claimer - ownership of partitions: PENDING/RETRY -> RUNNING for one claim token, same-token
 * retries, attempt counts, the reissue ACK. Contract §5.3; kafka-edition.md §2, §6.
 */
#include "claimer.h"
#include "ll/svc.h"

static const ll_input inputs[] = {
    {"partition-claims", "PartitionClaim.avsc", "claim-decisions", "ClaimDecision.avsc",
     claimer_apply_partition_claim},
};

int main(int argc, char **argv)
{
    ll_service svc = {"claimer", "partition ownership (claims)", inputs, 1, NULL, NULL, NULL};
    return ll_service_main(argc, argv, &svc);
}
