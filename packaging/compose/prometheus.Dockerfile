# A stand-in for prom/prometheus where no image registry is reachable (scripts/compose-check.sh):
# Debian's Prometheus 2.42, its binary the entrypoint as in the upstream image, data in
# /prometheus, wget for the healthcheck (busybox has it in the upstream image). docker-compose.yml
# mounts packaging/prometheus on /etc/prometheus.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends prometheus wget \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
