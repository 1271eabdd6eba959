#!/usr/bin/env bash
# scripts/env_patroni.sh — a PostgreSQL HA pair under Patroni for the failover drill (issue 27
# item 3, docs/operations.md "PostgreSQL high availability"):
#
#   env_patroni.sh up       Debian `patroni` and `etcd-server` (installed if missing), one etcd,
#                           two PostgreSQL 15 nodes under Patroni (a primary and a streaming
#                           standby), all on free loopback ports in $LL_PATRONI_DIR; the
#                           database loadledger, the project's roles and migrations on the
#                           primary (when a build's loadctl is found); $LL_PATRONI_DIR/env
#                           (sourceable, printed on stdout) with the multi-host conninfo
#   env_patroni.sh down     stops every process it started (Patroni, PostgreSQL, etcd; the
#                           Kafka environment too when `up` had to start it), removes the dir
#   env_patroni.sh status   what runs, Patroni's view (exit 0 when a leader and a streaming
#                           standby run, 3 otherwise)
#
# Replication is asynchronous by default; LL_PATRONI_SYNC=1 at `up` sets synchronous_mode: true
# (a commit returns once the standby has it). Failover settings (bootstrap.dcs below):
# master_start_timeout 0 (a primary whose postmaster dies is not restarted in place: Patroni
# hands the leader key on at once), maximum_lag_on_failover 1 GiB (a lagging standby is still
# promoted: the transactions it lacks are lost, as an async failover loses them), pg_rewind to
# bring the old primary back as a standby (a fresh copy by pg_basebackup when rewind fails).
#
# Kafka: the broker of scripts/env.sh ($LL_RUN_DIR/env, default /tmp/loadledger-run); when it
# does not run, `up` starts it (scripts/env.sh up) and `down` stops it again. The PostgreSQL of
# scripts/env.sh is left alone: this pair has ports and a run dir of its own.
#
# Settings (environment): LL_RUN_DIR (/tmp/loadledger-run), LL_PATRONI_DIR
# (${LL_RUN_DIR}-patroni), LL_PATRONI_SYNC (0), LL_BUILD_DIR (the build whose loadctl migrates;
# default build/, then build-test/).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
LL_RUN_DIR=${LL_RUN_DIR:-/tmp/loadledger-run}
LL_PATRONI_DIR=${LL_PATRONI_DIR:-${LL_RUN_DIR%/}-patroni}
LL_PATRONI_SYNC=${LL_PATRONI_SYNC:-0}
PG_BIN=/usr/lib/postgresql/15/bin
PY=/usr/bin/python3
D=$LL_PATRONI_DIR
ENV_FILE=$D/env
NODES=(n1 n2)
SCOPE=loadledger

export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 LC_ALL=C.UTF-8

log() { printf 'env_patroni.sh: %s\n' "$*" >&2; }
die() { printf 'env_patroni.sh: error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"
  elif have sudo; then sudo -n "$@" || die "'$*' needs root (sudo -n failed)"
  else die "'$*' needs root and sudo is not installed"
  fi
}

# Patroni runs PostgreSQL, which refuses root: as root, as the postgres OS user.
as_pg() {
  if [[ $EUID -eq 0 ]]; then (cd "$D" && runuser -u postgres -- "$@")
  else (cd "$D" && "$@")
  fi
}

alive() {
  local st
  kill -0 "$1" 2>/dev/null || return 1
  st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 0
  [[ $st != Z && $st != X ]]
}

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

LOCKED=0
take_lock() {
  ((LOCKED)) && return 0
  LOCKED=1
  exec 9>>"${D%/}.lock"
  flock -w 300 9 || die "another env_patroni.sh holds ${D%/}.lock"
}

install_packages() {
  local missing=() p
  for p in patroni etcd-server python3-etcd; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  log "apt-get install ${missing[*]} ..."
  # the package lists once, when the packages are not known yet
  apt-cache show "${missing[@]}" >/dev/null 2>&1 ||
    as_root apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null >&2
  # Debian starts neither daemon here (no systemd; policy-rc.d): we run our own on loopback.
  as_root apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}" </dev/null >&2
}

# ---------------------------------------------------------------------------------------------
# ports: "<etcd client> <etcd peer> <pg n1> <pg n2> <rest n1> <rest n2>", kept across restarts

ports() { cat "$D/ports"; }
port_of() { # port_of etcd|peer|pg1|pg2|rest1|rest2
  local a
  read -r -a a <"$D/ports"
  case $1 in etcd) echo "${a[0]}" ;; peer) echo "${a[1]}" ;; pg1) echo "${a[2]}" ;; pg2) echo "${a[3]}" ;;
    rest1) echo "${a[4]}" ;; rest2) echo "${a[5]}" ;; esac
}

pid_of() { # pid_of NAME: our daemon's pid (etcd, n1, n2: Patroni) when it runs
  local pid
  pid=$(cat "$D/$1.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$D/" || return 1
  echo "$pid"
}

# ---------------------------------------------------------------------------------------------
# etcd

etcd_start() {
  pid_of etcd >/dev/null && return 0
  local c p
  c=$(port_of etcd)
  p=$(port_of peer)
  mkdir -p "$D/etcd"
  log "etcd $(etcd --version | sed -n 's/^etcd Version: //p'): starting on 127.0.0.1:$c ..."
  setsid etcd --name ll --data-dir "$D/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "ll=http://127.0.0.1:$p" --initial-cluster-state new \
    --initial-cluster-token "ll-$(basename "$D")" --enable-v2=true \
    --heartbeat-interval 100 --election-timeout 1000 \
    </dev/null >"$D/etcd/etcd.log" 2>&1 9>&- &
  echo $! >"$D/etcd.pid"
  local i
  for ((i = 0; i < 100; i++)); do
    curl -fsS "http://127.0.0.1:$c/health" 2>/dev/null | grep -q '"health":"true"' && return 0
    sleep 0.2
  done
  tail -n 20 "$D/etcd/etcd.log" >&2
  die "etcd did not answer on 127.0.0.1:$c (log $D/etcd/etcd.log)"
}

# ---------------------------------------------------------------------------------------------
# Patroni

# patroni_yml NODE PGPORT RESTPORT: the node's configuration (bootstrap.dcs counts only for
# the node that bootstraps the cluster; both carry it).
patroni_yml() {
  local n=$1 pg=$2 rest=$3 sync=false
  [[ $LL_PATRONI_SYNC == 1 ]] && sync=true
  cat <<EOF
# Written by scripts/env_patroni.sh (LL_PATRONI_SYNC=$LL_PATRONI_SYNC).
scope: $SCOPE
namespace: /loadledger/
name: $n
log:
  level: INFO
  dir: $D/$n/log
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: 127.0.0.1:$(port_of etcd)
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    # a lagging standby is promoted all the same (async: its missing transactions are lost)
    maximum_lag_on_failover: 1073741824
    # a dead primary is not restarted in place: the leader key goes to the standby at once
    master_start_timeout: 0
    primary_start_timeout: 0
    synchronous_mode: $sync
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 512MB
        max_connections: 200
        wal_receiver_status_interval: 1
        wal_sender_timeout: 10s
        wal_receiver_timeout: 10s
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth-local: trust
    - auth-host: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $D/$n/data
  bin_dir: $PG_BIN
  pgpass: $D/$n/pgpass
  use_unix_socket: false
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: '$D/$n'
    timezone: UTC
    log_timezone: UTC
    fsync: "off"
    full_page_writes: "on"
tags:
  nofailover: false
  noloadbalance: false
EOF
}

node_start() { # node_start NODE INDEX
  local n=$1 i=$2
  pid_of "$n" >/dev/null && return 0
  as_pg mkdir -p "$D/$n/log"
  patroni_yml "$n" "$(port_of "pg$i")" "$(port_of "rest$i")" | as_pg tee "$D/$n/patroni.yml" >/dev/null
  log "Patroni $n: PostgreSQL on 127.0.0.1:$(port_of "pg$i"), REST API on 127.0.0.1:$(port_of "rest$i") ..."
  # the lock's fd 9 is not inherited: the daemon must not hold it
  local run=()
  [[ $EUID -eq 0 ]] && run=(runuser -u postgres --)
  (cd "$D" && exec setsid "${run[@]}" patroni "$D/$n/patroni.yml") </dev/null >>"$D/$n/patroni.out" 2>&1 9>&- &
  local k pid
  for ((k = 0; k < 50; k++)); do
    pid=$(pgrep -u postgres -f "patroni $D/$n/patroni.yml" | head -n 1 || true)
    [[ -n $pid ]] && { echo "$pid" >"$D/$n.pid"; return 0; }
    sleep 0.1
  done
  die "Patroni $n did not start (log $D/$n/patroni.out)"
}

# rest_get INDEX PATH: the answer of a node's REST API (empty when it does not answer).
rest_get() { curl -s -m 2 "http://127.0.0.1:$(port_of "rest$1")$2" 2>/dev/null || true; }
# cluster_json: Patroni's /cluster view, from whichever node answers.
cluster_json() {
  local out
  out=$(rest_get 1 /cluster)
  [[ -n $out ]] || out=$(rest_get 2 /cluster)
  echo "$out"
}

# cluster_ready: a leader that is running and one standby streaming from it.
cluster_ready() {
  cluster_json | "$PY" -c '
import json, sys
try:
    c = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
m = c.get("members", [])
lead = [x for x in m if x.get("role") == "leader" and x.get("state") == "running"]
rep = [x for x in m if x.get("role") in ("replica", "sync_standby") and x.get("state") in ("streaming", "running")]
sys.exit(0 if len(lead) == 1 and len(rep) == 1 else 1)'
}

# leader_port: the PostgreSQL port of the current leader.
leader_port() {
  cluster_json | "$PY" -c '
import json, sys
try:
    c = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for x in c.get("members", []):
    if x.get("role") == "leader":
        print(x["port"])'
}

wait_ready() {
  local i
  for ((i = 0; i < ${1:-120}; i++)); do
    cluster_ready && return 0
    sleep 1
  done
  return 1
}

find_loadctl() {
  local b
  for b in ${LL_BUILD_DIR:+"$LL_BUILD_DIR"} "$REPO_ROOT/build" "$REPO_ROOT/build-test"; do
    [[ -x $b/tools/loadctl ]] && { echo "$b/tools/loadctl"; return 0; }
  done
  return 1
}

# The project's database on the primary: created, migrated (roles ll_* included).
bootstrap_db() {
  local port psql lc
  port=$(leader_port)
  [[ -n $port ]] || die "no leader"
  psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
  if [[ -z $("${psql[@]}" -d postgres -tAc "select 1 from pg_database where datname = 'loadledger'") ]]; then
    "${psql[@]}" -d postgres -c 'create database loadledger' >/dev/null
    log "database loadledger created on the primary (127.0.0.1:$port)"
  fi
  if lc=$(find_loadctl); then
    "$lc" --db "$(conninfo postgres loadledger)" migrate >&2 || die "loadctl migrate failed"
    log "migrated with $lc"
  else
    log "no build's loadctl found (LL_BUILD_DIR): database not migrated (the drill migrates its own)"
  fi
}

conninfo() { # conninfo USER DB: the multi-host conninfo
  echo "host=127.0.0.1,127.0.0.1 port=$(port_of pg1),$(port_of pg2) dbname=$2 user=$1 target_session_attrs=read-write"
}

write_env() {
  cat >"$ENV_FILE" <<EOF
# PostgreSQL HA pair (Patroni + etcd), written by scripts/env_patroni.sh up ($(date -u +%FT%TZ)).
# Source it:  . $ENV_FILE      Stop: $REPO_ROOT/scripts/env_patroni.sh down
# Patroni:    patronictl -c $D/n1/patroni.yml list
export LL_PATRONI_DIR='$D'
export LL_PATRONI_SYNC='$LL_PATRONI_SYNC'
export LL_PATRONI_ETCD='127.0.0.1:$(port_of etcd)'
export LL_PATRONI_PG_PORTS='$(port_of pg1),$(port_of pg2)'
export LL_PATRONI_REST_PORTS='$(port_of rest1),$(port_of rest2)'
export LL_PATRONI_NODES='n1,n2'
export LL_PATRONI_CONNINFO='$(conninfo postgres loadledger)'
export LL_PATRONI_KAFKA_ENV='$LL_RUN_DIR/env'
EOF
}

# ---------------------------------------------------------------------------------------------

cmd_up() {
  install_packages
  have patroni && have etcd || die "patroni or etcd not installed"
  id postgres >/dev/null 2>&1 || die "no 'postgres' OS user (install the postgresql package)"
  if ! "$REPO_ROOT/scripts/env.sh" status >/dev/null 2>&1; then
    log "the Kafka environment of scripts/env.sh ($LL_RUN_DIR) does not run: starting it"
    mkdir -p "$D"
    "$REPO_ROOT/scripts/env.sh" up >/dev/null
    touch "$D/started-env"
  fi
  mkdir -p "$D"
  [[ $EUID -eq 0 ]] && chown postgres:postgres "$D"
  take_lock
  [[ -f $D/ports ]] || free_ports 6 >"$D/ports"
  if [[ -f $D/sync ]] && [[ $(<"$D/sync") != "$LL_PATRONI_SYNC" ]]; then
    die "$D was made with LL_PATRONI_SYNC=$(<"$D/sync"): env_patroni.sh down first"
  fi
  echo "$LL_PATRONI_SYNC" >"$D/sync"
  # a failed `up` stops what it started
  trap 'log "up failed: stopping what runs in $D"; cmd_down' EXIT
  etcd_start
  node_start n1 1
  # the first node bootstraps (initdb) and takes the leader key; the second clones from it
  local i
  for ((i = 0; i < 120; i++)); do [[ -n $(leader_port) ]] && break; sleep 1; done
  [[ -n $(leader_port) ]] || { tail -n 30 "$D/n1/patroni.out" >&2; die "n1 did not become the leader"; }
  node_start n2 2
  wait_ready 120 || { tail -n 30 "$D/n2/patroni.out" >&2; die "no streaming standby after 120 s"; }
  bootstrap_db
  write_env
  trap - EXIT
  local how=asynchronous
  [[ $LL_PATRONI_SYNC == 1 ]] && how=synchronous_mode
  log "up: leader on 127.0.0.1:$(leader_port), $how replication"
  cat "$ENV_FILE"
}

cmd_down() {
  [[ -d $D ]] || return 0
  take_lock
  local n pid k
  for n in n1 n2; do
    if pid=$(pid_of "$n"); then
      log "Patroni $n: stopping pid $pid (it stops its PostgreSQL) ..."
      kill -TERM "$pid" 2>/dev/null || true
      for ((k = 0; k < 150; k++)); do alive "$pid" || break; sleep 0.2; done
      alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  # PostgreSQL left behind (Patroni killed, or a postmaster it lost): by the data dir's pid file
  for n in n1 n2; do
    pid=$(head -n 1 "$D/$n/data/postmaster.pid" 2>/dev/null || true)
    if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$D/$n/data"; then
      log "PostgreSQL $n: pid $pid still runs, immediate stop"
      as_pg "$PG_BIN/pg_ctl" stop -D "$D/$n/data" -m immediate -w -t 20 -s || kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if pid=$(pid_of etcd); then
    log "etcd: stopping pid $pid ..."
    kill -TERM "$pid" 2>/dev/null || true
    for ((k = 0; k < 50; k++)); do alive "$pid" || break; sleep 0.2; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ -f $D/started-env ]]; then
    log "stopping the Kafka environment it started ($LL_RUN_DIR)"
    "$REPO_ROOT/scripts/env.sh" down >/dev/null 2>&1 || true
  fi
  rm -rf "$D"
  rm -f "${D%/}.lock"
}

cmd_status() {
  [[ -f $D/ports ]] || { log "not up"; exit 3; }
  local n
  for n in etcd n1 n2; do
    if pid=$(pid_of "$n"); then log "$n: pid $pid"; else log "$n: not running"; fi
  done
  cluster_json >&2 || true
  echo >&2
  cluster_ready || exit 3
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
