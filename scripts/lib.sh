# Shared by the demo and the bench scripts: a work directory, the daemons
# started in it, and a trap that stops them and removes it.
# Usage: source scripts/lib.sh; work_dir NAME; ...; pids+=($!)

pids=()
dir=""

work_dir() {
  dir=$(mktemp -d "/tmp/$1.XXXXXX")
  trap stop_all EXIT
}

stop_all() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$rc" != 0 ] && [ -n "$dir" ]; then
    echo "kept $dir for a look (logs of the failed run)" >&2
  elif [ -n "$dir" ]; then
    rm -rf "$dir"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
