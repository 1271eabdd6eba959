#!/bin/bash
# The stand-in broker's start (packaging/compose/kafka.Dockerfile): server.properties from the
# KAFKA_* environment (upstream apache/kafka's convention: KAFKA_FOO_BAR=x -> foo.bar=x;
# KAFKA_HEAP_OPTS is the JVM's heap), the log directory formatted with CLUSTER_ID on the first
# start, then one broker+controller JVM in the foreground.
set -euo pipefail
conf=/var/lib/kafka/server.properties
data=/var/lib/kafka/data
: "${CLUSTER_ID:?CLUSTER_ID is required}"
{
  echo "log.dirs=$data"
  while IFS='=' read -r name value; do
    case $name in
      KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_*) continue ;;
      KAFKA_*) key=${name#KAFKA_}; key=${key,,}; echo "${key//_/.}=$value" ;;
    esac
  done < <(env)
} >"$conf"
# shellcheck disable=SC2086
jvm=(java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.xml
  -cp '/opt/kafka/libs/*')
if [[ ! -f $data/meta.properties ]]; then
  "${jvm[@]}" kafka.tools.StorageTool format --cluster-id="$CLUSTER_ID" -c "$conf" --ignore-formatted
fi
exec "${jvm[@]}" kafka.Kafka "$conf"
