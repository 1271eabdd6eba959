# A stand-in for postgres:15 where no image registry is reachable (scripts/compose-check.sh):
# Debian's PostgreSQL 15, initialised from POSTGRES_DB / POSTGRES_USER / POSTGRES_PASSWORD /
# POSTGRES_HOST_AUTH_METHOD the way the upstream image is, data in /var/lib/postgresql/data.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
CMD ["postgres"]
