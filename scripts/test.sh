#!/usr/bin/env bash
# Installs dependencies, builds with AddressSanitizer and UBSan, runs every
# test (unit and integration) through CTest, then prints the test phase's
# time against its budget, the slowest tests, every skipped test with what it
# needs, and the count of single tests (tests/summary.py). Each phase prints
# its wall time, and the build ccache's hit rate. The package's suite
# (integration.package) checks the .deb of build/package/ if there is one and
# skips otherwise: .ci/run builds the package and runs it after this script.
#
# One suite alone, after a first run has built everything:
#   ctest --preset debug -R integration.jobs      (or unit.state_test, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/phase.sh
phase dependencies bash scripts/deps.sh
# CI installs PostgreSQL (deps.sh): its tests must run, not skip.
export BRINE_REQUIRE_POSTGRES=1
cmake --preset debug >/dev/null
build_phase "debug build" cmake --build --preset debug -j"$(nproc)"
# Twice as many suites at once as there are cores: most of them wait on
# daemons, timers and each other. Measured on 2 cores (the whole suite,
# ASan): 505 s with -j2, 335 s with -j4, every test passing at both.
results=build/debug/test-results
rm -rf "$results"
rc=0
start=$SECONDS
phase tests ctest --preset debug -j"${BRINE_TEST_JOBS:-$((2 * $(nproc)))}" --output-junit "$PWD/$results/ctest.xml" || rc=$?
BRINE_TEST_SECONDS=$((SECONDS - start)) python3 tests/summary.py build/debug
exit $rc
