#!/bin/bash
# The stand-in broker's start (packaging/compose/kafka.Dockerfile), as upstream apache/kafka's
# /etc/kafka/docker/run: the image's /opt/kafka/config/server.properties (log.dirs=
# /tmp/kraft-combined-logs) overlaid with the KAFKA_* environment (KAFKA_FOO_BAR=x -> foo.bar=x;
# KAFKA_LOG_DIRS moves the log directory; KAFKA_HEAP_OPTS is the JVM's heap), the log directory
# formatted with CLUSTER_ID on the first start (--ignore-formatted), then one broker+controller
# JVM in the foreground.
set -euo pipefail
: "${CLUSTER_ID:?CLUSTER_ID is required}"
conf=/opt/kafka/config/server.properties
declare -A props
order=()
while IFS='=' read -r key value; do
  [[ -z $key || $key == \#* ]] && continue
  props[$key]=$value
  order+=("$key")
done <"$conf"
while IFS='=' read -r name value; do
  case $name in
    KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_* | KAFKA_LOG4J_*) continue ;;
    KAFKA_*)
      key=${name#KAFKA_}; key=${key,,}; key=${key//_/.}
      [[ -v props[$key] ]] || order+=("$key")
      props[$key]=$value ;;
  esac
done < <(env)
run=/tmp/kafka-run.properties
for key in "${order[@]}"; do printf '%s=%s\n' "$key" "${props[$key]}"; done >"$run"
# shellcheck disable=SC2086
jvm=(java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.xml
  -cp '/opt/kafka/libs/*')
logdir=${props[log.dirs]%%,*}
if [[ ! -f $logdir/meta.properties ]]; then
  "${jvm[@]}" kafka.tools.StorageTool format --cluster-id="$CLUSTER_ID" -c "$run" --ignore-formatted
fi
echo "kafka stand-in: log.dirs=${props[log.dirs]}" >&2
exec "${jvm[@]}" kafka.Kafka "$run"
