#!/usr/bin/env bash
# scripts/compose-check.sh — docker-compose.yml checked for real, on a machine without an image
# registry (docs/environment.md "docker-compose.yml"):
#   1. the project's packages (scripts/env.sh install: Debian's docker.io, docker-compose,
#      debootstrap, and the Kafka jars), then a Docker daemon (started here when none answers,
#      and stopped again at the end);
#   2. stand-in images tagged under the project's names, each honouring its official image's
#      variables and paths (packaging/compose/): a Debian 12 base by debootstrap
#      (loadledger/standin-debian:bookworm; the root file system is cached as a tarball in
#      $LL_CACHE_DIR/docker), the broker from Debian's JRE and the Kafka jars
#      (loadledger/standin-kafka:4.1.1: log.dirs /tmp/kraft-combined-logs unless KAFKA_LOG_DIRS),
#      the database from Debian's PostgreSQL 15 (loadledger/standin-postgres:15), the schema
#      registry (loadledger/standin-schema-registry:7.9: SCHEMA_REGISTRY_*, its schemas in the
#      topic _schemas), Prometheus from Debian's package (loadledger/standin-prometheus:2.42),
#      Grafana's provisioning (loadledger/standin-grafana:11); then the product image
#      loadledger:latest on that base;
#   3. profiles registry + monitoring (project $LL_COMPOSE_PROJECT, free loopback ports): every
#      long-running container healthy (each has a healthcheck) with restart policy
#      unless-stopped, the one-shots exited 0; Prometheus scrapes all five services with the
#      alerting rules loaded; Grafana has Prometheus as its default data source (queried through
#      it) and the dashboard; the registry flow (nifi/loadledger-flow.json, Confluent framing,
#      tools/nifisim/compose_check.py) run from the host to SUCCESS; the stable transactional ids;
#      then `down` (volumes kept) and `up`: the run is still SUCCESS in the ledger, its replies
#      are all still in their topics and readable, and a new run reaches SUCCESS;
#   4. profile embedded, from empty volumes: the embedded flow (Avro container files) to SUCCESS;
#   5. always (trap): the stack and its volumes down, the daemon stopped if this script started it.
# The images stay (the next run rebuilds only what changed). Exit 0 when all of it passed; 77
# (ctest: skipped) without root, where no daemon can be started.
#
# Settings: LL_RUN_DIR (logs in $LL_RUN_DIR/compose), LL_CACHE_DIR ($HOME/.cache/loadledger),
# LL_COMPOSE_WAIT (240: seconds for the stack to become healthy), LL_COMPOSE_PROJECT
# (loadledger-check: give another one to a second check running at the same time),
# LL_COMPOSE_FILE (the repository's docker-compose.yml: another file to check, e.g. an older
# one), LL_COMPOSE_KEEP=1 (leave the stack up for a look; `docker-compose -p <project> down -v`
# removes it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
LL_RUN_DIR=${LL_RUN_DIR:-/tmp/loadledger-run}
LL_CACHE_DIR=${LL_CACHE_DIR:-$HOME/.cache/loadledger}
LL_COMPOSE_WAIT=${LL_COMPOSE_WAIT:-240}
KAFKA_VERSION=4.1.1
WORK=$LL_RUN_DIR/compose
PROJECT=${LL_COMPOSE_PROJECT:-loadledger-check}
COMPOSE_FILE_CHECKED=${LL_COMPOSE_FILE:-$ROOT/docker-compose.yml}
BASE_TAG=loadledger/standin-debian:bookworm
KAFKA_TAG=loadledger/standin-kafka:$KAFKA_VERSION
PG_TAG=loadledger/standin-postgres:15
PROM_TAG=loadledger/standin-prometheus:2.42
REG_TAG=loadledger/standin-schema-registry:7.9
GRAFANA_TAG=loadledger/standin-grafana:11
BASE_TAR=$LL_CACHE_DIR/docker/debian-bookworm-minbase.tar
SERVICES=(registrar claimer completion dispatcher sweeper)
ONESHOTS=" kafka-topics migrate schema-subjects "
PY=/usr/bin/python3
STARTED_DOCKERD=
ANON_VOLUMES=()

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
compose() { "${COMPOSE[@]}" -p "$PROJECT" -f "$COMPOSE_FILE_CHECKED" "$@"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ((rc != 0)) && docker info >/dev/null 2>&1; then
    compose ps >&2 || true
    compose logs --no-color --tail 40 >"$WORK/stack.log" 2>&1 || true
    tail -150 "$WORK/stack.log" >&2 || true
  fi
  if [[ ${LL_COMPOSE_KEEP:-0} != 1 ]]; then
    COMPOSE_PROFILES=registry,embedded,monitoring compose down -v --remove-orphans >/dev/null 2>&1 || true
    # the image VOLUMEs (apache/kafka declares three) of the containers the mid-check `down` removed
    ((${#ANON_VOLUMES[@]} == 0)) || docker volume rm "${ANON_VOLUMES[@]}" >/dev/null 2>&1 || true
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
build "$REG_TAG" "$ROOT/packaging/compose/schema-registry.Dockerfile" "$ROOT/packaging/compose"
build "$GRAFANA_TAG" "$ROOT/packaging/compose/grafana.Dockerfile" "$ROOT/packaging/compose"
build loadledger:latest "$ROOT/Dockerfile" "$ROOT"
log "images ready"

# ---- 3. the stack, profiles registry + monitoring ------------------------------------------
read -r kport pgport promport regport grafport < <("$PY" -c 'import socket
s=[socket.socket() for _ in range(5)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
# Not the default prefix: the topic creator, the schema subjects and the services must all follow
# LL_TOPIC_PREFIX.
PREFIX=llcompose.
export LL_COMPOSE_KAFKA_PORT=$kport LL_COMPOSE_PG_PORT=$pgport LL_TOPIC_PREFIX=$PREFIX
export LL_KAFKA_IMAGE=$KAFKA_TAG LL_POSTGRES_IMAGE=$PG_TAG LL_BASE_IMAGE=$BASE_TAG
export LL_SCHEMA_REGISTRY_IMAGE=$REG_TAG LL_COMPOSE_REGISTRY_PORT=$regport
export LL_PROMETHEUS_IMAGE=$PROM_TAG LL_COMPOSE_PROMETHEUS_PORT=$promport
export LL_GRAFANA_IMAGE=$GRAFANA_TAG LL_COMPOSE_GRAFANA_PORT=$grafport LL_GRAFANA_PASSWORD=compose-check
# The profiles of every compose command from here on (up, ps, logs, down): the default flow
# (registry) and the monitoring one; step 4 switches to embedded.
export COMPOSE_PROFILES=registry,monitoring

# states: "<service> <status>/<health or exit code> <restart policy>" for every container of the
# stack (one docker call each: docker-compose 1.29 takes a second or two per command).
states() {
  local ids
  ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT") || return 0
  [[ -n $ids ]] || return 0
  # shellcheck disable=SC2086
  docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{else}}{{if eq .State.Status "running"}}no-healthcheck{{else}}{{.State.ExitCode}}{{end}}{{end}} {{.HostConfig.RestartPolicy.Name}}' $ids
}

# wait_ready SERVICE...: each long-running SERVICE running and healthy (a healthcheck is required)
# with restart policy unless-stopped, the one-shots exited 0, and no container of the project
# outside those.
wait_ready() {
  local deadline=$((SECONDS + LL_COMPOSE_WAIT)) svc st rp bad
  local want=" $* "
  declare -A now pol
  while :; do
    now=() pol=()
    while read -r svc st rp; do now[$svc]=$st pol[$svc]=$rp; done < <(states)
    bad=
    for svc in "$@"; do
      if [[ $ONESHOTS == *" $svc "* ]]; then
        st=${now[$svc]:-missing}
        [[ $st == exited/0 ]] || bad+=" $svc=$st"
        [[ $st == exited/[1-9]* ]] && die "$svc failed ($st)"
      else
        [[ ${now[$svc]:-missing} == running/healthy ]] || bad+=" $svc=${now[$svc]:-missing}"
        [[ ${now[$svc]:-} == running/no-healthcheck ]] && die "$svc has no healthcheck"
        [[ -z ${pol[$svc]:-} || ${pol[$svc]} == unless-stopped ]] ||
          die "$svc: restart policy ${pol[$svc]}, not unless-stopped"
      fi
    done
    for svc in "${!now[@]}"; do
      [[ $want == *" $svc "* ]] || die "unexpected service $svc in this profile (${now[$svc]})"
    done
    [[ -z $bad ]] && return 0
    ((SECONDS < deadline)) || die "not ready after ${LL_COMPOSE_WAIT} s:$bad"
    sleep 1
  done
}

up() {
  local what=$1
  if [[ ${COMPOSE[*]} == "docker compose" ]]; then
    compose up -d --no-build --wait --wait-timeout "$LL_COMPOSE_WAIT" >"$WORK/up-$what.log" 2>&1 ||
      { cat "$WORK/up-$what.log" >&2; die "compose up --wait ($what) failed"; }
  else
    compose up -d --no-build >"$WORK/up-$what.log" 2>&1 || { cat "$WORK/up-$what.log" >&2; die "compose up ($what) failed"; }
  fi
}

# flow VARIANT STEP NAME ARGS...: compose_check.py from the host; its RESULT line on stderr.
flow() {
  local variant=$1 step=$2 name=$3
  shift 3
  local reg=()
  [[ $variant == registry ]] && reg=(--registry-url "http://127.0.0.1:$regport")
  "$PY" "$ROOT/tools/nifisim/compose_check.py" --bootstrap "127.0.0.1:$kport" --pg-port "$pgport" \
    --prefix "$PREFIX" --variant "$variant" "${reg[@]}" "$step" "$@" >"$WORK/flow-$name.log" 2>&1 ||
    { tail -40 "$WORK/flow-$name.log" >&2; die "flow $variant $step ($name) failed (log $WORK/flow-$name.log)"; }
  grep -E '^RESULT' "$WORK/flow-$name.log" >&2 || true
}

REGISTRY_STACK=(kafka postgres kafka-topics migrate schema-registry schema-subjects "${SERVICES[@]}" prometheus grafana)
COMPOSE_PROFILES=registry,embedded,monitoring compose down -v --remove-orphans >/dev/null 2>&1 || true
log "up, profiles $COMPOSE_PROFILES (broker 127.0.0.1:$kport, database 127.0.0.1:$pgport, registry 127.0.0.1:$regport)"
up registry
wait_ready "${REGISTRY_STACK[@]}"
log "stack ready: $(compose logs --no-color kafka-topics 2>/dev/null | grep -c created) topics created, $(compose logs --no-color schema-subjects 2>/dev/null | grep -c '^.*registered ') event subjects registered"

# Prometheus (from the host, 127.0.0.1:$promport) scrapes <service>:9464 of all five services
# and has loaded the rules of packaging/prometheus/loadledger.rules.yml without error; Grafana
# (127.0.0.1:$grafport) has that Prometheus as its default data source, answering through
# Grafana's proxy with all five services up, and the dashboard of packaging/grafana.
nrules=$(grep -c '^ *- alert:' "$ROOT/packaging/prometheus/loadledger.rules.yml")
"$PY" - "$promport" "$grafport" "$nrules" "${SERVICES[@]}" >"$WORK/monitoring.log" 2>&1 <<'PYEOF' ||
import base64, json, sys, time, urllib.request
port, gport, nrules, services = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
auth = "Basic " + base64.b64encode(b"admin:compose-check").decode()
def get(p, path, grafana=False):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (p, path), headers={"Authorization": auth} if grafana else {})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)
want = {"%s:9464" % s: "up" for s in services}
deadline, last = time.time() + 120, None
while time.time() < deadline:
    try:
        up = {t["labels"]["instance"]: t["health"] for t in get(port, "/api/v1/targets")["data"]["activeTargets"]}
        rules = [(r["name"], r["health"]) for g in get(port, "/api/v1/rules")["data"]["groups"] for r in g["rules"]]
        last = (up, rules)
        if up == want and len(rules) == nrules and all(h == "ok" for _, h in rules):
            print("prometheus: targets", up, "rules", rules)
            break
    except Exception as e:  # noqa: BLE001 - not answering yet
        last = repr(e)
    time.sleep(2)
else:
    print("prometheus not scraping every service with the rules loaded:", last)
    sys.exit(1)
ds = get(gport, "/api/datasources", True)
default = [d for d in ds if d.get("isDefault")]
assert len(default) == 1 and default[0]["type"] == "prometheus", ds
res = get(gport, "/api/datasources/proxy/uid/%s/api/v1/query?query=up" % default[0]["uid"], True)
seen = {r["metric"]["instance"]: r["value"][1] for r in res["data"]["result"] if r["metric"].get("job") == "loadledger"}
assert seen == {i: "1" for i in want}, ("grafana's data source", seen)
found = get(gport, "/api/search", True)
assert [d["uid"] for d in found] == ["loadledger"], found
dash = get(gport, "/api/dashboards/uid/loadledger", True)["dashboard"]
print("grafana: default data source %s (%s), %d of %d services up through it, dashboard %r with %d panels"
      % (default[0]["name"], default[0]["url"], len(seen), len(want), dash["title"], len(dash["panels"])))
PYEOF
  { cat "$WORK/monitoring.log" >&2; die "monitoring check failed"; }
log "prometheus: 5 targets up, $nrules rules loaded; $(grep '^grafana:' "$WORK/monitoring.log")"

flow registry run registry-1 --business-key 2026-09-28 --state "$WORK/run-registry-1.json"
# The consuming services' transactional ids come from their instance ids (not container names).
compose logs --no-color registrar claimer completion >"$WORK/services.log" 2>&1 || true
for svc in registrar claimer completion; do
  grep -q "transactional.id [a-z.]*\.$svc\.$svc-1\b" "$WORK/services.log" ||
    die "$svc: no transactional.id <group>.$svc-1 in its log"
done

# down / up: the containers go, the named volumes stay (the broker's log directory, the database).
log "down (volumes kept), then up again"
# The anonymous volumes of the image VOLUMEs are left by `down` (not by the trap's `down -v`).
ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
# shellcheck disable=SC2086
mapfile -t ANON_VOLUMES < <(docker inspect -f '{{range .Mounts}}{{if eq .Type "volume"}}{{println .Name}}{{end}}{{end}}' $ids |
  grep -v "^${PROJECT}_" | grep . || true)
compose down >/dev/null 2>&1 || die "down failed"
[[ -z $(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT") ]] || die "containers left after down"
up registry-again
wait_ready "${REGISTRY_STACK[@]}"
log "stack ready again"
flow registry survived registry-survived --state "$WORK/run-registry-1.json"
flow registry run registry-2 --business-key 2026-09-29 --state "$WORK/run-registry-2.json"

# ---- 4. profile embedded, from empty volumes -----------------------------------------------
export COMPOSE_PROFILES=embedded
log "profile embedded (volumes dropped first)"
COMPOSE_PROFILES=registry,monitoring compose down -v >/dev/null 2>&1 || die "down -v failed"
up embedded
wait_ready kafka postgres kafka-topics migrate registrar-embedded claimer-embedded completion-embedded \
  dispatcher-embedded sweeper
flow embedded run embedded-1 --business-key 2026-09-30 --state "$WORK/run-embedded-1.json"
log "OK: registry profile (with monitoring: prometheus scraping, grafana's data source and dashboard) and embedded profile each ran the flow to SUCCESS; after down/up the run's replies and ledger were intact and a new run reached SUCCESS; every service healthy with restart unless-stopped; stable transactional ids"
