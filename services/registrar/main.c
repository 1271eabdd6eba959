/*
 * ll-registrar - run admission: creates runs (one active run per job key + business key) and
 * registers their manifests. docs/contract.md §5.1 and §5.2; docs/contract.md K§2.
 */
#include "ll/svc.h"
#include "registrar.h"

static const ll_input inputs[] = {
    {.logical = "run-requests",
     .schema_file = "RunRequest.avsc",
     .reply_logical = "run-decisions",
     .reply_schema = "RunDecision.avsc",
     .apply = registrar_apply_run_request},
    {.logical = "manifests",
     .schema_file = "Manifest.avsc",
     .reply_logical = "manifest-decisions",
     .reply_schema = "ManifestDecision.avsc",
     .apply = registrar_apply_manifest},
};

int main(int argc, char **argv)
{
    ll_service svc = {.name = "registrar",
                      .summary = "run admission and manifest registration",
                      .inputs = inputs,
                      .n_inputs = sizeof inputs / sizeof inputs[0]};
    return ll_service_main(argc, argv, &svc);
}
