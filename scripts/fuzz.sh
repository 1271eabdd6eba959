#!/usr/bin/env bash
# scripts/fuzz.sh — the codec's libFuzzer targets (fuzz/, docs/fuzzing.md), built with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer in their own build tree.
#
#   fuzz.sh TARGET [SECONDS]   a long run of one target (default 3600 s, one process): new
#                              inputs collect in BUILD/work/TARGET; at the end the committed
#                              corpus fuzz/corpus/TARGET is re-minimized with them (-merge=1);
#                              a crash, leak, timeout or OOM stops the run, is saved in
#                              BUILD/artifacts/ and exits non-zero
#   fuzz.sh --check [SECONDS]  every target for SECONDS (12) each on the committed corpus,
#                              nothing written to the tree; fails on any finding (ctest fuzz.check)
#   fuzz.sh --seed             merge fuzz/make_seeds.py's seeds into fuzz/corpus/* (minimized)
#                              and rewrite fuzz/regress/* (inputs every run reads, never merged)
#   fuzz.sh --build            only build the targets
#   fuzz.sh --list             the target names
#
# Settings (environment): LL_FUZZ_BUILD_DIR (build-fuzz in the checkout), LL_FUZZ_CC (clang),
# LL_FUZZ_RSS_MB (512, the RSS limit and the largest single allocation), LL_FUZZ_TIMEOUT (2,
# seconds per input). A finding is reproduced with `BUILD/fuzz/TARGET FILE`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LL_FUZZ_BUILD_DIR:-$root/build-fuzz}
cc=${LL_FUZZ_CC:-clang}
rss=${LL_FUZZ_RSS_MB:-512}
per_input=${LL_FUZZ_TIMEOUT:-2}
targets=(fuzz_bare fuzz_confluent fuzz_container fuzz_block fuzz_schema)

usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { printf 'fuzz.sh: %s\n' "$*" >&2; exit 2; }

build_targets() {
  command -v "$cc" >/dev/null 2>&1 || die "$cc not found (scripts/env.sh install installs clang)"
  cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLL_BUILD_TESTS=OFF -DLL_FUZZ=ON >/dev/null
  cmake --build "$build" --target fuzz -j"$(nproc)" >/dev/null
}

is_target() {
  local t
  for t in "${targets[@]}"; do [[ $t == "$1" ]] && return 0; done
  return 1
}

# -max_len: a little above the largest seed of fuzz/make_seeds.py (a schema text or a container
# of about 3.7 KiB; the datum seeds stay under 300 bytes).
max_len() {
  case $1 in
    fuzz_schema | fuzz_container) echo 4608 ;;
    *) echo 1024 ;;
  esac
}

# run TARGET SECONDS NEW_DIR: libFuzzer on NEW_DIR (written) + the committed corpus (read).
run() {
  local t=$1 secs=$2 new=$3
  mkdir -p "$new" "$build/artifacts"
  local dirs=("$new" "$root/fuzz/corpus/$t")
  if [[ -d $root/fuzz/regress/$t ]]; then dirs+=("$root/fuzz/regress/$t"); fi
  ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=64} "$build/fuzz/$t" -max_total_time="$secs" \
    -timeout="$per_input" -rss_limit_mb="$rss" -malloc_limit_mb="$rss" -max_len="$(max_len "$t")" -dict="$root/fuzz/avro.dict" \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    "${dirs[@]}"
}

# merge TARGET DIR...: the committed corpus becomes the set libFuzzer's -merge=1 picks
# from DIR... that keeps every covered edge (-use_counters=0: hit counts do not count).
merge() {
  local t=$1
  shift
  rm -rf "$build/merged" && mkdir -p "$build/merged"
  "$build/fuzz/$t" -merge=1 -use_counters=0 -rss_limit_mb="$rss" -timeout="$per_input" \
    "$build/merged" "$@" >"$build/merge.log" 2>&1 || {
    tail -5 "$build/merge.log" >&2
    die "$t: merge failed"
  }
  rm -rf "$root/fuzz/corpus/$t" && mkdir -p "$root/fuzz/corpus"
  mv "$build/merged" "$root/fuzz/corpus/$t"
  echo "fuzz.sh: $t: $(find "$root/fuzz/corpus/$t" -type f | wc -l) corpus files" >&2
}

# The findings of a failed run: libFuzzer's own summary plus the input in hex.
report() {
  local log=$1
  grep -E 'ERROR|SUMMARY|runtime error|Test unit written|leak|timeout|out-of-memory' "$log" | head -20 >&2
  local f
  f=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  if [[ -n $f && -f $f ]]; then
    echo "fuzz.sh: input ($(wc -c <"$f") bytes), reproduce with: $2 $f" >&2
    od -An -tx1 -v "$f" | head -16 >&2
  fi
}

case ${1:-} in
  -h | --help | '') usage; [[ -n ${1:-} ]] ;;
  --list) printf '%s\n' "${targets[@]}" ;;
  --build) build_targets ;;
  --seed)
    build_targets
    seeds=$build/seeds
    rm -rf "$seeds"
    /usr/bin/python3 "$root/fuzz/make_seeds.py" "$seeds"
    for t in "${targets[@]}"; do merge "$t" "$root/fuzz/corpus/$t" "$seeds/$t"; done
    rm -rf "$root/fuzz/regress" && cp -r "$seeds/regress" "$root/fuzz/regress"
    ;;
  --check)
    secs=${2:-12}
    build_targets
    status=0
    for t in "${targets[@]}"; do
      work=$(mktemp -d)
      log=$work/log
      if run "$t" "$secs" "$work/new" >"$log" 2>&1; then
        echo "fuzz.sh: $t: ok, $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") runs in ${secs}s" >&2
      else
        echo "fuzz.sh: $t: FAILED" >&2
        report "$log" "$build/fuzz/$t"
        status=1
      fi
      rm -rf "$work"
    done
    exit $status
    ;;
  -*) usage >&2; exit 2 ;;
  *)
    t=$1
    secs=${2:-3600}
    is_target "$t" || die "unknown target $t (fuzz.sh --list)"
    [[ $secs =~ ^[0-9]+$ ]] || die "seconds must be a number"
    build_targets
    log=$build/$t.log
    set +e
    run "$t" "$secs" "$build/work/$t" 2>&1 | tee "$log" | grep -E '^#[0-9]+.*(pulse|DONE)|ERROR|SUMMARY'
    status=${PIPESTATUS[0]}
    set -e
    ((status != 0)) && report "$log" "$build/fuzz/$t"
    merge "$t" "$root/fuzz/corpus/$t" "$build/work/$t"
    exit "$status"
    ;;
esac
