#!/usr/bin/env bash
# scripts/bench.sh — the benchmark of issue 8 (not part of scripts/test.sh; docs/performance.md).
#
#   scripts/bench.sh [--runs N] [--partitions N] [--chunks N] [--quick] [--keep-env] [--autogroup keep]
#                    [--kafka-data tmpfs|disk] [--scaling] [--history RUNS [--history-pg sized|default]]
#                    [-- DRIVER ARGS]
#
# --scaling: only the scaling phase (tools/nifisim/bench_scale.py, docs/scaling.md): chunk events/s
# and CPU per event with P partitions per topic and N instances of ll-completion (bench.py
# --scale-configs, default 3x1,3x2,3x3,6x1,6x3,6x6, three passes each; about 8 minutes).
#
# --history RUNS: only the history phase (tools/nifisim/bench_history.py, issue 42,
# docs/performance.md): RUNS ended runs of 8 partitions x 3 chunks generated over a year
# (scripts/bench/history.sql; 180000 is a year of 500 loads a day) beside an empty ledger, in pairs
# (bench.py --history-pairs, 5): the chunk path's rate (the --history-chunk-runs x --partitions x --chunks
# workload), each service's start to ready, a small run's admission to its validate-run command, a
# sweeper tick and its gauges (server ms), every loadctl command's wall time; medians, ratios and
# the issue's targets (pass/fail), the database's size, and every statement whose plan scans a
# table of history. Then a soak on the history ledger (bench.py --history-soak SECONDS, default
# 600, 0 skips it): all five services, chunk events of runs of 8 x 50 admitted as NiFi does,
# paced at --history-soak-share (0.8) of the pairs' chunk rate; last chunk to validate-run command
# p50/p99 (target p99 <= 50 ms), and per minute CPU per event and RSS of each service (last minute
# within 10% of the first). About 30 minutes at 180000 runs on a 2-core machine
# (an estimate from small runs: docs/performance.md). PostgreSQL is sized for a year's ledger
# (scripts/bench/history-pg.conf: shared_buffers 2 GB, max_wal_size 16 GB); --history-pg default
# runs the phase on PostgreSQL's defaults instead (128 MB, 1 GB), the mode of the runs before
# 2026-12-06's run F.
#
# Builds a Release tree (build-bench), starts an environment of its own with a DURABLE
# PostgreSQL (fsync, synchronous_commit, full_page_writes on) and pg_stat_statements in
# $LL_BENCH_RUN_DIR (default /tmp/loadledger-bench; never $LL_RUN_DIR, so a test environment is
# not disturbed), runs tools/nifisim/bench.py, and stops the environment again (trap).
#
# Default workload: 20 runs x 8 partitions x 50 chunks (each loop setting; the default loop's and
# the set-based pgbench five times, their medians compared: bench.py --repeat), 1 x 2 x 10,000 for
# the cost at scale, 100 x 2 x 10 for the cost at 10 chunks per partition, after warm-up passes
# until the broker's JIT compilers settle (bench.py --warmup-jit-ms); three latency phases of 40 s,
# their runs pooled (bench.py --latency-repeat); the default workload again with a synchronous
# standby (scripts/bench/standby.sh: a streaming replica on this machine, synchronous_standby_names
# set; 3 pairs of a loop pass and a set-based pgbench pass, bench.py --standby-repeat); about 15
# minutes on a 2-core machine.
# --quick: 4 x 4 x 20, 1 x 2 x 1,000, 20 x 2 x 10, shorter latency and hold
# phases (a smoke test of the script, not figures to quote). Anything after `--` goes to
# bench.py as is (bench.py --help). The figures are printed and written as JSON to
# $LL_BENCH_RUN_DIR/../loadledger-bench-<time>.json.
#
# The kernel's autogroup scheduling (kernel.sched_autogroup_enabled, on in this machine's kernel
# as in Debian's) shares the CPU between sessions, not threads: the broker and PostgreSQL, each
# started in a session of its own (setsid), then get a third of the two cores each whenever the
# load generator's session is busy too, and the broker's bursts (a GC pause's two workers, its
# network threads) wait for their group's turn: pauses of 100-340 ms, the command's p99 166-344
# ms at half load against 68-97 ms without (docs/performance-history.md, 2026-12-02). The benchmark
# turns it off for its run when it may (root) and restores the old value at the end;
# --autogroup keep leaves it as it is. The setting in force is printed with the latency figures.
#
# The broker's log segments go to a tmpfs (/dev/shm/loadledger-bench-kafka, removed at the end;
# --kafka-data disk: beside PostgreSQL's, in the run dir). On one disk, the broker's writes (350 MB
# in a latency phase, written back by the kernel every 5 s) and PostgreSQL's WAL fsyncs wait for each
# other: the command's p99 at 11,236 events/s was 62-114 ms with the broker's data on the disk and
# 38-59 ms on a tmpfs, in the same hour (docs/performance-history.md, 2026-12-02, "session 12"). A broker keeps
# its data on disks of its own, and Kafka does not fsync by default (its durability is replication):
# the tmpfs stands for those disks, not for a weaker PostgreSQL, which stays on the disk, durable.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
BUILD_DIR=${LL_BENCH_BUILD_DIR:-$REPO_ROOT/build-bench}
RUN_DIR=${LL_BENCH_RUN_DIR:-/tmp/loadledger-bench}

runs=20 partitions=8 chunks=50 keep_env=0 autogroup=off kafka_data=tmpfs
extra=()
quick=()
scaling=()
history=()
history_pg=sized
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    --chunks) chunks=$2; shift 2 ;;
    --quick)
      runs=4 partitions=4 chunks=20
      quick=(--scale-chunks 1000 --small-runs 20 --latency-seconds 8 --latency-repeat 1 --hold 10 --warmup-max-passes 2)
      shift ;;
    --keep-env) keep_env=1; shift ;;
    --scaling) scaling=(--scaling); shift ;;
    --history)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --history RUNS (a positive integer)" >&2; exit 2; }
      history=(--history "$2"); shift 2 ;;
    --history-pg)
      [[ ${2:-} == sized || ${2:-} == default ]] || { echo "bench.sh: --history-pg sized|default" >&2; exit 2; }
      history_pg=$2; shift 2 ;;
    --autogroup)
      [[ ${2:-} == keep || ${2:-} == off ]] || { echo "bench.sh: --autogroup keep|off" >&2; exit 2; }
      autogroup=$2; shift 2 ;;
    --kafka-data)
      [[ ${2:-} == tmpfs || ${2:-} == disk ]] || { echo "bench.sh: --kafka-data tmpfs|disk" >&2; exit 2; }
      kafka_data=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,62p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
for v in "$runs" "$partitions" "$chunks"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: runs, partitions and chunks must be positive integers" >&2; exit 2; }
done

log() { printf 'bench.sh: %s\n' "$*" >&2; }

export LL_RUN_DIR=$RUN_DIR LL_PG_DURABLE=1 LL_PG_STAT_STATEMENTS=1
if ((${#history[@]})) && [[ $history_pg == sized ]]; then
  export LL_PG_CONF_EXTRA=$SCRIPT_DIR/bench/history-pg.conf
else
  unset LL_PG_CONF_EXTRA
fi
if [[ $kafka_data == tmpfs ]]; then
  if [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] &&
    (($(df -P -k /dev/shm | awk 'NR == 2 {print $4}') >= 4 * 1024 * 1024)); then
    export LL_KAFKA_DATA_DIR=/dev/shm/loadledger-bench-kafka
  else
    printf 'bench.sh: WARNING: /dev/shm is not a tmpfs with 4 GiB free: the broker writes to the disk\n' >&2
  fi
fi
AUTOGROUP_KNOB=/proc/sys/kernel/sched_autogroup_enabled
autogroup_was=
stop_env() {
  if ((keep_env)); then
    log "environment left up: LL_RUN_DIR=$RUN_DIR $SCRIPT_DIR/env.sh down"
  else
    "$SCRIPT_DIR/env.sh" down || true
  fi
  if [[ -n $autogroup_was ]]; then
    if echo "$autogroup_was" 2>/dev/null >"$AUTOGROUP_KNOB"; then
      log "kernel.sched_autogroup_enabled restored to $autogroup_was"
    else
      log "could not restore kernel.sched_autogroup_enabled to $autogroup_was"
    fi
  fi
}
# autogroup_off: kernel.sched_autogroup_enabled 0 for the run, if it is on and writable (header).
autogroup_off() {
  local v
  v=$(cat "$AUTOGROUP_KNOB" 2>/dev/null) || { log "no $AUTOGROUP_KNOB: no autogroup scheduling to turn off"; return 0; }
  [[ $v == 1 ]] || return 0
  if echo 0 2>/dev/null >"$AUTOGROUP_KNOB"; then
    autogroup_was=$v
    log "kernel.sched_autogroup_enabled 0 for the run (was 1; restored at the end)"
  else
    log "WARNING: could not turn kernel.sched_autogroup_enabled off (not root?):" \
      "the latency figures will carry its stalls"
  fi
}

# What is missing first (Debian packages, the broker's jars): the build needs librdkafka's headers.
"$SCRIPT_DIR/env.sh" install >/dev/null || { log "scripts/env.sh install failed"; exit 1; }
log "Release build in $BUILD_DIR ..."
mkdir -p "$BUILD_DIR"
cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >"$BUILD_DIR/bench-build.log" 2>&1 ||
  { tail -n 30 "$BUILD_DIR/bench-build.log" >&2; exit 1; }
cmake --build "$BUILD_DIR" -j"$(nproc)" >>"$BUILD_DIR/bench-build.log" 2>&1 || { tail -n 30 "$BUILD_DIR/bench-build.log" >&2; exit 1; }
# the memory floor's probe (phase "floor"): libpq and librdkafka alone, no loadledger code
# shellcheck disable=SC2046
cc -std=c11 -O2 -Wall -Wextra -Werror "$SCRIPT_DIR/bench/rss_floor.c" $(pkg-config --cflags --libs rdkafka libpq) \
  -o "$BUILD_DIR/ll-rss-floor" >>"$BUILD_DIR/bench-build.log" 2>&1 || { tail -n 30 "$BUILD_DIR/bench-build.log" >&2; exit 1; }

trap stop_env EXIT
[[ $autogroup == off ]] && autogroup_off
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# A durable cluster: an environment left over from a non-durable start is restarted with the
# durable settings (env.sh writes loadledger.conf at each start of PostgreSQL).
if "$SCRIPT_DIR/env.sh" status 2>/dev/null; then
  "$SCRIPT_DIR/env.sh" stop pg
  "$SCRIPT_DIR/env.sh" start pg
fi
"$SCRIPT_DIR/env.sh" up >/dev/null
# shellcheck disable=SC1091
. "$RUN_DIR/env"
durable=$("$LL_PG_BINDIR/psql" -X -At "$LL_PG_CONNINFO" -c \
  "select current_setting('fsync') || current_setting('synchronous_commit') || current_setting('full_page_writes')")
[[ $durable == ononon ]] || { log "PostgreSQL is not durable ($durable)"; exit 1; }
log "PostgreSQL: $("$LL_PG_BINDIR/psql" -X -At "$LL_PG_CONNINFO" -c "select string_agg(name || ' ' ||
  current_setting(name), ', ' order by name) from pg_settings where name in ('shared_buffers', 'max_wal_size',
  'checkpoint_timeout', 'checkpoint_completion_target')")${LL_PG_CONF_EXTRA:+ ($LL_PG_CONF_EXTRA)}"

kdata=$(readlink -f "$RUN_DIR/kafka/data")
log "the broker's data: $kdata ($(stat -f -c %T "$kdata")); PostgreSQL's: $RUN_DIR/pg/data ($(stat -f -c %T "$RUN_DIR/pg"))"
json=$(dirname "$RUN_DIR")/loadledger-bench-$(date -u +%Y%m%dT%H%M%SZ).json
log "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), load $(cut -d' ' -f1-3 /proc/loadavg)"
LL_BUILD_DIR=$BUILD_DIR /usr/bin/python3 "$REPO_ROOT/tools/nifisim/bench.py" --runs "$runs" \
  --partitions "$partitions" --chunks "$chunks" "${quick[@]}" "${scaling[@]}" "${history[@]}" --json "$json" "${extra[@]}"
log "figures also in $json"
