#!/usr/bin/env bash
# scripts/drill_cluster.sh — `scripts/drill.sh cluster [--short] [options]`: the 3-broker KRaft
# cluster drill (issue 9 item 3, docs/operations.md "Cluster drill"). kill -9 of the leader of the
# busy chunks partition and of the completion service's transaction coordinator in the middle of
# a workload of runs; every run must reach SUCCESS and `loadctl verify` must pass, with no
# operator action (tools/nifisim/llsim/drill_cluster.py; its --help lists the options).
#
# The cluster: when $LL_RUN_DIR/env is a cluster (LL_KAFKA_BROKERS=3 scripts/env.sh up), that
# one; otherwise the drill makes its own, with its own PostgreSQL, in ${LL_RUN_DIR}-cluster and
# stops it at the end. The services: LL_BUILD_DIR (default build/), built beforehand.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
run_dir=${LL_RUN_DIR:-/tmp/loadledger-run}
build=${LL_BUILD_DIR:-$root/build}
case " $* " in *" -h "* | *" --help "*)
  cd "$root/tools/nifisim" && exec /usr/bin/python3 -m llsim.drill_cluster --help ;;
esac
for b in services/ll-registrar services/ll-claimer services/ll-completion services/ll-dispatcher tools/loadctl; do
  [[ -x $build/$b ]] || { echo "drill cluster: $build/$b missing: build first (or set LL_BUILD_DIR)" >&2; exit 2; }
done
if ! grep -qs "^export LL_KAFKA_BROKERS='3'" "$run_dir/env"; then
  run_dir=${run_dir%/}-cluster
  echo "drill cluster: a 3-node cluster and a PostgreSQL of its own in $run_dir" >&2
  trap 'LL_RUN_DIR=$run_dir "$root/scripts/env.sh" down >/dev/null 2>&1 || true' EXIT
  LL_RUN_DIR=$run_dir LL_KAFKA_BROKERS=3 "$root/scripts/env.sh" up >/dev/null
fi
cd "$root/tools/nifisim"
# librdkafka's own lines of the drill's clients ("%3|...|FAIL|... Connection refused" to the
# killed node) are expected: left out of stderr.
LL_RUN_DIR=$run_dir LL_BUILD_DIR=$build /usr/bin/python3 -m llsim.drill_cluster "$@" \
  2> >(grep -v --line-buffered '^%[0-9]|' >&2)
