#!/usr/bin/env bash
# The README's first command: sets up a fresh machine (packages, the Kafka broker, PostgreSQL),
# builds loadledger, runs the reference scenario end to end through Kafka and PostgreSQL, and
# stops everything again. Pass --keep-env to leave the broker and the database running.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keep_env=0
args=()
for a in "$@"; do
  case "$a" in
    -h|--help)
      echo "usage: scripts/demo.sh [--keep-env] [--scenario all|reference|stall|publish-unknown] [--stall]"
      echo "                       [--business-key KEY] [--keep-running]"
      echo "  --keep-env   leave the broker and the database running (scripts/env.sh down stops them)"
      /usr/bin/python3 "$root/tools/nifisim/demo.py" --help | sed -n '/^options:/,$p'
      exit 0 ;;
    --keep-env) keep_env=1 ;;
    *) args+=("$a") ;;
  esac
done

"$root/scripts/env.sh" up >/dev/null
if [ "$keep_env" = 0 ]; then
  trap '"$root/scripts/env.sh" down >/dev/null 2>&1 || true' EXIT
fi
build=${LL_BUILD_DIR:-$root/build}
echo "== building loadledger in $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLL_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
export LL_BUILD_DIR=$build
/usr/bin/python3 "$root/tools/nifisim/demo.py" "${args[@]+"${args[@]}"}"
