#!/usr/bin/env bash
# The README's second command: sets up a fresh machine, starts the broker and the database,
# builds loadledger with AddressSanitizer + UBSan, and runs every test with ctest (cmocka unit
# tests, then the integration tests against the real Kafka and PostgreSQL), then stops the
# environment. Extra arguments go to ctest (e.g. -L unit, -R chunk).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh" up >/dev/null
trap '"$root/scripts/env.sh" down >/dev/null 2>&1 || true' EXIT
build=${LL_TEST_BUILD_DIR:-$root/build-test}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DLL_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure --timeout 1200 "$@"
