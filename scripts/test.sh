#!/usr/bin/env bash
# Installs dependencies, builds with AddressSanitizer and UBSan, runs every
# test (unit and integration) through CTest, two at a time on two cores, then
# prints the slowest tests, every skipped test with what it needs, and the
# count of single tests (tests/summary.py). The package's suite
# (integration.package) checks the .deb of build/package/ if there is one and
# skips otherwise: .ci/run builds the package and runs it after this script.
#
# One suite alone, after a first run has built everything:
#   ctest --preset debug -R integration.jobs      (or unit.state_test, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# CI installs PostgreSQL (deps.sh): its tests must run, not skip.
export BRINE_REQUIRE_POSTGRES=1
cmake --preset debug >/dev/null
cmake --build --preset debug -j"$(nproc)"
results=build/debug/test-results
rm -rf "$results"
rc=0
ctest --preset debug -j"$(nproc)" --output-junit "$PWD/$results/ctest.xml" || rc=$?
python3 tests/summary.py build/debug
exit $rc
