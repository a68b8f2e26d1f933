#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=build/fuzz
mkdir -p "$out"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
  tests/fuzz/frame_fuzz.cc src/proto/frame.cc src/base/error.cc -o "$out/frame_fuzz"
corpus=$(mktemp -d)
cp tests/fuzz/corpus/frame/* "$corpus/"
"$out/frame_fuzz" -max_total_time="$seconds" -max_len=4096 "$corpus"
rm -rf "$corpus"
