# A stand-in for apache/kafka:4.1.1 where no image registry is reachable (scripts/compose-check.sh):
# Debian's JRE and the Kafka broker jars scripts/env.sh fetched from Maven Central (copied into the
# build context as libs/), configured from KAFKA_* variables the way the upstream image is
# (KAFKA_FOO_BAR=x -> foo.bar=x, CLUSTER_ID formats the log directory once) and with its paths:
# the log directory is log.dirs of /opt/kafka/config/server.properties, /tmp/kraft-combined-logs,
# unless KAFKA_LOG_DIRS says otherwise (so a container that is removed takes its topics with it,
# as upstream's does); /var/lib/kafka/data exists, owned by appuser, and is a VOLUME, as upstream's
# Dockerfile makes it: docker-compose.yml sets KAFKA_LOG_DIRS there and mounts a named volume.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY libs/ /opt/kafka/libs/
COPY kafka-log4j2.xml /opt/kafka/config/log4j2.xml
COPY kafka-entrypoint.sh /etc/kafka/docker/run
RUN useradd --create-home --home-dir /home/appuser --shell /bin/bash appuser \
    && mkdir -p /var/lib/kafka/data /etc/kafka/secrets /mnt/shared/config \
    && printf '%s\n' 'process.roles=broker,controller' 'node.id=1' \
       'log.dirs=/tmp/kraft-combined-logs' >/opt/kafka/config/server.properties \
    && chown appuser:appuser -R /opt/kafka /mnt/shared/config \
    && chown appuser:root -R /var/lib/kafka /etc/kafka \
    && chmod -R ug+w /etc/kafka /var/lib/kafka && chmod 0755 /etc/kafka/docker/run
USER appuser
VOLUME ["/etc/kafka/secrets", "/var/lib/kafka/data", "/mnt/shared/config"]
CMD ["/etc/kafka/docker/run"]
