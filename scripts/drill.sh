#!/usr/bin/env bash
# scripts/drill.sh DRILL [options]: runs one fault drill against the environment of scripts/env.sh
# (docs/operations.md "Drills"). A drill is tools/nifisim/drill_<DRILL>.py; its options follow
# (`scripts/drill.sh DRILL --help`). Drills today:
#   chaos   100 runs through their whole life with delays, duplicates and reorderings while a
#           random instance of every service (two each) is killed -9 and restarted; then every
#           run SUCCESS and `loadctl verify --topics` passes (--mode short|medium|long, --seed N)
#   cluster 3-broker KRaft cluster: kill -9 of a partition leader and of a transaction
#           coordinator mid-workload; it makes its own environment (scripts/drill_cluster.sh)
#   failover PostgreSQL HA under Patroni + etcd (scripts/env_patroni.sh, a pair of its own):
#           kill -9 of the primary's postmaster under the chaos workload, >= 3 failovers
#           (--mode short|long, --sync for synchronous_mode, --pooler for the services behind a
#           PgBouncer repointed after each failover with their connections kept, --seed N);
#           every visible reply must agree with the final ledger
#   repartition under the chaos workload every input topic goes from 3 to 6 partitions (a run's
#           later events on another partition than its earlier ones), the groups must read them
#           before two more instances of every service join; every run SUCCESS, `loadctl verify --topics` passes, each input
#           answered exactly once, none dead-lettered; 30 % of manifests and chunk reports sent
#           before their prerequisite's reply (--mode short|long, --kills N, --ahead-rate R, --seed N)
#   upgrade rolling upgrade: two instances of every service from an older commit's build (cached
#           in ~/.cache/loadledger/upgrade-base), N+1's expand migration, then each instance
#           replaced by this build's binary under the chaos workload (docs/upgrading.md); every
#           run SUCCESS and `loadctl verify --topics` passes (--mode short|long, --seed N)
#
# The environment is started when it does not run (and then stopped again at the end, unless
# --keep-env); LL_BUILD_DIR names a build to use as it is, else the tree is built in build/.
# Exit status: the drill's (0 = passed).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() {
  echo "usage: scripts/drill.sh DRILL [--keep-env] [drill options]; DRILL one of:" \
    "cluster $(cd "$root/tools/nifisim" && ls drill_*.py | sed 's/^drill_//; s/\.py$//' | tr '\n' ' ')"
}
[ $# -ge 1 ] || { usage >&2; exit 1; }
case "$1" in -h|--help) usage; exit 0 ;; esac
drill=$1
shift
# the cluster drill brings up a cluster environment of its own
[ "$drill" != cluster ] || exec "$root/scripts/drill_cluster.sh" "$@"
script=$root/tools/nifisim/drill_$drill.py
[[ "$drill" =~ ^[a-z0-9_]+$ && -f "$script" ]] || { echo "drill.sh: no drill '$drill'" >&2; usage >&2; exit 1; }
keep_env=0
args=()
for a in "$@"; do
  case "$a" in
    --keep-env) keep_env=1 ;;
    -h|--help) exec /usr/bin/python3 "$script" --help ;;
    *) args+=("$a") ;;
  esac
done

if ! "$root/scripts/env.sh" status >/dev/null 2>&1; then
  "$root/scripts/env.sh" up >/dev/null
  if [ "$keep_env" = 0 ]; then
    trap '"$root/scripts/env.sh" down >/dev/null 2>&1 || true' EXIT
  fi
fi
if [ -z "${LL_BUILD_DIR:-}" ]; then
  export LL_BUILD_DIR=$root/build
  echo "== building loadledger in $LL_BUILD_DIR" >&2
  cmake -S "$root" -B "$LL_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$LL_BUILD_DIR" -j"$(nproc)" >/dev/null
fi
/usr/bin/python3 "$script" "${args[@]+"${args[@]}"}"
