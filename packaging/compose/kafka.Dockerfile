# A stand-in for apache/kafka:4.1.1 where no image registry is reachable (scripts/compose-check.sh):
# Debian's JRE and the Kafka broker jars scripts/env.sh fetched from Maven Central (copied into the
# build context as libs/), configured from KAFKA_* variables the way the upstream image is
# (KAFKA_FOO_BAR=x -> foo.bar=x, CLUSTER_ID formats the log directory once).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY libs/ /opt/kafka/libs/
COPY kafka-log4j2.xml /opt/kafka/config/log4j2.xml
COPY kafka-entrypoint.sh /opt/kafka/entrypoint.sh
RUN useradd --system --home-dir /var/lib/kafka --create-home appuser && chmod 0755 /opt/kafka/entrypoint.sh
USER appuser
ENTRYPOINT ["/opt/kafka/entrypoint.sh"]
