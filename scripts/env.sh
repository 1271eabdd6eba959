#!/usr/bin/env bash
# scripts/env.sh — the project's development and test environment, from a fresh Debian 12.
#
#   env.sh install          Debian packages + Kafka broker jars (cached outside the tree)
#   env.sh up               install, then a throwaway PostgreSQL 15 and a single-node KRaft
#                           broker on free loopback ports, the topics of config/topics.conf,
#                           and $LL_RUN_DIR/env (sourceable); prints the env on stdout;
#                           $LL_RUN_DIR/conf/<service>.conf: one ready configuration per
#                           service for this broker and database (docs/environment.md "Run one service by hand")
#   env.sh down             stop both, remove $LL_RUN_DIR
#   env.sh status           what runs (exit 0 when both run, 3 otherwise)
#   env.sh topics [--reset] create the missing topics (--reset: delete and recreate them)
#   env.sh check            PostgreSQL select 1 + Kafka transactional round trip
#   env.sh stop  pg|kafka   stop one of them, keep its data and port (failure tests)
#   env.sh start pg|kafka   start it again on the same port
#   env.sh stop|start broker N  one node (1-3) of the LL_KAFKA_BROKERS=3 cluster
#   env.sh start pgbouncer  PgBouncer (pool_mode=transaction) in front of PostgreSQL; `stop
#                           pgbouncer` stops it; `down` always does (scripts/env_pgbouncer.sh)
#
# Every command is idempotent. Messages go to stderr; `up` prints the env file on stdout, so
# `eval "$(scripts/env.sh up)"` works. See docs/environment.md.
#
# Settings (environment): LL_RUN_DIR (/tmp/loadledger-run), LL_CACHE_DIR
# ($HOME/.cache/loadledger), LL_TOPIC_PREFIX (loadledger.), LL_KAFKA_VERSION (4.1.1; 3.9.1 secure),
# LL_KAFKA_HEAP (512m), LL_KAFKA_START_TIMEOUT (90), LL_KAFKA_DATA_DIR (the broker's log segments
# and KRaft metadata; default $LL_RUN_DIR/kafka/data; another folder, e.g. on a tmpfs, is linked
# there at the first start and removed by `down`: scripts/bench.sh keeps the broker's writes off the
# disk of PostgreSQL's WAL that way, docs/performance.md); for tests only: LL_KAFKA_CLUSTER_ID (the
# KRaft cluster id of a fresh broker, random by default); for scripts/bench.sh: LL_PG_DURABLE=1
# (fsync, synchronous_commit and full_page_writes on; default off, a throwaway cluster) and
# LL_PG_STAT_STATEMENTS=1 (pg_stat_statements loaded: top-level statements, utility ones included)
# and LL_PG_CONF_EXTRA (a settings file the cluster's loadledger.conf includes: bench.sh --history's
# scripts/bench/history-pg.conf). All are read when PostgreSQL starts. LL_PGBOUNCER=1: `up` starts PgBouncer too
# (LL_PGBOUNCER_POOL_SIZE, 10). LL_SECURE=1: `up` makes a secure environment (TLS + SCRAM on
# PostgreSQL and Kafka, one user per service, Kafka ACLs; scripts/env_secure.sh).
# LL_KAFKA_BROKERS=3: `up` makes a 3-node KRaft cluster instead of the single broker
# (replication 3, min.insync.replicas 2; scripts/env_kafka_cluster.sh).
# A failed `up` stops what runs in the run dir (PostgreSQL and Kafka) before it exits.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
KAFKA_TPL_DIR=$SCRIPT_DIR/kafka
TOPICS_CONF=$REPO_ROOT/config/topics.conf

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
LL_RUN_DIR=${LL_RUN_DIR:-/tmp/loadledger-run}
# The secure mode's broker is Kafka 3.9 (SCRAM with Debian's librdkafka: scripts/env_secure.sh).
if [[ ${LL_SECURE:-0} == 1 || -d $LL_RUN_DIR/secure ]]; then
  LL_KAFKA_VERSION=${LL_KAFKA_VERSION:-3.9.1}
fi
LL_KAFKA_VERSION=${LL_KAFKA_VERSION:-4.1.1}
LL_LOG4J_VERSION=${LL_LOG4J_VERSION:-2.25.3}
LL_SLF4J_VERSION=${LL_SLF4J_VERSION:-2.0.17}
LL_CACHE_DIR=${LL_CACHE_DIR:-$HOME/.cache/loadledger}
LL_TOPIC_PREFIX_GIVEN=${LL_TOPIC_PREFIX:+yes}
LL_TOPIC_PREFIX=${LL_TOPIC_PREFIX:-loadledger.}
LL_KAFKA_HEAP=${LL_KAFKA_HEAP:-512m}
LL_KAFKA_START_TIMEOUT=${LL_KAFKA_START_TIMEOUT:-90}
LL_KAFKA_CLUSTER_ID=${LL_KAFKA_CLUSTER_ID:-}
LL_PG_DURABLE=${LL_PG_DURABLE:-0}
LL_PG_STAT_STATEMENTS=${LL_PG_STAT_STATEMENTS:-0}
PG_VERSION=15
PG_BIN=/usr/lib/postgresql/$PG_VERSION/bin
PY=/usr/bin/python3

KAFKA_HOME=$LL_CACHE_DIR/kafka-$LL_KAFKA_VERSION
KAFKA_LIBS=$KAFKA_HOME/libs

PG_DIR=$LL_RUN_DIR/pg
PG_DATA=$PG_DIR/data
PG_SOCK=$PG_DIR/socket
PG_LOG=$PG_DIR/postgres.log
K_DIR=$LL_RUN_DIR/kafka
K_CONF=$K_DIR/server.properties
K_PIDFILE=$K_DIR/kafka.pid
K_OUT=$K_DIR/kafka.out
K_LOG=$K_DIR/server.log
K_DATA_MARKER=.loadledger-kafka-data # in an LL_KAFKA_DATA_DIR made by env.sh: `down` may remove it
ENV_FILE=$LL_RUN_DIR/env
CONF_DIR=$LL_RUN_DIR/conf
SERVICE_NAMES=(registrar claimer completion dispatcher sweeper)
RUN_MARKER=$LL_RUN_DIR/.loadledger-run

APT_PACKAGES=(build-essential cmake pkg-config librdkafka-dev libpq-dev libavro-dev uuid-dev
  libcurl4-openssl-dev libssl-dev libcmocka-dev libjansson-dev libmicrohttpd-dev libncurses-dev postgresql
  python3-avro python3-confluent-kafka python3-psycopg2 python3-pytest python3-prometheus-client docker-compose tmux
  valgrind clang-format clang-tidy clang libclang-rt-14-dev default-jre-headless maven pgbouncer spin
  default-jdk-headless openssl docker.io debootstrap systemd git)
# promtool (checks and unit-tests packaging/prometheus/loadledger.rules.yml: ctest label alerts);
# python3-yaml reads the rules in tests/integration/test_alert_metrics.py
APT_PACKAGES+=(prometheus python3-yaml)
# Java 17 by name, whatever other Java comes first on PATH: the Apicurio schema registry of
# tests/integration/test_registry.py (Quarkus 1.12, Java 11..17; tests/registry/apicurio) runs on it
APT_PACKAGES+=(openjdk-17-jre-headless)

export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 LC_ALL=C.UTF-8

# shellcheck source=scripts/env_pgbouncer.sh
. "$SCRIPT_DIR/env_pgbouncer.sh"
# shellcheck source=scripts/env_secure.sh
. "$SCRIPT_DIR/env_secure.sh"
# shellcheck source=scripts/env_kafka_cluster.sh
. "$SCRIPT_DIR/env_kafka_cluster.sh"

log() { printf 'env.sh: %s\n' "$*" >&2; }
die() { printf 'env.sh: error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# Commands that need root (apt-get): directly as root, else through sudo.
as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"
  elif have sudo; then sudo -n "$@" || die "'$*' needs root (sudo -n failed)"
  else die "'$*' needs root and sudo is not installed"
  fi
}

# PostgreSQL refuses to run as root: as root, run its tools as the postgres OS user (from a
# folder it can read, or initdb fails to find its cwd); as anyone else, as that user.
as_pg() {
  if [[ $EUID -eq 0 ]]; then (cd "$PG_DIR" && runuser -u postgres -- "$@")
  else (cd "$PG_DIR" && "$@")
  fi
}

# Lock: one env.sh at a time per run dir. The fd is closed for the daemons we start.
take_lock() {
  local lockfile=${LL_RUN_DIR%/}.lock
  mkdir -p "$(dirname "$lockfile")"
  exec 9>>"$lockfile"
  if ! flock -w 600 9; then die "another env.sh holds $lockfile for more than 600 s"; fi
}

# ---------------------------------------------------------------------------------------------
# ports

# free_ports N: N distinct free TCP ports on 127.0.0.1 (the kernel picks them).
free_ports() {
  "$PY" - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# port_free P: nobody listens on 127.0.0.1:P and we may bind it.
port_free() {
  "$PY" -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try: s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError: sys.exit(1)' "$1"
}

# alive PID: the process exists and is not a zombie (a killed daemon whose parent has not
# reaped it yet still answers kill -0; PostgreSQL would then refuse its stale lock file).
alive() {
  local st
  kill -0 "$1" 2>/dev/null || return 1
  st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 0
  [[ $st != Z && $st != X ]]
}

# wait_ports_free P...: up to 15 s for the ports to be free (a killed server's last threads).
wait_ports_free() {
  local i p busy
  for ((i = 0; i < 75; i++)); do
    busy=0
    for p in "$@"; do port_free "$p" || busy=1; done
    ((busy)) || return 0
    sleep 0.2
  done
  return 1
}

port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# install

missing_packages() {
  local p status
  declare -A st=()
  while read -r p status; do st[$p]=$status; done < <(
    dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${APT_PACKAGES[@]}" 2>/dev/null || true)
  for p in "${APT_PACKAGES[@]}"; do
    case $p in
      default-jre-headless) have java && continue ;;
      maven) have mvn && continue ;;
      default-jdk-headless) have javac && have keytool && continue ;;
    esac
    [[ ${st[$p]:-} == ii* ]] || printf '%s\n' "$p"
  done
}

install_packages() {
  local missing
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]} == 0)); then
    log "Debian packages: all present"
    return 0
  fi
  log "Debian packages missing: ${missing[*]}"
  log "apt-get update ..."
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null >&2
  log "apt-get install ${missing[*]} ..."
  as_root apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends \
    "${missing[@]}" </dev/null >&2
  mapfile -t missing < <(missing_packages)
  ((${#missing[@]} == 0)) || die "still missing after apt-get install: ${missing[*]}"
}

java_bin() {
  if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then echo "$JAVA_HOME/bin/java"
  else command -v java
  fi
}

check_java() {
  local j v
  j=$(java_bin) || die "java not found (install default-jre-headless)"
  v=$("$j" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p')
  [[ ${v%%.*} =~ ^[0-9]+$ && ${v%%.*} -ge 17 ]] ||
    die "Kafka $LL_KAFKA_VERSION needs Java 17 or newer; $j is ${v:-unknown}"
}

# The jars every start needs; a missing one means the fetch is incomplete.
kafka_libs_ok() {
  local j
  for j in "kafka_2.13-$LL_KAFKA_VERSION.jar" "kafka-clients-$LL_KAFKA_VERSION.jar" \
    "kafka-server-$LL_KAFKA_VERSION.jar" "kafka-raft-$LL_KAFKA_VERSION.jar" \
    "log4j-core-$LL_LOG4J_VERSION.jar" "log4j-slf4j2-impl-$LL_LOG4J_VERSION.jar" \
    "slf4j-api-$LL_SLF4J_VERSION.jar"; do
    [[ -f $1/$j ]] || { log "missing $j in $1"; return 1; }
  done
  if compgen -G "$1/slf4j-api-1.*.jar" >/dev/null; then
    log "an slf4j-api 1.x jar is in $1: it would not bind log4j-slf4j2-impl"
    return 1
  fi
}

fetch_kafka() {
  local pom stamp tmp
  mkdir -p "$KAFKA_HOME"
  # fd 8: one fetch at a time per cache folder; closed again before any daemon starts.
  exec 8>>"$KAFKA_HOME/.lock"
  flock -w 900 8 || die "another env.sh has been fetching into $KAFKA_HOME for 15 minutes"
  pom=$KAFKA_HOME/pom.xml
  sed -e "s/@KAFKA_VERSION@/$LL_KAFKA_VERSION/g" -e "s/@LOG4J_VERSION@/$LL_LOG4J_VERSION/g" \
    -e "s/@SLF4J_VERSION@/$LL_SLF4J_VERSION/g" "$KAFKA_TPL_DIR/pom.xml.in" >"$pom.new"
  mv -f "$pom.new" "$pom"
  stamp=$(sha256sum "$pom" | cut -d' ' -f1)
  if [[ -f $KAFKA_HOME/.complete && $(<"$KAFKA_HOME/.complete") == "$stamp" && -d $KAFKA_LIBS ]]; then
    log "Kafka $LL_KAFKA_VERSION jars: cached in $KAFKA_LIBS"
    exec 8>&-
    return 0
  fi
  have mvn || die "mvn not found (install maven)"
  log "Kafka $LL_KAFKA_VERSION jars: fetching from Maven Central into $KAFKA_LIBS ..."
  tmp=$(mktemp -d "$KAFKA_HOME/libs.tmp.XXXXXX")
  # -Duser.home: Maven takes ~/.m2 from the passwd entry, not from $HOME.
  if ! (cd "$KAFKA_HOME" && mvn -B -q "-Duser.home=$HOME" -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp" </dev/null >"$KAFKA_HOME/mvn.log" 2>&1); then
    tail -n 30 "$KAFKA_HOME/mvn.log" >&2 || true
    rm -rf "$tmp"
    die "mvn dependency:copy-dependencies failed (full log: $KAFKA_HOME/mvn.log)"
  fi
  kafka_libs_ok "$tmp" || { rm -rf "$tmp"; die "fetched jars incomplete (see $KAFKA_HOME/mvn.log)"; }
  rm -rf "$KAFKA_LIBS"
  mv "$tmp" "$KAFKA_LIBS"
  echo "$stamp" >"$KAFKA_HOME/.complete"
  log "Kafka $LL_KAFKA_VERSION jars: $(find "$KAFKA_LIBS" -name '*.jar' | wc -l) jars in $KAFKA_LIBS"
  exec 8>&-
}

cmd_install() {
  install_packages
  [[ -x $PY ]] || die "$PY not found"
  "$PY" -c 'import confluent_kafka' 2>/dev/null || die "$PY cannot import confluent_kafka"
  [[ -x $PG_BIN/initdb ]] || die "$PG_BIN/initdb not found (PostgreSQL $PG_VERSION)"
  check_java
  fetch_kafka
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL

pg_port_file=$PG_DIR/port
pg_port() { cat "$pg_port_file" 2>/dev/null || true; }

pg_running() {
  [[ -f $PG_DATA/postmaster.pid ]] || return 1
  local pid
  pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid"
}

pg_ready() {
  local p
  p=$(pg_port)
  [[ -n $p ]] && pg_running && "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$p" -U postgres -d postgres -t 2
}

# pg_conf PORT: the loadledger.conf of the cluster. Durability off unless LL_PG_DURABLE=1 (a
# throwaway test cluster); LL_PG_STAT_STATEMENTS=1 loads pg_stat_statements (scripts/bench.sh).
pg_conf() {
  local durable=off
  [[ $LL_PG_DURABLE == 1 ]] && durable=on
  cat <<EOF
# Written by scripts/env.sh: loopback only; durability $durable (LL_PG_DURABLE=$LL_PG_DURABLE).
listen_addresses = '127.0.0.1'
port = $1
unix_socket_directories = '$PG_SOCK'
max_connections = 200
fsync = $durable
synchronous_commit = $durable
full_page_writes = $durable
timezone = 'UTC'
log_timezone = 'UTC'
EOF
  if [[ $LL_PG_STAT_STATEMENTS == 1 ]]; then
    cat <<EOF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = top
pg_stat_statements.track_utility = on
pg_stat_statements.max = 10000
EOF
  fi
  if [[ -n ${LL_PG_CONF_EXTRA:-} ]]; then
    [[ -r $LL_PG_CONF_EXTRA ]] || { echo "env.sh: LL_PG_CONF_EXTRA: cannot read $LL_PG_CONF_EXTRA" >&2; return 1; }
    printf "include '%s'\n" "$LL_PG_CONF_EXTRA"
  fi
  sec_pg_conf
}

pg_start() {
  if pg_ready; then return 0; fi
  [[ -x $PG_BIN/initdb ]] || die "$PG_BIN/initdb not found: run scripts/env.sh install"
  mkdir -p "$PG_DIR"
  if [[ $EUID -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "no 'postgres' OS user (install the postgresql package)"
    chown postgres:postgres "$PG_DIR"
    runuser -u postgres -- test -x "$PG_DIR" ||
      die "user postgres cannot reach $PG_DIR: choose an LL_RUN_DIR readable by others (e.g. under /tmp)"
  fi
  if [[ ! -f $PG_DATA/PG_VERSION ]]; then
    rm -rf "$PG_DATA"
    log "PostgreSQL: initdb $PG_DATA ..."
    as_pg mkdir -p "$PG_SOCK"
    local sec_args
    mapfile -t sec_args < <(sec_initdb_args)
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth-local=trust --auth-host=trust \
      -E UTF8 --locale=C.UTF-8 --no-sync "${sec_args[@]}" >"$PG_DIR/initdb.log" 2>&1 ||
      { tail -n 20 "$PG_DIR/initdb.log" >&2; die "initdb failed (log: $PG_DIR/initdb.log)"; }
    echo "include_if_exists = 'loadledger.conf'" | as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null
  fi
  if pg_running; then
    log "PostgreSQL: the server runs but does not answer on 127.0.0.1:$(pg_port): restarting it"
    pg_stop
  fi
  if [[ -f $PG_DATA/postmaster.pid ]] && ! pg_running; then
    # A postmaster killed hard: PostgreSQL would take a zombie's pid for a live server.
    log "PostgreSQL: removing the stale lock files of a dead server"
    rm -f "$PG_DATA/postmaster.pid" "$PG_SOCK"/.s.PGSQL.*
  fi
  local port
  port=$(pg_port)
  [[ -n $port ]] && { wait_ports_free "$port" || true; }
  if [[ -z $port ]] || ! port_free "$port"; then
    [[ -n $port ]] && log "PostgreSQL: port $port is taken now, picking another"
    port=$(free_ports 1)
  fi
  pg_conf "$port" | as_pg tee "$PG_DATA/loadledger.conf" >/dev/null
  echo "$port" >"$pg_port_file"
  log "PostgreSQL $PG_VERSION: starting on 127.0.0.1:$port ..."
  # setsid: the server leaves the caller's session (no signal from its terminal reaches it).
  if ! as_pg setsid -w "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t 60 -s 9>&-; then
    tail -n 20 "$PG_LOG" >&2 || true
    die "PostgreSQL did not start (log: $PG_LOG)"
  fi
  local psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
  if [[ -z $("${psql[@]}" -d postgres -tAc "select 1 from pg_database where datname = 'loadledger'") ]]; then
    "${psql[@]}" -d postgres -c 'create database loadledger' >/dev/null
    log "PostgreSQL: database loadledger created"
  fi
}

pg_stop() {
  if ! pg_running; then return 0; fi
  log "PostgreSQL: stopping ..."
  if ! as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m fast -w -t 30 -s; then
    log "PostgreSQL: fast stop failed, immediate stop"
    as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m immediate -w -t 30 -s || true
  fi
  if pg_running; then
    local pid
    pid=$(head -n 1 "$PG_DATA/postmaster.pid")
    log "PostgreSQL: postmaster $pid still there, kill -9"
    kill -9 "$pid" 2>/dev/null || true
  fi
}

# ---------------------------------------------------------------------------------------------
# Kafka

k_ports_file=$K_DIR/ports
k_port() { cut -d' ' -f1 "$k_ports_file" 2>/dev/null || true; }
k_controller_port() { cut -d' ' -f2 "$k_ports_file" 2>/dev/null || true; }
# The PROXIED listener (server.properties.in): "<broker port> <advertised proxy port>".
k_proxied_file=$K_DIR/proxied_ports
k_proxied_port() { cut -d' ' -f1 "$k_proxied_file" 2>/dev/null || true; }
k_proxy_port() { cut -d' ' -f2 "$k_proxied_file" 2>/dev/null || true; }

# Keeps the PROXIED ports of the last start (the proxy's may be in use by a drill: not checked),
# or picks two free ones.
pick_proxied_ports() {
  local lp ap
  read -r lp ap < <(cat "$k_proxied_file" 2>/dev/null || echo "")
  [[ -n ${lp:-} ]] && { wait_ports_free "$lp" || true; }
  if [[ -z ${lp:-} || -z ${ap:-} ]] || ! port_free "$lp"; then read -r lp ap < <(free_ports 2); fi
  echo "$lp $ap" >"$k_proxied_file"
}

# The pid of our broker, if it runs (checked against its command line, never another process).
kafka_pid() {
  if kc_on; then kc_pids; return; fi
  local pid
  pid=$(cat "$K_PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $K_CONF" || return 1
  alive "$pid" || return 1
  echo "$pid"
}

kafka_ready() {
  if kc_on; then kc_ready; return; fi
  local p
  p=$(k_port)
  [[ -n $p ]] && kafka_pid >/dev/null && port_answers "$p"
}

kafka_log_tail() {
  log "---- tail of $K_LOG ----"
  tail -n 40 "$K_LOG" >&2 2>/dev/null || true
  log "---- tail of $K_OUT ----"
  tail -n 20 "$K_OUT" >&2 2>/dev/null || true
}

# LL_KAFKA_DATA_DIR: made (with a marker), and its data/ linked as $K_DIR/data, before the
# broker's first start; a broker already formatted keeps the folder it has.
kafka_data_dir() {
  [[ -n ${LL_KAFKA_DATA_DIR:-} && ! -e $K_DIR/data && ! -L $K_DIR/data ]] || return 0
  if foreign "$LL_KAFKA_DATA_DIR" "$K_DATA_MARKER"; then
    die "LL_KAFKA_DATA_DIR $LL_KAFKA_DATA_DIR exists, is not empty and was not made by env.sh"
  fi
  mkdir -p "$LL_KAFKA_DATA_DIR/data"
  touch "$LL_KAFKA_DATA_DIR/$K_DATA_MARKER"
  ln -s "$LL_KAFKA_DATA_DIR/data" "$K_DIR/data"
  log "Kafka: data in $LL_KAFKA_DATA_DIR"
}

kafka_start() {
  local fresh_word="existing data" port cport pid java
  if kc_on; then kc_start; return; fi
  if kafka_ready; then return 0; fi
  if pid=$(kafka_pid); then
    log "Kafka: pid $pid runs but its port does not answer: restarting it"
    kafka_stop
  fi
  kafka_libs_ok "$KAFKA_LIBS" 2>/dev/null || die "Kafka jars missing in $KAFKA_LIBS: run scripts/env.sh install"
  java=$(java_bin) || die "java not found"
  mkdir -p "$K_DIR"
  kafka_data_dir
  read -r port cport < <(cat "$k_ports_file" 2>/dev/null || echo "")
  if [[ -n ${port:-} && -n ${cport:-} ]]; then
    # Keep the ports clients know; a broker just killed may hold them for a few seconds.
    wait_ports_free "$port" "$cport" || true
  fi
  if [[ -z ${port:-} || -z ${cport:-} ]] || ! port_free "$port" || ! port_free "$cport"; then
    [[ -n ${port:-} ]] && log "Kafka: port $port or $cport is taken now, picking others"
    read -r port cport < <(free_ports 2)
  fi
  echo "$port $cport" >"$k_ports_file"
  pick_proxied_ports
  sed -e "s|@PORT@|$port|g" -e "s|@CONTROLLER_PORT@|$cport|g" -e "s|@LOG_DIR@|$K_DIR/data|g" \
    -e "s|@PROXIED_PORT@|$(k_proxied_port)|g" -e "s|@PROXY_PORT@|$(k_proxy_port)|g" \
    "$KAFKA_TPL_DIR/server.properties.in" >"$K_CONF"
  sec_kafka_conf "$port" "$cport" >>"$K_CONF"
  cp "$KAFKA_TPL_DIR/log4j2.xml" "$K_DIR/log4j2.xml"
  local jvm=("$java" "-Xms$LL_KAFKA_HEAP" "-Xmx$LL_KAFKA_HEAP" -XX:+UseG1GC
    -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true
    "-Dlog4j2.configurationFile=$K_DIR/log4j2.xml" "-Dll.kafka.log.dir=$K_DIR"
    "-Dkafka.logs.dir=$K_DIR" -cp "$KAFKA_LIBS/*")
  if [[ ! -f $K_DIR/data/meta.properties ]]; then
    fresh_word="new cluster"
    local cluster_id=$LL_KAFKA_CLUSTER_ID
    if [[ -z $cluster_id ]]; then
      cluster_id=$("$PY" -c 'import base64,uuid;print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')
    fi
    log "Kafka: formatting $K_DIR/data (cluster id $cluster_id) ..."
    # --cluster-id=ID in one word: a random id starts with '-' once in 64 times, and as a word
    # of its own the tool would read it as an option ("expected one argument").
    local sec_args
    mapfile -t sec_args < <(sec_format_args)
    if ! "${jvm[@]}" kafka.tools.StorageTool format "--cluster-id=$cluster_id" -c "$K_CONF" \
      --ignore-formatted "${sec_args[@]}" >"$K_DIR/format.log" 2>&1 </dev/null 9>&-; then
      cat "$K_DIR/format.log" >&2
      die "kafka-storage format failed"
    fi
  fi
  log "Kafka $LL_KAFKA_VERSION: starting on 127.0.0.1:$port (controller 127.0.0.1:$cport) ..."
  rm -f "$K_PIDFILE"
  # setsid -f: its own session, detached from ours; the shell writes its pid then becomes java.
  # shellcheck disable=SC2016
  setsid -f nohup bash -c 'echo $$ >"$1"; shift; exec "$@"' ll-kafka "$K_PIDFILE" \
    "${jvm[@]}" kafka.Kafka "$K_CONF" >>"$K_OUT" 2>&1 </dev/null 9>&-
  local i
  for ((i = 0; i < 100; i++)); do [[ -s $K_PIDFILE ]] && break; sleep 0.05; done
  pid=$(cat "$K_PIDFILE" 2>/dev/null) || { kafka_log_tail; die "Kafka did not start"; }
  if ! "$PY" "$KAFKA_TPL_DIR/ll_kafka_admin.py" wait --bootstrap "127.0.0.1:$port" \
    --timeout "$LL_KAFKA_START_TIMEOUT" --pid "$pid"; then
    kafka_log_tail
    kafka_stop
    die "Kafka did not answer within ${LL_KAFKA_START_TIMEOUT}s (logs: $K_LOG, $K_OUT)"
  fi
  # A transactional round trip: creates __transaction_state and __consumer_offsets on a fresh
  # broker, and after a restart waits until their coordinators have loaded, so the first
  # client does not meet COORDINATOR_LOAD_IN_PROGRESS.
  "$PY" "$KAFKA_TPL_DIR/ll_kafka_admin.py" warmup --bootstrap "127.0.0.1:$port" ||
    { kafka_log_tail; die "Kafka warm-up (transactional round trip) failed"; }
  log "Kafka: up (pid $pid, $fresh_word)"
}

kafka_stop() {
  local pid i
  if kc_on; then kc_stop; return; fi
  pid=$(kafka_pid) || return 0
  log "Kafka: stopping pid $pid ..."
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "Kafka: still running after 20 s, kill -9"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
  fi
  rm -f "$K_PIDFILE"
}

# The prefix of the running environment (its env file), unless the caller set LL_TOPIC_PREFIX.
env_file_prefix() {
  sed -n "s/^export LL_TOPIC_PREFIX='\(.*\)'$/\1/p" "$ENV_FILE" 2>/dev/null || true
}

create_topics() {
  local port
  if [[ -z $LL_TOPIC_PREFIX_GIVEN && -f $ENV_FILE ]]; then
    LL_TOPIC_PREFIX=$(env_file_prefix)
    LL_TOPIC_PREFIX=${LL_TOPIC_PREFIX:-loadledger.}
  fi
  kafka_ready || die "Kafka is not running: scripts/env.sh up"
  port=$(k_bootstrap)
  [[ -f $TOPICS_CONF ]] || die "$TOPICS_CONF not found"
  "$PY" "$KAFKA_TPL_DIR/ll_kafka_admin.py" topics --bootstrap "$port" \
    --file "$TOPICS_CONF" --prefix "$LL_TOPIC_PREFIX" "$@" || die "topic creation failed"
}

# ---------------------------------------------------------------------------------------------
# env file

write_env() {
  local kb pp
  kb=$(k_bootstrap)
  pp=$(pg_port)
  cat >"$ENV_FILE.new" <<EOF
# loadledger test environment, written by scripts/env.sh up ($(date -u +%Y-%m-%dT%H:%M:%SZ)).
# Source it:  . $ENV_FILE
# Kafka:      /usr/bin/python3 -c 'from confluent_kafka.admin import AdminClient; print(AdminClient({"bootstrap.servers": "$kb"}).list_topics(timeout=5).topics)'
#             broker log: $(k_logs)
# PostgreSQL: psql "\$LL_PG_CONNINFO"   (trust auth on 127.0.0.1, any role; log: $PG_LOG)
# Stop:       $SCRIPT_DIR/env.sh down
export LL_RUN_DIR='$LL_RUN_DIR'
export LL_KAFKA_BOOTSTRAP='$kb'
export LL_KAFKA_PROXIED_PORT='$(k_proxied_port)'
export LL_KAFKA_PROXY_PORT='$(k_proxy_port)'
export LL_TOPIC_PREFIX='$LL_TOPIC_PREFIX'
export LL_PG_HOST='127.0.0.1'
export LL_PG_PORT='$pp'
export LL_PG_USER='postgres'
export LL_PG_DB='loadledger'
export LL_PG_CONNINFO='host=127.0.0.1 port=$pp dbname=loadledger user=postgres$(sec_pg_connopts)'
export LL_PG_BINDIR='$PG_BIN'
export LL_KAFKA_HOME='$KAFKA_HOME'
export LL_CONF_DIR='$CONF_DIR'
EOF
  pgb_env_lines >>"$ENV_FILE.new"
  sec_env_lines >>"$ENV_FILE.new"
  kc_env_lines >>"$ENV_FILE.new"
  mv -f "$ENV_FILE.new" "$ENV_FILE"
  write_service_confs
}

# service_conf SERVICE: the configuration of ll-SERVICE against this run dir's broker and
# database (its own role ll_SERVICE, created by `loadctl migrate`); every other key keeps the
# default that `ll-SERVICE --config-keys` shows.
service_conf() {
  local svc=$1
  cat <<EOF
# ll-$svc against the environment of scripts/env.sh up in $LL_RUN_DIR (rewritten by every up).
# Run: build/services/ll-$svc --config $CONF_DIR/$svc.conf   (stop: Ctrl-C or SIGTERM)
# Every key, its default and its meaning: ll-$svc --config-keys
db.conninfo = host=127.0.0.1 port=$(pg_port) dbname=loadledger user=ll_$svc$(sec_pg_connopts)
service.instance_id = $svc-byhand
log.level = info
EOF
  # the sweeper talks to the database only
  [[ $svc == sweeper ]] ||
    printf 'kafka.bootstrap.servers = %s\ntopic.prefix = %s\n' "$(k_bootstrap)" "$LL_TOPIC_PREFIX"
  [[ $svc == sweeper ]] || sec_service_kafka_lines "$svc"
}

# The configuration files of every service into $CONF_DIR (each written whole, then renamed).
write_service_confs() {
  local svc
  mkdir -p "$CONF_DIR"
  for svc in "${SERVICE_NAMES[@]}"; do
    (umask 077; service_conf "$svc" >"$CONF_DIR/$svc.conf.new")
    mv -f "$CONF_DIR/$svc.conf.new" "$CONF_DIR/$svc.conf"
  done
}

print_env() {
  cat "$ENV_FILE"
  log "environment up: . $ENV_FILE  (stop: scripts/env.sh down)"
}

# ---------------------------------------------------------------------------------------------
# commands

# foreign DIR MARKER: whether DIR exists, is not empty and lacks env.sh's marker (a folder env.sh
# must neither fill nor remove).
foreign() {
  [[ -d $1 && ! -f $1/$2 && -n $(ls -A "$1") ]]
}

prepare_run_dir() {
  if foreign "$LL_RUN_DIR" "$(basename "$RUN_MARKER")"; then
    die "$LL_RUN_DIR exists, is not empty and was not made by env.sh: choose another LL_RUN_DIR"
  fi
  mkdir -p "$LL_RUN_DIR"
  chmod 755 "$LL_RUN_DIR"
  touch "$RUN_MARKER"
}

cmd_up() {
  cmd_install
  take_lock
  sec_check_mode
  if [[ -f $ENV_FILE ]] && pg_ready && kafka_ready; then
    log "already up"
    if [[ $LL_PGBOUNCER == 1 ]] && ! pgb_ready; then
      pgb_start
      write_env
    fi
    if [[ -n $LL_TOPIC_PREFIX_GIVEN && $LL_TOPIC_PREFIX != "$(env_file_prefix)" ]]; then
      # Another prefix on the running broker (e.g. one per test): its topics, and the env
      # printed with it; the env file keeps the prefix it was written with.
      log "topic prefix $LL_TOPIC_PREFIX: creating its topics"
      create_topics
      sed "s/^export LL_TOPIC_PREFIX=.*/export LL_TOPIC_PREFIX='$LL_TOPIC_PREFIX'/" "$ENV_FILE"
      log "environment up (printed with prefix $LL_TOPIC_PREFIX; $ENV_FILE keeps $(env_file_prefix))"
      return 0
    fi
    write_service_confs
    print_env
    return 0
  fi
  prepare_run_dir
  # From here a failure (die, a failed command under set -e, a signal) stops both servers of
  # this run dir again: a failed `up` leaves nothing running.
  trap up_failed EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP
  [[ $LL_SECURE == 1 ]] && sec_prepare
  pg_start
  sec_pg_roles
  [[ $LL_PGBOUNCER == 1 ]] && pgb_start
  kafka_start
  create_topics
  sec_kafka_acls
  write_env
  trap - EXIT INT TERM HUP
  print_env
}

# EXIT trap of a starting `up`: on a non-zero exit, stop Kafka and PostgreSQL (their data,
# ports and logs stay in the run dir for a look and the next `up`).
up_failed() {
  local rc=$?
  trap - EXIT INT TERM HUP
  ((rc != 0)) || return 0
  set +e
  log "up failed (exit $rc): stopping what runs in $LL_RUN_DIR"
  kafka_stop
  pgb_stop
  pg_stop
  exit "$rc"
}

cmd_down() {
  take_lock
  kafka_stop
  pgb_stop
  pg_stop
  if [[ -d $LL_RUN_DIR ]]; then
    if [[ -f $RUN_MARKER ]]; then
      local kdata
      if [[ -L $K_DIR/data ]] && kdata=$(dirname "$(readlink "$K_DIR/data")") && [[ -f $kdata/$K_DATA_MARKER ]]; then
        rm -rf "$kdata"
        log "removed $kdata"
      fi
      rm -rf "$LL_RUN_DIR"
      log "removed $LL_RUN_DIR"
    else
      log "$LL_RUN_DIR was not made by env.sh: left in place"
    fi
  fi
  log "down"
}

cmd_status() {
  local rc=0 pid
  if pg_ready; then
    log "PostgreSQL: running on 127.0.0.1:$(pg_port) (data $PG_DATA)"
  elif pg_running; then
    log "PostgreSQL: process runs but 127.0.0.1:$(pg_port) does not answer"; rc=3
  else
    log "PostgreSQL: not running"; rc=3
  fi
  if kafka_ready; then
    log "Kafka: running on $(k_bootstrap) (pid $(kafka_pid), data $(k_data_dirs))"
  elif pid=$(kafka_pid); then
    log "Kafka: pid $pid runs but $(k_bootstrap) does not answer"; rc=3
  else
    log "Kafka: not running"; rc=3
  fi
  if pgb_ready; then
    log "PgBouncer: running on 127.0.0.1:$(pgb_port) (pid $(pgb_pid), pool_mode=transaction)"
  elif [[ -d $PGB_DIR ]]; then
    log "PgBouncer: not running"
  fi
  if [[ -f $ENV_FILE ]]; then log "env file: $ENV_FILE"; else log "no env file ($ENV_FILE)"; fi
  return $rc
}

cmd_check() {
  local port
  pg_ready || die "PostgreSQL is not running: scripts/env.sh up"
  kafka_ready || die "Kafka is not running: scripts/env.sh up"
  port=$(pg_port)
  [[ $("$PG_BIN/psql" -X -h 127.0.0.1 -p "$port" -U postgres -d loadledger -tAc 'select 1') == 1 ]] ||
    die "PostgreSQL select 1 failed"
  log "postgres ok: select 1 on 127.0.0.1:$port/loadledger"
  "$PY" "$KAFKA_TPL_DIR/ll_kafka_admin.py" check --bootstrap "$(k_bootstrap)" ||
    die "Kafka check failed"
}

usage() {
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case $cmd in
    install) cmd_install ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    topics)
      take_lock
      create_topics "$@"
      ;;
    check) cmd_check ;;
    stop | start)
      take_lock
      [[ -f $RUN_MARKER ]] || die "not up: scripts/env.sh up first"
      case ${1:-} in
        pg | postgres) if [[ $cmd == stop ]]; then pg_stop; else pg_start && pgb_follow_pg; fi ;;
        kafka) if [[ $cmd == stop ]]; then kafka_stop; else kafka_start; fi ;;
        broker) kc_on || die "env.sh $cmd broker N: a cluster only (LL_KAFKA_BROKERS=3)"
          if [[ $cmd == stop ]]; then kc_node_stop "${2:-}"; else kc_node_start "${2:-}" && kc_wait; fi ;;
        pgbouncer) if [[ $cmd == stop ]]; then pgb_stop; else pgb_start; fi ;;
        *) die "usage: env.sh $cmd pg|kafka|pgbouncer|broker N" ;;
      esac
      write_env
      ;;
    -h | --help | help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
