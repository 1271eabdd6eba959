# A stand-in for confluentinc/cp-schema-registry where no image registry is reachable
# (scripts/compose-check.sh): Debian's Python and confluent-kafka running
# schema-registry-standin.py, configured from the official image's SCHEMA_REGISTRY_* variables,
# its schemas kept in the Kafka topic _schemas as the official one keeps them; port 8081, curl for
# the healthcheck, user appuser as upstream.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-confluent-kafka curl \
    && rm -rf /var/lib/apt/lists/* && useradd --create-home appuser
COPY schema-registry-standin.py /usr/local/bin/schema-registry-standin
RUN chmod 0755 /usr/local/bin/schema-registry-standin
USER appuser
EXPOSE 8081
CMD ["/usr/local/bin/schema-registry-standin"]
