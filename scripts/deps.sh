#!/usr/bin/env bash
# Installs what brine needs to build and test, from Debian 12 packages only.
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  # The presets' generator (CMakePresets.json): Ninja schedules the unity
  # batches and links of every room on both cores without make's recursion.
  ninja-build
  # The build's compiler cache, shared by every clone of the machine
  # (cmake/brine.cmake: brine_use_ccache).
  ccache
  # scripts/package.sh: dpkg-deb, dpkg-shlibdeps, dpkg-parsechangelog; its
  # test verifies the systemd units with systemd-analyze.
  dpkg-dev systemd
  libasio-dev libssl-dev nlohmann-json3-dev libyaml-cpp-dev libsqlite3-dev
  libcli11-dev libspdlog-dev libfmt-dev libjemalloc-dev libc-ares-dev libpcre2-dev libyaml-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 openssl procps dnsmasq-base
  # The pkg tests build a local apt repository (dpkg-deb, apt-ftparchive).
  apt-utils
  python3-jinja2
  # The system state modules' tools: crontab (cron.*), ssh-keygen and
  # ssh-keyscan (ssh.*, ssh_known_hosts); useradd and sysctl are in every base.
  cron openssh-client
  # Salt's gpg renderer (#!yaml|gpg pillar and state files) runs gpg; its
  # tests make a key pair with it.
  gnupg
  # git.config_* (git; its http-backend also serves the gitfs tests' private
  # remote over HTTP), archive.extracted (tar with gzip, bzip2, xz; unzip,
  # and zip to build the tests' archives).
  git tar gzip bzip2 xz-utils unzip zip
  # service.* on a host without systemd: service, update-rc.d, invoke-rc.d.
  init-system-helpers
  # The PostgreSQL store: libpq's headers to build, the server for its tests
  # (which start throwaway clusters of their own with initdb).
  postgresql libpq-dev
  # The master cluster's tests put a real load balancer in front of the
  # masters (TCP mode, as a site would).
  haproxy
  # The master's gitfs file server backend (salt:// from git remotes at a
  # revision pinned in the store): libgit2 reads the bare clones in process;
  # its headers to build, libgit2.so.1.5 (libgit2-1.5) loaded at run time.
  libgit2-dev
  # The master's Prometheus endpoint (metrics_port; later its HTTP API):
  # GNU libmicrohttpd, its header to build, libmicrohttpd.so.12
  # (libmicrohttpd12) loaded at run time.
  libmicrohttpd-dev
  # The http_json and http_yaml ext_pillar (HTTP(S) GETs from the master):
  # libcurl's headers to build, libcurl.so.4 (libcurl4) loaded at run time.
  libcurl4-openssl-dev
  # The store that survives its primary (tests/integration/pgfailover.py):
  # pg_auto_failover's monitor extension for this PostgreSQL and pg_autoctl,
  # which keep a synchronous standby and promote it when the primary dies.
  postgresql-15-auto-failover pg-auto-failover-cli
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
