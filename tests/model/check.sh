#!/usr/bin/env bash
# check.sh - model-checks tests/model/protocol.pml with Spin (issue 11, docs/design.md §11).
#
# Runs, each an exhaustive search (pan -DCOLLAPSE: lossless state compression, no bitstate):
#   safety/extract   claims, chunks, zombies, reissues to max attempts, deadline, 2 consumer crashes
#   safety/deliver   outbox, dispatcher crash after publish, ack timeout, resent ACK, 1 crash, 1 zombie
#   liveness         <> final state under weak fairness (pan -a -f): 1 consumer crash, 1 zombie,
#                    1 dispatcher crash, no deadline (it would end every run)
#   safety/dbloss    the database loses its last k <= 2 committed transactions once, at any point,
#                    with no new connection (a pooler; issues 27, 39): positions in the ledger,
#                    each written by compare-and-set on its write token, min(ledger, Kafka) at a
#                    refused write, a position check or a crash; 1 consumer crash, 1 dispatcher
#                    crash, 1 ack timeout, 1 resent ACK, no sweeper finding or deadline (their
#                    clock-driven transactions are not replayed)
#   safety/stale     no loss; 1 stale claimer instance (evicted at a rebalance) that commits the
#                    transaction it had in hand later, with the token it had (issue 39)
#   safety/stale_loss both, with 1 consumer crash and 1 ack timeout (the dispatcher crash and the
#                    resent ACK left out: with them the search does not fit 3 GB)
# then every mutant (-DMUTANT_x), each of which Spin must reject with a trail.
# Prints states stored, depth, memory and time of each run; exits non-zero on any violation, an
# incomplete search, or a mutant that passes. Installs nothing: scripts/env.sh installs `spin`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model=$here/protocol.pml
work=${LL_MODEL_DIR:-${TMPDIR:-/tmp}/loadledger-model}
memlim=${LL_MODEL_MEMLIM:-3072} # MB per pan run

command -v spin >/dev/null 2>&1 || {
  echo "check.sh: error: spin not found (Debian package 'spin'; scripts/env.sh install adds it)" >&2
  exit 2
}
command -v cc >/dev/null 2>&1 || { echo "check.sh: error: no C compiler (cc)" >&2; exit 2; }

EXTRACT="-DCRASH_MAX=2 -DSTALE_MAX=2 -DDCRASH_MAX=0 -DREQUEUE_MAX=0 -DRESEND_MAX=0 -DDEADLINE_MAX=1"
DELIVER="-DCRASH_MAX=1 -DSTALE_MAX=1 -DDCRASH_MAX=1 -DREQUEUE_MAX=1 -DRESEND_MAX=1 -DDEADLINE_MAX=0"
DBLOSS="-DDBLOSS -DLOSS_MAX=1 -DZOMBIE_MAX=0 -DCRASH_MAX=1 -DSTALE_MAX=0 -DDCRASH_MAX=1 -DREQUEUE_MAX=1 -DRESEND_MAX=1 -DDEADLINE_MAX=0"
STALE="-DDBLOSS -DLOSS_MAX=0 -DZOMBIE_MAX=1 -DCRASH_MAX=1 -DSTALE_MAX=0 -DDCRASH_MAX=1 -DREQUEUE_MAX=1 -DRESEND_MAX=1 -DDEADLINE_MAX=0"
STALE_LOSS="-DDBLOSS -DLOSS_MAX=1 -DZOMBIE_MAX=1 -DCRASH_MAX=1 -DSTALE_MAX=0 -DDCRASH_MAX=0 -DREQUEUE_MAX=1 -DRESEND_MAX=0 -DDEADLINE_MAX=0"
LIVE="-DLIVENESS -DCRASH_MAX=1 -DSTALE_MAX=1 -DDCRASH_MAX=1 -DREQUEUE_MAX=0 -DRESEND_MAX=0 -DDEADLINE_MAX=0"

rm -rf "$work"
mkdir -p "$work"
fail=0
start=$(date +%s)

# build NAME "SPIN_DEFINES" "CC_DEFINES": spin -a and cc in $work/NAME; prints nothing on success.
build() {
  local dir=$work/$1
  mkdir -p "$dir"
  cp "$model" "$dir/"
  (cd "$dir" && spin $2 -a protocol.pml >spin.out 2>&1 && cc -O2 -w $3 -DMEMLIM=$memlim -o pan pan.c) || {
    echo "check.sh: error: $1: spin -a / cc failed:" >&2
    cat "$dir/spin.out" >&2
    return 1
  }
}

# summary FILE: the limits of a pan run on one line.
summary() {
  local f=$1
  printf 'states=%s depth=%s memory=%sMB time=%ss' \
    "$(awk '/states, stored/ {print $1; exit}' "$f")" \
    "$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$f" | head -1)" \
    "$(awk '/total actual memory usage/ {print $1; exit}' "$f")" \
    "$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' "$f" | head -1)"
}

# verify NAME SPIN_DEFINES CC_DEFINES PAN_ARGS: the model must pass, completely.
verify() {
  local name=$1 dir=$work/$1
  build "$1" "$2" "$3" || { fail=1; return; }
  (cd "$dir" && ./pan $4 >pan.out 2>&1) || true
  local errs
  errs=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | head -1)
  if [[ $errs != 0 ]] || grep -q 'Search not completed\|reached -DMEMLIM\|max search depth too small' "$dir/pan.out"; then
    echo "FAIL  $name: $(summary "$dir/pan.out") errors=${errs:-?}"
    grep -E 'pan:|assertion|violated|Search not completed|MEMLIM|depth too small' "$dir/pan.out" | head -5 | sed 's/^/      /'
    if [[ -f $dir/protocol.pml.trail ]]; then
      (cd "$dir" && spin $2 -t -p protocol.pml 2>&1 | tail -25 | sed 's/^/      /')
    fi
    fail=1
  else
    echo "ok    $name: $(summary "$dir/pan.out")"
  fi
}

# mutant NAME SPIN_DEFINES CC_DEFINES PAN_ARGS [RUN]: Spin must find a violation and write a trail
# (RUN names the configuration when a mutant is checked under more than one).
mutant() {
  local name=mutant.$1${5:+.$5} dir=$work/mutant.$1${5:+.$5}
  build "$name" "-DMUTANT_$1 $2" "$3" || { fail=1; return; }
  (cd "$dir" && ./pan $4 >pan.out 2>&1) || true
  local errs
  errs=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | head -1)
  if [[ ${errs:-0} != 0 && -f $dir/protocol.pml.trail ]]; then
    local what
    what=$(grep -m1 -E 'pan:[0-9]+: |acceptance cycle|invalid end state' "$dir/pan.out" | sed 's/ (at depth.*//')
    echo "ok    $name rejected: ${what:-violation} (trail $dir/protocol.pml.trail)"
  else
    echo "FAIL  $name passed: Spin found no violation ($(summary "$dir/pan.out"))"
    fail=1
  fi
}

SAFE_CC="-DSAFETY -DCOLLAPSE"
LIVE_CC="-DNFAIR=4 -DCOLLAPSE"
echo "spin: $(spin -V)"
verify safety.extract "$EXTRACT" "$SAFE_CC" "-m20000"
verify safety.deliver "$DELIVER" "$SAFE_CC" "-m20000"
verify liveness "$LIVE" "$LIVE_CC" "-a -f -m20000 -N live"
verify safety.dbloss "$DBLOSS" "$SAFE_CC" "-m20000"
verify safety.stale "$STALE" "$SAFE_CC" "-m20000"
verify safety.stale_loss "$STALE_LOSS" "$SAFE_CC" "-m20000"

mutant CLAIM_NO_HISTORY "$EXTRACT" "$SAFE_CC" "-m20000"
mutant CHUNK_NO_TOKEN "$EXTRACT" "$SAFE_CC" "-m20000"
mutant DEADLINE_NO_STATUS "$EXTRACT" "$SAFE_CC" "-m20000"
mutant OUTBOX_AFTER_COMMIT "$EXTRACT" "$SAFE_CC" "-m20000"
mutant VSTART_NO_STATUS "$DELIVER" "$SAFE_CC" "-m20000"
mutant SWEEP_ANY_STATUS "$EXTRACT" "$SAFE_CC" "-m20000"
mutant REPLY_OUTSIDE_TX "$EXTRACT" "$SAFE_CC" "-m20000"
mutant OFFSET_BEFORE_DB "$LIVE" "$LIVE_CC" "-a -f -m20000 -N live"
mutant SEEK_KAFKA_ONLY "$DBLOSS" "$SAFE_CC" "-m20000"
mutant UNCONDITIONAL_POSITION "$DBLOSS" "$SAFE_CC" "-m20000" dbloss
mutant UNCONDITIONAL_POSITION "$STALE" "$SAFE_CC" "-m20000" stale

echo "model check: $(($(date +%s) - start)) s, work in $work"
if ((fail)); then
  echo "check.sh: FAILED" >&2
  exit 1
fi
echo "check.sh: all passed"
