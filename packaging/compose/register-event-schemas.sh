#!/bin/sh
# docker-compose.yml's one-shot `schema-subjects` (profile registry): registers the schema of each
# topic NiFi writes under <LL_TOPIC_PREFIX><topic>-value at LL_REGISTRY_URL, as nifi/README.md
# step 4 asks (NiFi's ConfluentSchemaRegistry looks a writer schema up and registers nothing; the
# services register their own reply and command subjects). A schema registered again keeps its
# id. Usage: register-event-schemas SCHEMA_DIR (schemas/avro). POSIX sh, sed and curl only (the
# product image has no jq): the .avsc text is sent on one line, quotes and backslashes escaped.
set -eu
dir=$1
: "${LL_REGISTRY_URL:?}" "${LL_TOPIC_PREFIX:=loadledger.}"
n=0
for t in run-requests:RunRequest manifests:Manifest partition-claims:PartitionClaim chunks:ChunkWritten \
         partition-failures:PartitionFailure validation-starts:ValidationStart \
         validation-metrics:ValidationMetrics stage-validations:StageValidated \
         publish-claims:PublishClaim publish-results:PublishResult run-successes:RunSuccess \
         run-failures:RunFailure; do
  topic=${t%%:*} file=$dir/${t#*:}.avsc
  text=$(sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/ /g' "$file" | tr '\n' ' ')
  out=$(printf '{"schema": "%s"}' "$text" |
    curl -fsS --retry 5 --retry-connrefused -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
      --data-binary @- "$LL_REGISTRY_URL/subjects/$LL_TOPIC_PREFIX$topic-value/versions") ||
    { echo "register-event-schemas: $LL_TOPIC_PREFIX$topic-value: registration failed" >&2; exit 1; }
  echo "registered $LL_TOPIC_PREFIX$topic-value: $out"
  n=$((n + 1))
done
echo "register-event-schemas: $n subjects at $LL_REGISTRY_URL"
