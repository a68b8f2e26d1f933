#!/usr/bin/env bash
# The benchmark suite: builds a release brine and prints one table of figures
# (and writes bench/results/<date>-<host>.json). `--quick` is the bounded
# CI mode (under two minutes); the full run stays under fifteen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target brine brine_microbench >/dev/null
# Simulated minions need descriptors: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)"
exec python3 bench/run.py --brine build/release/src/app/brine "$@"
