#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60):
# the frame decoder, the MessagePack reader, the DNS SRV reply parser, the Jinja template engine,
# the file server's requests and paths, the apt sources parser, the archive
# listings, target expressions, config files, peer hellos on a master's
# cluster_port, compile masters' request and reply bodies, source hashes and hash files, and
# state arguments (the state
# runner and every state function; see tests/fuzz/state_args_fuzz.cc: it
# runs as root or in a user namespace, in a read-only mount namespace).
# TARGETS (default all) picks some.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
targets=${2:-frame msgpack srv template fileserver apt_sources archive_listing target config peer_hello catalog source_sum state_args}
out=build/fuzz
mkdir -p "$out"
cxx=(clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc)
# Builds the one-file targets that TARGETS names.
build() {
  case "$1" in
    frame) "${cxx[@]}" tests/fuzz/frame_fuzz.cc src/proto/frame.cc src/base/error.cc \
      -o "$out/frame_fuzz" ;;
    msgpack) "${cxx[@]}" tests/fuzz/msgpack_fuzz.cc src/proto/msgpack.cc src/base/error.cc \
      -o "$out/msgpack_fuzz" ;;
    srv) "${cxx[@]}" -DASIO_STANDALONE tests/fuzz/srv_fuzz.cc src/net/dns.cc src/base/error.cc \
      -lcares -lfmt -o "$out/srv_fuzz" ;;
    template) "${cxx[@]}" tests/fuzz/template_fuzz.cc src/render/*.cc \
      src/base/{error,python,yaml_json}.cc -lyaml -lyaml-cpp -lpcre2-8 -lcrypto \
      -o "$out/template_fuzz" ;;
    fileserver) "${cxx[@]}" -DASIO_STANDALONE tests/fuzz/fileserver_fuzz.cc \
      src/fileserver/{path,roots,serve,backend,gitfs}.cc src/base/error.cc -ldl -lcrypto \
      -o "$out/fileserver_fuzz" ;;
    apt_sources) "${cxx[@]}" tests/fuzz/apt_sources_fuzz.cc src/modules/apt_sources.cc \
      -o "$out/apt_sources_fuzz" ;;
    archive_listing) "${cxx[@]}" tests/fuzz/archive_listing_fuzz.cc \
      src/modules/archive_listing.cc -o "$out/archive_listing_fuzz" ;;
    target) "${cxx[@]}" tests/fuzz/target_fuzz.cc src/target/*.cc src/packed/*.cc \
      src/base/{error,yaml_json,python}.cc -lyaml-cpp -lyaml -lfmt -o "$out/target_fuzz" ;;
    config) "${cxx[@]}" tests/fuzz/config_fuzz.cc src/base/{config,error,fs,log,yaml_json,python}.cc \
      -lyaml-cpp -lyaml -lfmt -lspdlog -o "$out/config_fuzz" ;;
    peer_hello) "${cxx[@]}" tests/fuzz/peer_hello_fuzz.cc src/cluster/identity.cc \
      src/pki/keys.cc src/proto/frame.cc src/base/{error,fs}.cc -lcrypto -lfmt \
      -o "$out/peer_hello_fuzz" ;;
    catalog) "${cxx[@]}" tests/fuzz/catalog_fuzz.cc src/catalog/request.cc src/proto/frame.cc \
      src/fileserver/{path,roots,backend}.cc src/base/error.cc -lcrypto -lfmt \
      -o "$out/catalog_fuzz" ;;
    source_sum) "${cxx[@]}" -fno-sanitize=function -DASIO_STANDALONE -DASIO_HAS_CO_AWAIT=1 \
      tests/fuzz/source_sum_fuzz.cc src/modules/source_sum.cc src/base/error.cc \
      -o "$out/source_sum_fuzz" ;;
    state_args) ;;  # below
    *) echo "fuzz.sh: no target '$1'" >&2; exit 2 ;;
  esac
}
for target in $targets; do build "$target"; done
# state_args links most of the minion: its objects are compiled in parallel
# and kept (an object is rebuilt when its source is newer, all of them when
# a header is). Clang 14's
# -fsanitize=function cannot compile coroutines ("Cannot represent a
# difference across sections"), and Asio enables co_await for clang only
# with <experimental/coroutine>: both are set here.
if [[ " $targets " == *" state_args "* ]]; then
  objs="$out/state_args"
  mkdir -p "$objs"
  # A changed header rebuilds every object; a changed source its own.
  if [[ -e "$objs/.stamp" && -n "$(find src -name '*.h' -newer "$objs/.stamp" -print -quit)" ]]; then
    rm -f "$objs"/*.o
  fi
  ls tests/fuzz/state_args_fuzz.cc src/{apply,states,modules,state,render,fileserver,target,packed,pq,base}/*.cc |
    xargs -P "$(nproc)" -I{} sh -c 'o="$1/$(echo {} | tr / _).o"; [ "$o" -nt {} ] && exit 0
      clang++ -std=c++20 -g -O1 \
      -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=function -Isrc $2 \
      -DASIO_STANDALONE -DASIO_NO_DEPRECATED -DASIO_HAS_CO_AWAIT=1 -DBRINE_VERSION=\"fuzz\" \
      -c {} -o "$o"' _ "$objs" "$(pkg-config --cflags libpq)"
  touch "$objs/.stamp"
  clang++ -fsanitize=fuzzer,address,undefined -fno-sanitize=function "$objs"/*.o \
    -lyaml-cpp -lyaml -lpcre2-8 -lssl -lcrypto -lfmt -lspdlog -lpthread -ldl -o "$out/state_args_fuzz"
fi
for target in $targets; do
  corpus=$(mktemp -d)
  cp "tests/fuzz/corpus/$target/"* "$corpus/"
  "$out/${target}_fuzz" -max_total_time="$seconds" -max_len=4096 -artifact_prefix="$PWD/" "$corpus"
  rm -rf "$corpus"
done
