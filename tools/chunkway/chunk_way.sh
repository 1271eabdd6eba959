#!/usr/bin/env bash
# tools/chunkway/chunk_way.sh — one ChunkWritten's way through ll-completion, measured (issue 40):
# every function entry of the consumer loop (common/src/loop/*.c), the completion service's chunk
# files and the core's reply builder is printed by gdb (dprintf) while one chunk of a registered and
# claimed run is applied; then the way from the turn that took it to the produce of its reply:
# files and functions in order, and how many.
#
# Usage: tools/chunkway/chunk_way.sh [BUILD_DIR]   (default: build; a Debug build, not the sanitizer's)
# Needs: the environment up (scripts/env.sh up), gdb and universal-ctags (Debian packages gdb,
# universal-ctags). Not part of the tests: a developer's measurement, about two minutes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
for tool in gdb ctags; do
  command -v $tool >/dev/null || { echo "chunk_way.sh: $tool not found (apt-get install gdb universal-ctags)" >&2; exit 2; }
done
run_dir=${LL_RUN_DIR:-/tmp/loadledger-run}
[[ -f $run_dir/env ]] || { echo "chunk_way.sh: no environment in $run_dir (scripts/env.sh up)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "set pagination off"
  echo "set print thread-events off"
  echo "set breakpoint pending on"
  echo "handle SIGPIPE nostop noprint pass"
  echo "set dprintf-style gdb"
  for rel in $(cd "$root" && ls common/src/loop/*.c) services/completion/chunk_bulk.c \
             services/completion/chunk_report.c common/src/core/reply.c; do
    ctags -x --c-kinds=f "$root/$rel" |
      awk -v rel="$rel" '{printf "dprintf %s:%s,\"@@ %%d %s %s\\n\", $_thread\n", rel, $1, rel, $1}'
  done
  echo "run"
} >"$work/gdb.cmd"
# shellcheck disable=SC1090,SC1091
. "$run_dir/env"
PYTHONPATH=$root/tools/nifisim /usr/bin/python3 "$root/tools/chunkway/chunk_way.py" "$build" "$work/gdb.cmd" "$work/trace.txt"
