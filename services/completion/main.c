/*
 * ll-completion - the gates after a claim: chunk reports, partition completion and the run's
 * extract-completion CAS with its VALIDATE_RUN outbox row, partition failure reports.
 * Contract §5.4, §5.5, §5.11, §5.12; kafka-edition.md §2, §6.
 */
#include "completion.h"
#include "ll/svc.h"

static const ll_input inputs[] = {
    {"chunks", "ChunkWritten.avsc", "chunk-outcomes", "ChunkOutcome.avsc", completion_apply_chunk},
    {"partition-failures", "PartitionFailure.avsc", "partition-failure-outcomes",
     "PartitionFailureOutcome.avsc", completion_apply_partition_failure},
};

int main(int argc, char **argv)
{
    ll_service svc = {"completion", "chunk gates, partition failures, run completion", inputs, 2,
                      NULL, NULL, NULL};
    return ll_service_main(argc, argv, &svc);
}
