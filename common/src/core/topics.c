/*
 * topics.c - topic names and the schema folder. Logical names are those of config/topics.conf;
 * the broker name is topic.<logical>.name if set, else topic.prefix + logical.
 */
#include "ll/topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const LL_ALL_TOPICS[] = {"run-requests",
                                     "manifests",
                                     "partition-claims",
                                     "chunks",
                                     "partition-failures",
                                     "run-decisions",
                                     "manifest-decisions",
                                     "claim-decisions",
                                     "chunk-outcomes",
                                     "partition-failure-outcomes",
                                     "validate-run-commands",
                                     "reissue-partition-commands",
                                     "dead-letters",
                                     "validation-starts",
                                     "validation-start-decisions",
                                     "validation-metrics",
                                     "validation-metrics-outcomes",
                                     "stage-validations",
                                     "stage-validation-outcomes",
                                     "run-successes",
                                     "run-success-outcomes",
                                     "run-failures",
                                     "run-failure-outcomes",
                                     "publish-claims",
                                     "publish-claim-decisions",
                                     "publish-results",
                                     "publish-result-outcomes",
                                     NULL};

void ll_topic_name(const ll_config *cfg, const char *logical, char *out, size_t outlen)
{
    char key[160];
    snprintf(key, sizeof key, "topic.%s.name", logical);
    const char *name = ll_config_get(cfg, key);
    if (name && *name) {
        snprintf(out, outlen, "%s", name);
        return;
    }
    const char *prefix = ll_config_get(cfg, "topic.prefix");
    snprintf(out, outlen, "%s%s", prefix ? prefix : "", logical);
}

const char *ll_schema_dir(const ll_config *cfg)
{
    const char *d = ll_config_get(cfg, "schema.dir");
    if (d && *d)
        return d;
    d = getenv("LL_SCHEMA_DIR");
    if (d && *d)
        return d;
    if (access(LL_DEFAULT_DATADIR "/schemas/avro/RunRequest.avsc", R_OK) == 0)
        return LL_DEFAULT_DATADIR "/schemas/avro";
    return LL_SOURCE_DIR "/schemas/avro";
}

int ll_topic_framing(const ll_config *cfg, const char *logical, ll_framing *out, char *err, size_t errlen)
{
    char key[160];
    snprintf(key, sizeof key, "topic.%s.framing", logical);
    const char *f = ll_config_get(cfg, key);
    if (!f || !*f) {
        *out = LL_FRAMING_BARE;
        return 0;
    }
    int i = ll_config_enum(key, f, LL_FRAMING_NAMES, err, errlen);
    if (i < 0)
        return -1;
    *out = (ll_framing)i;
    return 0;
}

ll_schema *ll_topic_schema_load(const ll_config *cfg, const char *file, char *err, size_t errlen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ll_schema_dir(cfg), file);
    return ll_schema_from_file(path, err, errlen);
}
