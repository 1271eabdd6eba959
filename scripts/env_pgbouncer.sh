# scripts/env_pgbouncer.sh — PgBouncer (Debian's package) in transaction pooling mode in front of
# the throwaway PostgreSQL of scripts/env.sh. Sourced by env.sh, not run on its own: it uses
# env.sh's helpers (log, die, as_pg, alive, free_ports, port_free, port_answers, pg_port) and
# variables (LL_RUN_DIR, PG_DIR). See docs/environment.md, "PgBouncer".
#
# Settings (environment): LL_PGBOUNCER=1 makes `env.sh up` start it too (`env.sh start
# pgbouncer` starts it in a running environment); LL_PGBOUNCER_POOL_SIZE (10) server connections
# per database and role.

LL_PGBOUNCER=${LL_PGBOUNCER:-0}
LL_PGBOUNCER_POOL_SIZE=${LL_PGBOUNCER_POOL_SIZE:-10}
PGB_BIN=/usr/sbin/pgbouncer
PGB_DIR=$LL_RUN_DIR/pgbouncer
PGB_INI=$PGB_DIR/pgbouncer.ini
PGB_PIDFILE=$PGB_DIR/pgbouncer.pid
PGB_LOG=$PGB_DIR/pgbouncer.log
pgb_port_file=$PGB_DIR/port

pgb_port() { cat "$pgb_port_file" 2>/dev/null || true; }

# The pid of our PgBouncer, if it runs (checked against its command line: our ini file).
pgb_pid() {
  local pid
  pid=$(cat "$PGB_PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$PGB_INI" || return 1
  echo "$pid"
}

pgb_ready() {
  local p
  p=$(pgb_port)
  [[ -n $p ]] && pgb_pid >/dev/null && port_answers "$p"
}

# pgb_conf PORT PG_PORT: the configuration. Every database of the cluster (a drill's own one
# too) under its own name; roles as in the cluster: trust on loopback like the cluster, a role
# not in the auth file is looked up by auth_query as postgres. min_pool_size 2 with
# server_round_robin: a client's consecutive transactions meet different server connections, as
# on a busy pooler, so anything that leans on session state fails at once, not by chance.
pgb_conf() {
  cat <<EOF
; Written by scripts/env.sh: PgBouncer in transaction pooling mode, loopback only.
[databases]
* = host=127.0.0.1 port=$2

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $1
unix_socket_dir =
pidfile = $PGB_PIDFILE
logfile = $PGB_LOG
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
auth_user = postgres
admin_users = postgres
stats_users = postgres
pool_mode = transaction
max_client_conn = 200
default_pool_size = $LL_PGBOUNCER_POOL_SIZE
min_pool_size = 2
reserve_pool_size = 0
max_db_connections = 60
server_round_robin = 1
server_connect_timeout = 5
server_login_retry = 1
server_idle_timeout = 60
server_lifetime = 600
query_timeout = 60
query_wait_timeout = 30
idle_transaction_timeout = 120
client_login_timeout = 30
ignore_startup_parameters = extra_float_digits
EOF
}

# pgb_write_conf PORT: the ini and the auth file, owned by the user PgBouncer runs as.
pgb_write_conf() {
  local pgp
  pgp=$(pg_port)
  [[ -n $pgp ]] || die "PgBouncer: PostgreSQL has no port yet: scripts/env.sh up"
  pgb_conf "$1" "$pgp" | as_pg tee "$PGB_INI" >/dev/null
  echo '"postgres" ""' | as_pg tee "$PGB_DIR/userlist.txt" >/dev/null
}

pgb_start() {
  if pgb_ready; then return 0; fi
  [[ -x $PGB_BIN ]] || die "$PGB_BIN not found (install the pgbouncer package: scripts/env.sh install)"
  pg_ready || die "PgBouncer needs PostgreSQL running: scripts/env.sh up"
  local pid port i
  if pid=$(pgb_pid); then
    log "PgBouncer: pid $pid runs but its port does not answer: restarting it"
    pgb_stop
  fi
  mkdir -p "$PGB_DIR"
  [[ $EUID -eq 0 ]] && chown postgres:postgres "$PGB_DIR"
  port=$(pgb_port)
  [[ -n $port ]] && { wait_ports_free "$port" || true; }
  if [[ -z $port ]] || ! port_free "$port"; then
    [[ -n $port ]] && log "PgBouncer: port $port is taken now, picking another"
    port=$(free_ports 1)
  fi
  echo "$port" >"$pgb_port_file"
  pgb_write_conf "$port"
  log "PgBouncer $("$PGB_BIN" --version | head -n 1 | cut -d' ' -f2): starting on 127.0.0.1:$port (pool_mode=transaction) ..."
  rm -f "$PGB_PIDFILE"
  # -d: it daemonizes and writes its pid file; PgBouncer refuses to run as root (as_pg).
  as_pg setsid "$PGB_BIN" -d "$PGB_INI" 9>&- || { tail -n 20 "$PGB_LOG" >&2 || true; die "PgBouncer did not start (log: $PGB_LOG)"; }
  for ((i = 0; i < 100; i++)); do pgb_ready && break; sleep 0.1; done
  pgb_ready || { tail -n 20 "$PGB_LOG" >&2 || true; die "PgBouncer did not answer on 127.0.0.1:$port (log: $PGB_LOG)"; }
  log "PgBouncer: up (pid $(pgb_pid))"
}

pgb_stop() {
  local pid i
  pid=$(pgb_pid) || return 0
  log "PgBouncer: stopping pid $pid ..."
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "PgBouncer: still running after 10 s, kill -9"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PGB_PIDFILE"
}

# After PostgreSQL moved to another port (start pg): the new [databases] line, reloaded (HUP).
pgb_follow_pg() {
  local pid
  pid=$(pgb_pid) || return 0
  pgb_write_conf "$(pgb_port)"
  kill -HUP "$pid" 2>/dev/null || true
}

# Lines of the env file while PgBouncer runs.
pgb_env_lines() {
  pgb_ready || return 0
  local p
  p=$(pgb_port)
  cat <<EOF
export LL_PGBOUNCER_PORT='$p'
export LL_PGBOUNCER_CONNINFO='host=127.0.0.1 port=$p dbname=loadledger user=postgres'
EOF
}
