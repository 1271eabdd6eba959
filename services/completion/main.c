/*
 * ll-completion - every gate decision after a claim: chunk reports, partition completion and the
 * run's extract-completion CAS with its VALIDATE_RUN outbox row, partition and run failure
 * reports, validation start (the ACK), metrics, stage-validated, publish result, success.
 * Contract §5.4-§5.12, §5.14; kafka-edition.md §2, §6.
 */
#include "completion.h"
#include "ll/svc.h"

static const ll_input inputs[] = {
    {"chunks", "ChunkWritten.avsc", "chunk-outcomes", "ChunkOutcome.avsc", completion_apply_chunk},
    {"partition-failures", "PartitionFailure.avsc", "partition-failure-outcomes",
     "PartitionFailureOutcome.avsc", completion_apply_partition_failure},
    {"validation-starts", "ValidationStart.avsc", "validation-start-decisions",
     "ValidationStartDecision.avsc", completion_apply_validation_start},
    {"validation-metrics", "ValidationMetrics.avsc", "validation-metrics-outcomes",
     "ValidationMetricsOutcome.avsc", completion_apply_validation_metrics},
    {"stage-validations", "StageValidated.avsc", "stage-validation-outcomes", "StageValidatedOutcome.avsc",
     completion_apply_stage_validated},
    {"publish-results", "PublishResult.avsc", "publish-result-outcomes", "PublishResultOutcome.avsc",
     completion_apply_publish_result},
    {"run-successes", "RunSuccess.avsc", "run-success-outcomes", "RunSuccessOutcome.avsc",
     completion_apply_run_success},
    {"run-failures", "RunFailure.avsc", "run-failure-outcomes", "RunFailureOutcome.avsc",
     completion_apply_run_failure},
};

int main(int argc, char **argv)
{
    ll_service svc = {"completion", "every gate after a claim: chunks, failures, validation, publish result",
                      inputs,       sizeof inputs / sizeof inputs[0],
                      NULL,         NULL,
                      NULL};
    return ll_service_main(argc, argv, &svc);
}
