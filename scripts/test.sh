#!/usr/bin/env bash
# Installs dependencies, builds with AddressSanitizer and UBSan, runs every
# test (unit and integration) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# CI installs PostgreSQL (deps.sh): its tests must run, not skip.
export BRINE_REQUIRE_POSTGRES=1
cmake --preset debug >/dev/null
cmake --build --preset debug -j"$(nproc)"
ctest --preset debug -j1
