#!/bin/sh
# clang_tidy.sh CLANG_TIDY SOURCE_DIR BUILD_DIR [JOBS]
# The static analysis of ctest style.clang_tidy: clang-tidy (checks in SOURCE_DIR/.clang-tidy, every
# warning an error) over the project's own C sources (common/, services/, tools/; not tests/ or
# fuzz/) with the flags of BUILD_DIR/compile_commands.json, JOBS (default 2) files at a time.
# Exits 1 on any warning, naming file and check; 2 when something it needs is missing.
set -u
tidy=$1 src=$2 build=$3 jobs=${4:-2}
db=$build/compile_commands.json
if [ ! -f "$db" ]; then
  echo "clang_tidy.sh: $db missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)" >&2
  exit 2
fi
list=$(mktemp) out=$(mktemp)
trap 'rm -f "$list" "$out"' EXIT
# CMake writes one "file": "<absolute path>" per translation unit.
sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$db" | grep -E "^$src/(common|services|tools)/.*\.c$" | sort -u >"$list"
n=$(wc -l <"$list")
if [ "$n" -eq 0 ]; then
  echo "clang_tidy.sh: no project sources in $db" >&2
  exit 2
fi
echo "clang_tidy.sh: $("$tidy" --version | grep -i version | head -n 1 | sed 's/^ *//'), $n files, $jobs jobs"
start=$(date +%s)
# --quiet drops the "N warnings generated" lines; a file with a warning exits non-zero (WarningsAsErrors).
xargs -P "$jobs" -n 1 "$tidy" -p "$build" --quiet <"$list" >"$out" 2>&1
rc=$?
grep -v -E '^[0-9]+ warnings? (generated|treated as errors?)\.?$' "$out"
echo "clang_tidy.sh: $(($(date +%s) - start)) s"
if [ "$rc" -ne 0 ]; then
  echo "clang_tidy.sh: FAILED: $(grep -c -E '(warning|error): .*\[' "$out") finding(s) above; fix the code, or, for a false positive, restructure it or add NOLINT(check) with the reason on the same line (.clang-tidy)" >&2
  exit 1
fi
echo "clang_tidy.sh: no findings"
