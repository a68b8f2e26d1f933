#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60):
# the frame decoder, the DNS SRV reply parser, the Jinja template engine,
# the file server's requests and paths, the apt sources parser, the archive
# listings, target expressions and config files.
# TARGETS (default all) picks some.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
targets=${2:-frame srv template fileserver apt_sources archive_listing target config}
out=build/fuzz
mkdir -p "$out"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
  tests/fuzz/frame_fuzz.cc src/proto/frame.cc src/base/error.cc -o "$out/frame_fuzz"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -DASIO_STANDALONE \
  tests/fuzz/srv_fuzz.cc src/net/dns.cc src/base/error.cc -lcares -lfmt -o "$out/srv_fuzz"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
  tests/fuzz/template_fuzz.cc src/render/*.cc src/base/{error,python,yaml_json}.cc \
  -lyaml -lyaml-cpp -lpcre2-8 -lcrypto -o "$out/template_fuzz"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -DASIO_STANDALONE \
  tests/fuzz/fileserver_fuzz.cc src/fileserver/{path,roots,serve}.cc -lcrypto \
  -o "$out/fileserver_fuzz"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
  tests/fuzz/apt_sources_fuzz.cc src/modules/apt_sources.cc -o "$out/apt_sources_fuzz"
  tests/fuzz/archive_listing_fuzz.cc src/modules/archive_listing.cc -o "$out/archive_listing_fuzz"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
  tests/fuzz/target_fuzz.cc src/target/*.cc src/packed/*.cc src/base/{error,yaml_json,python}.cc \
  -lyaml-cpp -lyaml -lfmt -o "$out/target_fuzz"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
  tests/fuzz/config_fuzz.cc src/base/{config,error,fs,log,yaml_json,python}.cc \
  -lyaml-cpp -lyaml -lfmt -lspdlog -o "$out/config_fuzz"
for target in $targets; do
  corpus=$(mktemp -d)
  cp "tests/fuzz/corpus/$target/"* "$corpus/"
  "$out/${target}_fuzz" -max_total_time="$seconds" -max_len=4096 "$corpus"
  rm -rf "$corpus"
done
