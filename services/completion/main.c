/*
 * ll-completion - every gate decision after a claim: chunk reports, partition completion and the
 * run's extract-completion CAS with its VALIDATE_RUN outbox row, partition and run failure
 * reports, validation start (the ACK), metrics, stage-validated, publish result, success.
 * docs/contract.md §5.4-§5.12, §5.14; docs/contract.md K§2, K§6.
 */
#include "chunk.h"
#include "completion.h"
#include "ll/svc.h"

static const ll_input inputs[] = {
    {.logical = "chunks",
     .schema_file = "ChunkWritten.avsc",
     .reply_logical = "chunk-outcomes",
     .reply_schema = "ChunkOutcome.avsc",
     .apply = completion_apply_chunk,
     .bulk = completion_bulk_chunks},
    {.logical = "partition-failures",
     .schema_file = "PartitionFailure.avsc",
     .reply_logical = "partition-failure-outcomes",
     .reply_schema = "PartitionFailureOutcome.avsc",
     .apply = completion_apply_partition_failure},
    {.logical = "validation-starts",
     .schema_file = "ValidationStart.avsc",
     .reply_logical = "validation-start-decisions",
     .reply_schema = "ValidationStartDecision.avsc",
     .apply = completion_apply_validation_start},
    {.logical = "validation-metrics",
     .schema_file = "ValidationMetrics.avsc",
     .reply_logical = "validation-metrics-outcomes",
     .reply_schema = "ValidationMetricsOutcome.avsc",
     .apply = completion_apply_validation_metrics},
    {.logical = "stage-validations",
     .schema_file = "StageValidated.avsc",
     .reply_logical = "stage-validation-outcomes",
     .reply_schema = "StageValidatedOutcome.avsc",
     .apply = completion_apply_stage_validated},
    {.logical = "publish-results",
     .schema_file = "PublishResult.avsc",
     .reply_logical = "publish-result-outcomes",
     .reply_schema = "PublishResultOutcome.avsc",
     .apply = completion_apply_publish_result},
    {.logical = "run-successes",
     .schema_file = "RunSuccess.avsc",
     .reply_logical = "run-success-outcomes",
     .reply_schema = "RunSuccessOutcome.avsc",
     .apply = completion_apply_run_success},
    {.logical = "run-failures",
     .schema_file = "RunFailure.avsc",
     .reply_logical = "run-failure-outcomes",
     .reply_schema = "RunFailureOutcome.avsc",
     .apply = completion_apply_run_failure},
};

int main(int argc, char **argv)
{
    ll_service svc = {.name = "completion",
                      .summary = "every gate after a claim: chunks, failures, validation, publish result",
                      .inputs = inputs,
                      .n_inputs = sizeof inputs / sizeof inputs[0]};
    return ll_service_main(argc, argv, &svc);
}
