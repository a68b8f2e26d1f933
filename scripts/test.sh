#!/usr/bin/env bash
# Installs dependencies, builds with AddressSanitizer and UBSan, builds the
# Debian package from a release build (scripts/package.sh), runs every test
# (unit and integration, the package's among them) through CTest, two at a
# time on two cores, then prints the slowest tests, every skipped test with
# what it needs, and the count of single tests (tests/summary.py).
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
# The package suite (tests/integration/test_package.py) checks the .deb of a
# release build: built here (build/release, brought up to date), so that it
# runs, not skips.
BRINE_DEB=$(bash scripts/package.sh | tee /dev/stderr | tail -n 1)
export BRINE_DEB BRINE_REQUIRE_PACKAGE=1
results=build/debug/test-results
rm -rf "$results"
rc=0
ctest --preset debug -j"$(nproc)" --output-junit "$PWD/$results/ctest.xml" || rc=$?
python3 tests/summary.py build/debug
exit $rc
