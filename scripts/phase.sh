# Phase timing and the compiler cache's hit rate, for scripts/test.sh and
# .ci/run: every developer sees where a run's time goes, on every run.
# Usage: source scripts/phase.sh; phase NAME COMMAND...; build_phase NAME COMMAND...
# phase prints "phase NAME: N s" when COMMAND ends, and fails as it fails.

phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "phase $name: $((SECONDS - start)) s$([ $rc -eq 0 ] || echo " (failed: exit $rc)")" >&2
  return $rc
}

# ccache's hits and misses so far (direct + preprocessed), "hits misses".
ccache_counts() {
  command -v ccache >/dev/null || { echo "0 0"; return; }
  ccache --print-stats 2>/dev/null | awk '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
    $1 == "cache_miss" { m += $2 }
    END { print h + 0, m + 0 }'
}

# A build phase also prints how many of its compiles ccache answered.
build_phase() {
  local before after rc=0
  before=$(ccache_counts)
  phase "$@" || rc=$?
  after=$(ccache_counts)
  set -- $before $after
  local hits=$(($3 - $1)) misses=$(($4 - $2))
  if [ $((hits + misses)) -gt 0 ]; then
    echo "ccache: $hits hits, $misses misses ($((100 * hits / (hits + misses)))% hit rate; cache $(ccache -k cache_dir 2>/dev/null))" >&2
  elif ! command -v ccache >/dev/null; then
    echo "ccache: not installed; every unit compiled (apt-get install ccache)" >&2
  fi
  return $rc
}
