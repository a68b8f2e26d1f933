#!/usr/bin/env bash
# Foundation figures on this machine, with a release build: time from
# `brine key accept` to a minion serving jobs, `test.ping` wall time across
# three real minions (CLI start included), and resident memory of the master
# and of an idle minion. Prints one table; bounded to about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10}
if [ ! -x build/release/src/app/brine ]; then
  bash scripts/deps.sh
  cmake --preset release >/dev/null
  cmake --build --preset release -j"$(nproc)" --target brine >/dev/null
fi
brine="$PWD/build/release/src/app/brine"
source scripts/lib.sh
work_dir brine-bench
now() { date +%s.%N; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

port=$(free_port)
printf 'interface: 127.0.0.1\nport: %s\npki_dir: pki\ncachedir: cache\nsock_dir: run\nlog_file: master.log\n' \
  "$port" > "$dir/master"
"$brine" master -c "$dir/master" & master_pid=$!; pids+=($master_pid)
minion_pids=()
for id in m1 m2 m3; do
  mkdir "$dir/$id"
  printf 'id: %s\nmaster: 127.0.0.1\nmaster_port: %s\npki_dir: pki\ncachedir: cache\nlog_file: log\n' \
    "$id" "$port" > "$dir/$id/minion"
  "$brine" minion -c "$dir/$id/minion" & minion_pids+=($!); pids+=($!)
done
deadline=$(( $(date +%s) + 30 ))
until [ "$("$brine" key -c "$dir/master" list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["pending"]))')" = 3 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "minions did not become pending in 30 s" >&2; exit 1; }
  sleep 0.05
done
t0=$(now)
"$brine" key -c "$dir/master" accept --all >/dev/null
until "$brine" cmd -c "$dir/master" -t 2 --out json '*' test.ping >/dev/null 2>&1; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "minions did not serve jobs in time" >&2; exit 1; }
done
t1=$(now)
accept_ms=$(python3 -c "print(round(($t1 - $t0) * 1000, 1))")

times=()
for _ in $(seq "$runs"); do
  a=$(now); "$brine" cmd -c "$dir/master" --out json '*' test.ping >/dev/null; b=$(now)
  times+=("$(python3 -c "print(($b - $a) * 1000)")")
done
read -r pmin pmed pmax < <(printf '%s\n' "${times[@]}" | python3 -c '
import sys, statistics
v = sorted(float(x) for x in sys.stdin)
print(f"{v[0]:.1f} {statistics.median(v):.1f} {v[-1]:.1f}")')

# Idle minion CPU over 5 s, from /proc ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
c0=$(ticks "${minion_pids[0]}"); sleep 5; c1=$(ticks "${minion_pids[0]}")
cpu=$(python3 -c "print(round(($c1 - $c0) / $(getconf CLK_TCK) / 5 * 100, 2))")

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-48s %s\n' "figure" "value"
printf '%-48s %s ms\n' "key accept -> 3 minions serving test.ping" "$accept_ms"
printf '%-48s %s / %s / %s ms (min/median/max of %s)\n' "test.ping across 3 minions, CLI wall" "$pmin" "$pmed" "$pmax" "$runs"
printf '%-48s %s KiB\n' "master RSS, 3 minions connected" "$(rss_kib "$master_pid")"
printf '%-48s %s KiB\n' "idle minion RSS" "$(rss_kib "${minion_pids[0]}")"
printf '%-48s %s %%\n' "idle minion CPU over 5 s" "$cpu"
