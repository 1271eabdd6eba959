#!/usr/bin/env bash
# scripts/bench/standby.sh up|down — a synchronous streaming standby of the benchmark's PostgreSQL
# (scripts/bench.sh, phase "standby" of tools/nifisim/bench.py; docs/performance.md "Synchronous
# standby", docs/operations.md "PostgreSQL high availability").
#
#   up    pg_basebackup of the cluster of $LL_RUN_DIR/pg into $LL_RUN_DIR/pg-standby (streaming
#         its WAL, application_name bench_standby), started on a free loopback port with the
#         primary's durable settings, then synchronous_standby_names = 'bench_standby' on the
#         primary (ALTER SYSTEM, reload) and a wait (60 s at most) until pg_stat_replication
#         shows it sync: every commit then returns once the standby has flushed its WAL.
#   down  synchronous_standby_names reset on the primary (first: no commit waits for a standby
#         that is going), the standby stopped (fast, 60 s at most) and its folder removed.
#
# Both machines are this one: the standby's WAL writes share the disk and the cores with the
# primary's, and its round trip is a loopback one. Needs the environment of scripts/env.sh
# (LL_RUN_DIR, LL_PG_BINDIR, LL_PG_CONNINFO, LL_PG_PORT). Exit 0, or 1 with a line on stderr.
set -euo pipefail

die() { printf 'standby.sh: error: %s\n' "$*" >&2; exit 1; }
: "${LL_RUN_DIR:?standby.sh needs LL_RUN_DIR (scripts/env.sh)}" "${LL_PG_BINDIR:?}" "${LL_PG_CONNINFO:?}" \
  "${LL_PG_PORT:?}"
PRIMARY_DIR=$LL_RUN_DIR/pg
DIR=$LL_RUN_DIR/pg-standby
DATA=$DIR/data
NAME=bench_standby

# PostgreSQL refuses root: its tools run as the postgres OS user then (as scripts/env.sh does).
as_pg() {
  if [[ $EUID -eq 0 ]]; then (cd "$DIR" && runuser -u postgres -- "$@")
  else (cd "$DIR" && "$@")
  fi
}
psql_primary() { "$LL_PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 "$LL_PG_CONNINFO" -c "$1"; }

up() {
  [[ -e $DIR ]] && down
  mkdir -p "$DIR"
  [[ $EUID -eq 0 ]] && chown postgres: "$DIR"
  as_pg "$LL_PG_BINDIR/pg_basebackup" -h 127.0.0.1 -p "$LL_PG_PORT" -U postgres -D "$DATA" -X stream \
    --checkpoint=fast -R >"$DIR/basebackup.log" 2>&1 || { tail -n 20 "$DIR/basebackup.log" >&2; die "pg_basebackup failed"; }
  local port
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # the primary's configuration came with the copy; the standby's own port, socket and name
  cat >>"$DATA/postgresql.auto.conf" <<EOF
port = $port
unix_socket_directories = '$DIR'
primary_conninfo = 'host=127.0.0.1 port=$LL_PG_PORT user=postgres application_name=$NAME'
hot_standby = on
EOF
  as_pg "$LL_PG_BINDIR/pg_ctl" -D "$DATA" -l "$DIR/postgres.log" -w -t 60 start >/dev/null ||
    { tail -n 20 "$DIR/postgres.log" >&2; die "the standby did not start"; }
  psql_primary "ALTER SYSTEM SET synchronous_standby_names = '$NAME'"
  psql_primary "SELECT pg_reload_conf()" >/dev/null
  local i state=
  for ((i = 0; i < 120; i++)); do
    state=$(psql_primary "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$NAME'")
    [[ $state == sync ]] && break
    sleep 0.5
  done
  [[ $state == sync ]] || die "the standby is not synchronous after 60 s (state '${state:-none}'; $DIR/postgres.log)"
  printf 'standby.sh: synchronous standby %s on 127.0.0.1:%s (%s)\n' "$NAME" "$port" "$DATA" >&2
}

down() {
  psql_primary "ALTER SYSTEM RESET synchronous_standby_names" || true
  psql_primary "SELECT pg_reload_conf()" >/dev/null || true
  if [[ -f $DATA/postmaster.pid ]]; then
    as_pg "$LL_PG_BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null || true
  fi
  rm -rf "$DIR"
}

[[ -d $PRIMARY_DIR/data ]] || die "no cluster in $PRIMARY_DIR (scripts/env.sh up first)"
case ${1:-} in
  up) up ;;
  down) down ;;
  *) echo "usage: standby.sh up|down" >&2; exit 2 ;;
esac
