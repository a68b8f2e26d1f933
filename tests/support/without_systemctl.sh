#!/bin/sh
# without_systemctl.sh COMMAND [ARG...]: runs COMMAND as on a Debian host
# where systemd is not installed (a plain container, or sysvinit): in a
# private mount namespace, /usr/bin/systemctl is an empty file that is not
# executable (so Salt's and brine's "offline" test, systemctl in PATH, is
# false and update-rc.d makes its links itself), and `runlevel` (a link to
# systemctl) is replaced by a copy of it in /usr/local/sbin, first in PATH.
# Nothing changes outside the namespace. Needs root and unshare(1).
set -eu
dir=$(mktemp -d /tmp/brine-without-systemctl.XXXXXX)
trap 'rm -rf "$dir"' EXIT
unshare --mount --propagation private /bin/sh -eu -c '
  dir=$1; shift
  if [ -x /usr/bin/systemctl ]; then
    cp /usr/bin/systemctl "$dir/runlevel"
    : >"$dir/systemctl"
    mount --bind "$dir/systemctl" /usr/bin/systemctl
  fi
  mount --bind "$dir" /usr/local/sbin
  PATH=/usr/local/sbin:$PATH
  export PATH
  exec "$@"' without_systemctl "$dir" "$@"
