# scripts/env_kafka_cluster.sh — a 3-node KRaft cluster on loopback instead of the single broker
# of scripts/env.sh (LL_KAFKA_BROKERS=3). Sourced by env.sh, not run on its own: it uses env.sh's
# helpers (log, die, alive, free_ports, port_free, port_answers, wait_ports_free, java_bin,
# kafka_libs_ok) and variables (K_DIR, KAFKA_LIBS, KAFKA_TPL_DIR, PY, LL_KAFKA_*).
#
# Three combined broker+controller nodes (one JVM each, heap LL_KAFKA_NODE_HEAP, 320m), node ids
# 1..3, a static controller quorum of the three; replication factor 3 and min.insync.replicas 2
# for the project's topics, the consumer offsets and the transaction state log
# (scripts/kafka/cluster.properties.in). Node i lives in $K_DIR/node<i>/ (server.properties,
# data/, kafka.pid, server.log); its ports are line i of $K_DIR/cluster-ports ("<broker>
# <controller>") and stay the same across restarts (the quorum's addresses are static).
# `env.sh stop broker N` / `start broker N` stop and restart one node (the drills kill -9 it by
# the pid in node<N>/kafka.pid). See docs/environment.md, "A 3-broker cluster".

LL_KAFKA_BROKERS=${LL_KAFKA_BROKERS:-1}
LL_KAFKA_NODE_HEAP=${LL_KAFKA_NODE_HEAP:-320m}
KC_NODES=3
KC_MARK=$K_DIR/brokers
KC_PORTS=$K_DIR/cluster-ports

# kc_on: this run dir's Kafka is (or is to be) the 3-node cluster. Once made, the run dir
# decides (its marker file), whatever LL_KAFKA_BROKERS says later.
kc_on() {
  [[ -f $KC_MARK ]] && return 0
  [[ -f $K_DIR/ports ]] && return 1
  case $LL_KAFKA_BROKERS in
    1) return 1 ;;
    3) return 0 ;;
    *) die "LL_KAFKA_BROKERS=$LL_KAFKA_BROKERS: 1 (one broker) or 3 (a KRaft cluster) only" ;;
  esac
}

kc_dir() { echo "$K_DIR/node$1"; }
kc_broker_port() { sed -n "$1p" "$KC_PORTS" 2>/dev/null | cut -d' ' -f1; }
kc_controller_port() { sed -n "$1p" "$KC_PORTS" 2>/dev/null | cut -d' ' -f2; }

# k_bootstrap: the bootstrap servers of this run dir's Kafka (every node of a cluster).
k_bootstrap() {
  if kc_on; then
    local i out=
    for ((i = 1; i <= KC_NODES; i++)); do out+=${out:+,}127.0.0.1:$(kc_broker_port "$i"); done
    echo "$out"
  else
    echo "127.0.0.1:$(k_port)"
  fi
}

# kc_node_pid N: the pid of node N if it runs (checked against its command line).
kc_node_pid() {
  local pid d
  d=$(kc_dir "$1")
  pid=$(cat "$d/kafka.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $d/server.properties" || return 1
  alive "$pid" || return 1
  echo "$pid"
}

# kc_pids: "p1,p2,p3" when every node runs (status 1 otherwise).
kc_pids() {
  local i p out=
  for ((i = 1; i <= KC_NODES; i++)); do
    p=$(kc_node_pid "$i") || return 1
    out+=${out:+,}$p
  done
  echo "$out"
}

kc_ready() {
  local i p
  [[ -f $KC_PORTS ]] || return 1
  for ((i = 1; i <= KC_NODES; i++)); do
    p=$(kc_broker_port "$i")
    [[ -n $p ]] && kc_node_pid "$i" >/dev/null && port_answers "$p" || return 1
  done
}

# The ports of the three nodes: chosen once, then kept (the quorum voters are static).
kc_ports() {
  [[ -s $KC_PORTS ]] && return 0
  local ports i
  read -r -a ports < <(free_ports $((2 * KC_NODES)))
  : >"$KC_PORTS.new"
  for ((i = 0; i < KC_NODES; i++)); do
    echo "${ports[2 * i]} ${ports[2 * i + 1]}" >>"$KC_PORTS.new"
  done
  mv -f "$KC_PORTS.new" "$KC_PORTS"
}

kc_jvm() {
  local d java
  d=$(kc_dir "$1")
  java=$(java_bin) || die "java not found"
  echo "$java" "-Xms$LL_KAFKA_NODE_HEAP" "-Xmx$LL_KAFKA_NODE_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExplicitGCInvokesConcurrent -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Djava.net.preferIPv4Stack=true "-Dlog4j2.configurationFile=$d/log4j2.xml" "-Dll.kafka.log.dir=$d" \
    "-Dkafka.logs.dir=$d" -cp "$KAFKA_LIBS/*"
}

# kc_configure N CLUSTER_ID: node N's server.properties (and its storage formatted if new).
kc_configure() {
  local n=$1 d voters i jvm
  d=$(kc_dir "$n")
  mkdir -p "$d"
  voters=
  for ((i = 1; i <= KC_NODES; i++)); do voters+=${voters:+,}$i@127.0.0.1:$(kc_controller_port "$i"); done
  sed -e "s|@NODE_ID@|$n|g" -e "s|@PORT@|$(kc_broker_port "$n")|g" \
    -e "s|@CONTROLLER_PORT@|$(kc_controller_port "$n")|g" -e "s|@VOTERS@|$voters|g" \
    -e "s|@LOG_DIR@|$d/data|g" "$KAFKA_TPL_DIR/cluster.properties.in" >"$d/server.properties"
  cp "$KAFKA_TPL_DIR/log4j2.xml" "$d/log4j2.xml"
  [[ -f $d/data/meta.properties ]] && return 0
  read -r -a jvm < <(kc_jvm "$n")
  # --cluster-id=ID in one word (an id may start with '-'); the same id on every node.
  if ! "${jvm[@]}" kafka.tools.StorageTool format "--cluster-id=$2" -c "$d/server.properties" \
    --ignore-formatted >"$d/format.log" 2>&1 </dev/null 9>&-; then
    cat "$d/format.log" >&2
    die "kafka-storage format of node $n failed"
  fi
}

# kc_node_start N: starts node N (formatted before); does not wait for it to answer.
kc_node_start() {
  local n=$1 d jvm
  [[ $n =~ ^[1-3]$ ]] || die "broker node: 1, 2 or 3, not '$n'"
  kc_node_pid "$n" >/dev/null && return 0
  d=$(kc_dir "$n")
  [[ -f $d/data/meta.properties ]] || die "node $n is not formatted: scripts/env.sh up first"
  wait_ports_free "$(kc_broker_port "$n")" "$(kc_controller_port "$n")" ||
    die "node $n: port $(kc_broker_port "$n") or $(kc_controller_port "$n") still taken"
  read -r -a jvm < <(kc_jvm "$n")
  rm -f "$d/kafka.pid"
  # shellcheck disable=SC2016
  setsid -f nohup bash -c 'echo $$ >"$1"; shift; exec "$@"' ll-kafka "$d/kafka.pid" \
    "${jvm[@]}" kafka.Kafka "$d/server.properties" >>"$d/kafka.out" 2>&1 </dev/null 9>&-
  log "Kafka node $n: starting on 127.0.0.1:$(kc_broker_port "$n") (controller $(kc_controller_port "$n"))"
}

# kc_node_stop N: SIGTERM, up to 20 s, then SIGKILL.
kc_node_stop() {
  local n=$1 pid i
  [[ $n =~ ^[1-3]$ ]] || die "broker node: 1, 2 or 3, not '$n'"
  pid=$(kc_node_pid "$n") || return 0
  log "Kafka node $n: stopping pid $pid ..."
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    log "Kafka node $n: still running after 20 s, kill -9"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
  fi
  rm -f "$(kc_dir "$n")/kafka.pid"
}

# kc_wait: every node registered and answering, then a transactional round trip (creates the
# replicated __transaction_state and __consumer_offsets on a fresh cluster).
kc_wait() {
  local bs
  bs=$(k_bootstrap)
  if ! "$PY" "$KAFKA_TPL_DIR/ll_kafka_admin.py" wait --bootstrap "$bs" --brokers "$KC_NODES" \
    --timeout "$LL_KAFKA_START_TIMEOUT"; then
    kc_log_tail
    die "the Kafka cluster did not answer with $KC_NODES brokers within ${LL_KAFKA_START_TIMEOUT}s"
  fi
  "$PY" "$KAFKA_TPL_DIR/ll_kafka_admin.py" warmup --bootstrap "$bs" ||
    { kc_log_tail; die "Kafka warm-up (transactional round trip) failed"; }
}

kc_log_tail() {
  local i
  for ((i = 1; i <= KC_NODES; i++)); do
    log "---- tail of $(kc_dir "$i")/server.log ----"
    tail -n 15 "$(kc_dir "$i")/server.log" >&2 2>/dev/null || true
  done
}

# kc_start: the cluster up (made on first use), every node answering.
kc_start() {
  local i cluster_id
  kc_ready && return 0
  kafka_libs_ok "$KAFKA_LIBS" 2>/dev/null || die "Kafka jars missing in $KAFKA_LIBS: run scripts/env.sh install"
  mkdir -p "$K_DIR"
  touch "$KC_MARK"
  kc_ports
  cluster_id=$LL_KAFKA_CLUSTER_ID
  [[ -n $cluster_id ]] ||
    cluster_id=$("$PY" -c 'import base64,uuid;print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')
  for ((i = 1; i <= KC_NODES; i++)); do kc_configure "$i" "$cluster_id"; done
  for ((i = 1; i <= KC_NODES; i++)); do kc_node_start "$i"; done
  kc_wait
  log "Kafka: cluster of $KC_NODES up (pids $(kc_pids)), bootstrap $(k_bootstrap)"
}

kc_stop() {
  local i
  for ((i = 1; i <= KC_NODES; i++)); do kc_node_stop "$i"; done
}

# kc_env_lines: the env file's lines of a cluster (none for the single broker).
kc_env_lines() {
  kc_on || return 0
  echo "export LL_KAFKA_BROKERS='$KC_NODES'"
  echo "export LL_KAFKA_NODES_DIR='$K_DIR'"
}

# k_data_dirs / k_logs: where the broker's data and log are (every node's for a cluster).
k_data_dirs() { if kc_on; then echo "$K_DIR/node{1,2,3}/data"; else echo "$K_DIR/data"; fi; }
k_logs() { if kc_on; then echo "$K_DIR/node{1,2,3}/server.log"; else echo "$K_LOG"; fi; }
