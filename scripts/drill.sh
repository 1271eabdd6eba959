#!/usr/bin/env bash
# scripts/drill.sh — the fault drills of issue 9 (docs/operations.md, "Drills"). Each one ends
# with `loadctl verify`; exit 0 only when it passed.
#
#   drill.sh cluster [--short] [...]   3-broker KRaft cluster: kill -9 of a partition leader and
#                                      of a transaction coordinator mid-workload (drill_cluster.sh)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  cluster) exec "$here/drill_cluster.sh" "$@" ;;
  *) sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
