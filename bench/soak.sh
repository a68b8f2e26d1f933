#!/usr/bin/env bash
# Soak: 18,000 simulated minions (two swarm processes on two source
# addresses, under the 20,000-descriptor cap per process) held against one
# master for HOLD seconds (default 300), with a full test.ping at the start
# and at the end. Fails if any minion drops or any ping misses one.
set -euo pipefail
cd "$(dirname "$0")/.."
hold=${HOLD:-300}
per=${PER_SWARM:-9000}
brine=${BRINE:-$PWD/build/release/src/app/brine}
[ -x "$brine" ] || { cmake --preset release >/dev/null; cmake --build --preset release -j"$(nproc)" --target brine >/dev/null; }
ulimit -n "$(ulimit -Hn)"
total=$((2 * per))
source scripts/lib.sh
work_dir brine-soak
port=$(free_port)
printf 'interface: 127.0.0.1\nport: %s\npki_dir: pki\ncachedir: cache\nsock_dir: run\nauto_accept: true\nlog_file: master.log\nlog_level: %s\nmax_concurrent_handshakes: 512\n' \
  "$port" "${LOG_LEVEL:-warning}" > "$dir/master"
"$brine" master -c "$dir/master" 2> "$dir/master.stderr" &
master=$!; pids+=($master)
# How a daemon ended, should it end early: its exit status (128+N: signal N).
ended() { local rc=0; wait "$1" || rc=$?; echo "exit status $rc"; }
for i in 1 2; do
  "$brine" swarm --master "127.0.0.1:$port" --count "$per" --id-prefix "soak$i-" \
    --keys-dir /tmp/brine-bench-keys --source "127.0.0.$((i + 1))" --seconds $((hold + 300)) \
    --log-level warning \
    > "$dir/swarm$i.out" 2> "$dir/swarm$i.err" &
  pids+=($!)
done
deadline=$(( $(date +%s) + 180 ))
until grep -q "^all $per connected" "$dir/swarm1.out" && grep -q "^all $per connected" "$dir/swarm2.out"; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "soak: not all $total connected in 180 s" >&2; tail -2 "$dir"/swarm*.out >&2; exit 1; }
  sleep 1
done
echo "soak: $total connected ($(grep -h '^all' "$dir"/swarm*.out | tr '\n' ' '))"
ping() {
  local n
  "$brine" cmd -c "$dir/master" -t 60 --out json '*' test.ping > "$dir/ping.json" 2> "$dir/ping.err" || true
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$dir/ping.json" 2>/dev/null || echo 0)
  [ "$n" = "$total" ] || { echo "soak: test.ping got $n of $total: $(tail -c 300 "$dir/ping.err")" >&2; exit 1; }
  echo "soak: test.ping $n/$total at $(date +%T)"
}
ping
echo "soak: master RSS $(awk '/VmRSS/{print $2}' /proc/$master/status) KiB"
# Errors count from here: the storm of connecting is the auth-storm benchmark's.
storm_lines=$(wc -l < "$dir/master.log")
# The kernel's view of the hold: connections it aborted (keepalive or user
# timeout), resets sent, tail-loss probes.
nstat -n 2>/dev/null || true
echo "soak: master log lines while connecting: $storm_lines ($(grep -c 'handshake failed' "$dir/master.log" || true) failed handshakes retried)"
end=$(( $(date +%s) + hold ))
while [ "$(date +%s)" -lt "$end" ]; do
  sleep 10
  kill -0 "$master" 2>/dev/null || { echo "soak: the master died ($(ended "$master")): $(tail -c 500 "$dir/master.stderr")" >&2; exit 1; }
  for i in 1 2; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "soak: swarm $i died ($(ended "${pids[$i]}"))" >&2; exit 1; }
    # A status line a second: an old last line means a stalled swarm.
    age=$(( $(date +%s) - $(stat -c %Y "$dir/swarm$i.out") ))
    [ "$age" -le 5 ] || { echo "soak: swarm $i printed nothing for $age s" >&2; exit 1; }
    last=$(tail -1 "$dir/swarm$i.out")
    case "$last" in *"connected=$per pending=0 refused=0 connecting=0"*) ;;
      *) echo "soak: swarm $i dropped: $last" >&2; exit 1 ;; esac
  done
done
ping
counters=$(nstat 2>/dev/null | awk '/AbortOn|OutRsts|TCPTimeouts|LossProbes|KeepAlive/{printf "%s=%s ", $1, $2}')
echo "soak: kernel TCP counters over the hold (aborts, resets, timeouts, probes): ${counters:-all zero}"
held_log=$(tail -n +"$((storm_lines + 1))" "$dir/master.log")
warnings=$(printf '%s' "$held_log" | grep -c "warning\|error" || true)
disconnects=$(printf '%s' "$held_log" | grep -c "disconnected" || true)
echo "soak: held $total minions for $hold s; master warnings/errors while held: $warnings; minion disconnects: $disconnects; RSS $(awk '/VmRSS/{print $2}' /proc/$master/status) KiB"
if [ "$warnings" != 0 ]; then
  printf '%s\n' "$held_log" | grep "warning\|error" | sed -n 1,5p >&2
  exit 1
fi
