#!/usr/bin/env bash
# scripts/compose-check.sh — docker-compose.yml checked for real, on a machine without an image
# registry (docs/environment.md "docker-compose.yml"):
#   1. the project's packages (scripts/env.sh install: Debian's docker.io, docker-compose,
#      debootstrap, and the Kafka jars), then a Docker daemon (started here when none answers,
#      and stopped again at the end);
#   2. stand-in images tagged under the project's names: a Debian 12 base by debootstrap
#      (loadledger/standin-debian:bookworm; the root file system is cached as a tarball in
#      $LL_CACHE_DIR/docker), the broker from Debian's JRE and the Kafka jars
#      (loadledger/standin-kafka:4.1.1), the database from Debian's PostgreSQL 15
#      (loadledger/standin-postgres:15), Prometheus from Debian's package
#      (loadledger/standin-prometheus:2.42); then the product image loadledger:latest on that base;
#   3. the stack up with the monitoring profile (project loadledger-check, free loopback ports)
#      until every service's /readyz healthcheck passes and Prometheus scrapes all five services
#      over the compose network with the 7 alerting rules loaded; the demo's reference and publish-unknown scenarios from the
#      host (tools/nifisim/compose_check.py); the broker and the database restarted; the stack
#      ready again; one more reference scenario;
#   4. always (trap): the stack and its volumes down, the daemon stopped if this script started it.
# The images stay (the next run rebuilds only what changed). Exit 0 when all of it passed; 77
# (ctest: skipped) without root, where no daemon can be started.
#
# Settings: LL_RUN_DIR (logs in $LL_RUN_DIR/compose), LL_CACHE_DIR ($HOME/.cache/loadledger),
# LL_COMPOSE_WAIT (240: seconds for the stack to become healthy), LL_COMPOSE_KEEP=1 (leave the
# stack up for a look; `docker-compose -p loadledger-check down -v` removes it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
LL_RUN_DIR=${LL_RUN_DIR:-/tmp/loadledger-run}
LL_CACHE_DIR=${LL_CACHE_DIR:-$HOME/.cache/loadledger}
LL_COMPOSE_WAIT=${LL_COMPOSE_WAIT:-240}
KAFKA_VERSION=4.1.1
WORK=$LL_RUN_DIR/compose
PROJECT=loadledger-check
BASE_TAG=loadledger/standin-debian:bookworm
KAFKA_TAG=loadledger/standin-kafka:$KAFKA_VERSION
PG_TAG=loadledger/standin-postgres:15
PROM_TAG=loadledger/standin-prometheus:2.42
BASE_TAR=$LL_CACHE_DIR/docker/debian-bookworm-minbase.tar
SERVICES=(registrar claimer completion dispatcher sweeper)
PY=/usr/bin/python3
STARTED_DOCKERD=

log() { printf 'compose-check: %s (%ds)\n' "$*" "$SECONDS" >&2; }
die() { printf 'compose-check: FAILED: %s\n' "$*" >&2; exit 1; }

if [[ $EUID -ne 0 ]] && ! docker info >/dev/null 2>&1; then
  echo "compose-check: skipped: no Docker daemon answers and starting one needs root" >&2
  exit 77
fi
mkdir -p "$WORK"

# ---- 1. packages and the daemon ------------------------------------------------------------
"$ROOT/scripts/env.sh" install >/dev/null

start_dockerd() {
  if docker info >/dev/null 2>&1; then return 0; fi
  log "starting dockerd (log $WORK/dockerd.log)"
  setsid dockerd >"$WORK/dockerd.log" 2>&1 </dev/null &
  STARTED_DOCKERD=$!
  local i
  for ((i = 0; i < 60; i++)); do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$STARTED_DOCKERD" 2>/dev/null || { tail -20 "$WORK/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.5
  done
  tail -20 "$WORK/dockerd.log" >&2
  die "dockerd did not answer within 30 s"
}

stop_dockerd() {
  [[ -n $STARTED_DOCKERD ]] || return 0
  kill "$STARTED_DOCKERD" 2>/dev/null || return 0
  local i
  for ((i = 0; i < 60; i++)); do
    kill -0 "$STARTED_DOCKERD" 2>/dev/null || return 0
    sleep 0.5
  done
  kill -9 "$STARTED_DOCKERD" 2>/dev/null || true
}

# Compose v2 (`docker compose`, with --wait) when the client has it, else Debian's
# docker-compose 1.29 (its `up -d` waits for the depends_on conditions; then we poll health).
if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose); else COMPOSE=(docker-compose); fi
compose() { "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ((rc != 0)) && docker info >/dev/null 2>&1; then
    compose ps >&2 || true
    compose logs --no-color --tail 40 >"$WORK/stack.log" 2>&1 || true
    tail -150 "$WORK/stack.log" >&2 || true
  fi
  if [[ ${LL_COMPOSE_KEEP:-0} != 1 ]]; then
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    stop_dockerd
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_dockerd

# ---- 2. images -----------------------------------------------------------------------------
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

base_image() {
  have_image "$BASE_TAG" && return 0
  if [[ ! -s $BASE_TAR ]]; then
    log "debootstrap bookworm (minbase) -> $BASE_TAR"
    local root=$WORK/rootfs
    rm -rf "$root"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 ||
      { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    mkdir -p "$(dirname "$BASE_TAR")"
    tar -C "$root" -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
    rm -rf "$root"
  fi
  log "importing $BASE_TAR as $BASE_TAG"
  docker import "$BASE_TAR" "$BASE_TAG" >/dev/null
}

# build TAG DOCKERFILE CONTEXT: docker build on the stand-in base (its layer cache keeps a rerun
# short); the output in $WORK/build-<name>.log.
build() {
  local tag=$1 file=$2 ctx=$3 name
  name=$(basename "$file" .Dockerfile)
  log "building $tag"
  docker build --build-arg "BASE_IMAGE=$BASE_TAG" -f "$file" -t "$tag" "$ctx" >"$WORK/build-$name.log" 2>&1 ||
    { tail -30 "$WORK/build-$name.log" >&2; die "docker build $tag failed"; }
}

base_image
ctx=$WORK/kafka-context
rm -rf "$ctx" && mkdir -p "$ctx"
cp "$ROOT"/packaging/compose/kafka.Dockerfile "$ROOT"/packaging/compose/kafka-*.{sh,xml} "$ctx/"
cp -r "$LL_CACHE_DIR/kafka-$KAFKA_VERSION/libs" "$ctx/libs"
build "$KAFKA_TAG" "$ctx/kafka.Dockerfile" "$ctx"
build "$PG_TAG" "$ROOT/packaging/compose/postgres.Dockerfile" "$ROOT/packaging/compose"
build "$PROM_TAG" "$ROOT/packaging/compose/prometheus.Dockerfile" "$ROOT/packaging/compose"
build loadledger:latest "$ROOT/Dockerfile" "$ROOT"
log "images ready"

# ---- 3. the stack --------------------------------------------------------------------------
read -r kport pgport promport < <("$PY" -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
# Not the default prefix: the topic creator and the services must both follow LL_TOPIC_PREFIX.
PREFIX=llcompose.
export LL_COMPOSE_KAFKA_PORT=$kport LL_COMPOSE_PG_PORT=$pgport LL_TOPIC_PREFIX=$PREFIX
export LL_KAFKA_IMAGE=$KAFKA_TAG LL_POSTGRES_IMAGE=$PG_TAG LL_BASE_IMAGE=$BASE_TAG
# The optional prometheus service too (docker-compose.yml's profile monitoring), for every
# command of this script (up, restart, down).
export COMPOSE_PROFILES=monitoring LL_PROMETHEUS_IMAGE=$PROM_TAG LL_COMPOSE_PROMETHEUS_PORT=$promport

# states: "<service> <status>/<health or exit code>" for every container of the stack (one
# docker call each: docker-compose 1.29 takes a second or two per command).
states() {
  local ids
  ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT") || return 0
  [[ -n $ids ]] || return 0
  # shellcheck disable=SC2086
  docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.ExitCode}}{{end}}' $ids
}

# wait_ready: every long-running container of the stack healthy, the one-shots exited 0.
wait_ready() {
  local deadline=$((SECONDS + LL_COMPOSE_WAIT)) svc st bad
  declare -A now
  while :; do
    now=()
    while read -r svc st; do now[$svc]=$st; done < <(states)
    bad=
    for svc in kafka postgres "${SERVICES[@]}"; do
      [[ ${now[$svc]:-missing} == running/healthy ]] || bad+=" $svc=${now[$svc]:-missing}"
    done
    for svc in kafka-topics migrate; do
      st=${now[$svc]:-missing}
      [[ $st == exited/0 ]] || bad+=" $svc=$st"
      [[ $st == exited/[1-9]* ]] && die "$svc failed ($st)"
    done
    [[ -z $bad ]] && return 0
    ((SECONDS < deadline)) || die "not ready after ${LL_COMPOSE_WAIT} s:$bad"
    sleep 1
  done
}

compose down -v --remove-orphans >/dev/null 2>&1 || true
log "up (broker 127.0.0.1:$kport, database 127.0.0.1:$pgport)"
if [[ ${COMPOSE[*]} == "docker compose" ]]; then
  compose up -d --no-build --wait --wait-timeout "$LL_COMPOSE_WAIT" >"$WORK/up.log" 2>&1 ||
    { cat "$WORK/up.log" >&2; die "compose up --wait failed"; }
else
  compose up -d --no-build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "compose up failed"; }
fi
wait_ready
log "stack ready: $(compose logs --no-color kafka-topics 2>/dev/null | grep -c created) topics created"
# Prometheus (from the host, 127.0.0.1:$promport) scrapes <service>:9464 of all five services
# and has loaded the rules of packaging/prometheus/loadledger.rules.yml without error.
nrules=$(grep -c '^ *- alert:' "$ROOT/packaging/prometheus/loadledger.rules.yml")
"$PY" - "$promport" "$nrules" "${SERVICES[@]}" >"$WORK/prometheus.log" 2>&1 <<'PYEOF' ||
import json, sys, time, urllib.request
port, nrules, services = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
def get(path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return json.load(r)["data"]
deadline, last = time.time() + 120, None
while time.time() < deadline:
    try:
        up = {t["labels"]["instance"]: t["health"] for t in get("/api/v1/targets")["activeTargets"]}
        rules = [(r["name"], r["health"]) for g in get("/api/v1/rules")["groups"] for r in g["rules"]]
        last = (up, rules)
        if up == {"%s:9464" % s: "up" for s in services} and len(rules) == nrules and                 all(h == "ok" for _, h in rules):
            print("prometheus: targets", up, "rules", rules)
            sys.exit(0)
    except Exception as e:  # noqa: BLE001 - not answering yet
        last = repr(e)
    time.sleep(2)
print("prometheus not scraping every service with the rules loaded:", last)
sys.exit(1)
PYEOF
  { cat "$WORK/prometheus.log" >&2; die "prometheus check failed"; }
log "prometheus: 5 targets up, $nrules rules loaded"

# scenarios NAME ARGS...: compose_check.py from the host; its RESULT lines on stderr.
scenarios() {
  local name=$1
  shift
  "$PY" "$ROOT/tools/nifisim/compose_check.py" --bootstrap "127.0.0.1:$kport" --pg-port "$pgport" \
    --prefix "$PREFIX" --loadctl-container "$(compose ps -q registrar)" "$@" >"$WORK/scenarios-$name.log" 2>&1 ||
    { tail -60 "$WORK/scenarios-$name.log" >&2; die "scenarios $* failed (log $WORK/scenarios-$name.log)"; }
  grep -E '^RESULT' "$WORK/scenarios-$name.log" >&2 || true
}

scenarios first --scenario reference,publish-unknown --business-key 2026-09-28
log "restarting the broker and the database"
compose restart kafka postgres >/dev/null 2>&1 || die "restart failed"
sleep 3
wait_ready
log "stack ready again"
scenarios after-restart --scenario reference --business-key 2026-09-29
# The consuming services' transactional ids come from their instance ids (not container names).
compose logs --no-color registrar claimer completion >"$WORK/services.log" 2>&1 || true
for svc in registrar claimer completion; do
  grep -q "transactional.id [a-z.]*\.$svc\.$svc-1\b" "$WORK/services.log" ||
    die "$svc: no transactional.id <group>.$svc-1 in its log"
done
log "OK: stack up, prometheus scraping it with the rules, 3 scenarios passed, broker and database restarted in between, stable transactional ids"
