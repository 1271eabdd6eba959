#!/usr/bin/env bash
# The README's second command: sets up a fresh machine, starts the broker and the database,
# builds loadledger twice and runs every test with ctest:
#   build-test  AddressSanitizer + UBSan: cmocka unit tests, then the integration tests against
#               the real Kafka broker and PostgreSQL (services run sanitized; a leak or UB report
#               fails the test that started them);
#   build-vg    no sanitizer, optimised as the demo builds: the unit tests under valgrind memcheck.
# Then it stops the environment. Extra arguments go to the first ctest (e.g. -L unit, -R chunk).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh" up >/dev/null
trap '"$root/scripts/env.sh" down >/dev/null 2>&1 || true' EXIT
jobs=$(nproc)

build=${LL_TEST_BUILD_DIR:-$root/build-test}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DLL_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$jobs"

vg=${LL_VALGRIND_BUILD_DIR:-$root/build-vg}
cmake -S "$root" -B "$vg" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLL_SANITIZE=OFF >/dev/null
cmake --build "$vg" -j"$jobs"

status=0
# -j: the tests that are not serial (unit, style, the Spin model, the fuzz check, compose.check)
# run side by side; every test of the shared environment is RUN_SERIAL and runs alone
(cd "$build" && ctest --output-on-failure --timeout 1200 -j"$jobs" "$@") || status=$?
(cd "$vg" && ctest --output-on-failure -j"$jobs" -L valgrind) || status=$?
exit $status
