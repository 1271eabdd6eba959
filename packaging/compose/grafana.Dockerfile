# A stand-in for grafana/grafana where no image registry is reachable (Debian has no Grafana;
# scripts/compose-check.sh): grafana-standin.py reads the provisioning files from the official
# image's paths and variables (GF_PATHS_PROVISIONING, GF_SECURITY_ADMIN_*, port 3000) and serves
# the API that shows what was provisioned; wget for the healthcheck, as the official image has.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-yaml wget \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /var/lib/grafana /etc/grafana/provisioning \
    && useradd --uid 472 --home-dir /usr/share/grafana --no-create-home grafana \
    && chown grafana /var/lib/grafana
COPY grafana-standin.py /usr/local/bin/grafana-standin
RUN chmod 0755 /usr/local/bin/grafana-standin
USER grafana
EXPOSE 3000
CMD ["/usr/local/bin/grafana-standin"]
