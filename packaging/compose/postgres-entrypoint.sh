#!/bin/bash
# The stand-in database's start (packaging/compose/postgres.Dockerfile): on an empty data folder,
# initdb as POSTGRES_USER with POSTGRES_PASSWORD, connections from anywhere with
# POSTGRES_HOST_AUTH_METHOD (scram-sha-256 by default), then POSTGRES_DB; then the command
# (`postgres ARGS...`) in the foreground, listening on every address.
set -euo pipefail
user=${POSTGRES_USER:-postgres}
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all ${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >>"$PGDATA/pg_hba.conf"
  db=${POSTGRES_DB:-$user}
  if [[ $db != postgres ]]; then
    postgres --single -D "$PGDATA" -c listen_addresses='' postgres <<<"CREATE DATABASE \"$db\";" >/dev/null
  fi
fi
if [[ ${1:-} == postgres ]]; then shift; fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
