/* routes.c - the services' inputs and replies, as loadctl reads the topics (routes.h). */
#include "routes.h"

const lc_route LC_ROUTES[LC_N_ROUTES] = {
    {"registrar", "run-requests", "RunRequest.avsc", "run-decisions", "RunDecision.avsc"},
    {"registrar", "manifests", "Manifest.avsc", "manifest-decisions", "ManifestDecision.avsc"},
    {"claimer", "partition-claims", "PartitionClaim.avsc", "claim-decisions", "ClaimDecision.avsc"},
    {"claimer", "publish-claims", "PublishClaim.avsc", "publish-claim-decisions",
     "PublishClaimDecision.avsc"},
    {"completion", "chunks", "ChunkWritten.avsc", "chunk-outcomes", "ChunkOutcome.avsc"},
    {"completion", "partition-failures", "PartitionFailure.avsc", "partition-failure-outcomes",
     "PartitionFailureOutcome.avsc"},
    {"completion", "validation-starts", "ValidationStart.avsc", "validation-start-decisions",
     "ValidationStartDecision.avsc"},
    {"completion", "validation-metrics", "ValidationMetrics.avsc", "validation-metrics-outcomes",
     "ValidationMetricsOutcome.avsc"},
    {"completion", "stage-validations", "StageValidated.avsc", "stage-validation-outcomes",
     "StageValidatedOutcome.avsc"},
    {"completion", "publish-results", "PublishResult.avsc", "publish-result-outcomes",
     "PublishResultOutcome.avsc"},
    {"completion", "run-successes", "RunSuccess.avsc", "run-success-outcomes", "RunSuccessOutcome.avsc"},
    {"completion", "run-failures", "RunFailure.avsc", "run-failure-outcomes", "RunFailureOutcome.avsc"},
};

_Static_assert(sizeof LC_ROUTES / sizeof LC_ROUTES[0] == LC_N_ROUTES, "LC_N_ROUTES");
