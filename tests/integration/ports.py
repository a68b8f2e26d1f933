"""Ports for the daemons the tests start, chosen below the kernel's
ephemeral range.

A port bound to 0 comes from the ephemeral range, the same range every
outgoing connection draws its local port from; with a thousand swarm
minions and HAProxy's backend connections open beside a test, such a port
was taken by a connection between the moment it was found free and the
moment the daemon bound it (or restarted on it): "Address already in use".
Ports below the range are only ever taken by a listener that asks for one.
Each is picked at random (two suites run side by side) and checked free."""

import random
import socket


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


LOW = 10000
HIGH = max(LOW + 1000, _ephemeral_low())  # exclusive


def _free(port, udp):
    kinds = [socket.SOCK_STREAM] + ([socket.SOCK_DGRAM] if udp else [])
    for kind in kinds:
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port(udp=False):
    """A port on 127.0.0.1 free a moment ago (for TCP, and for UDP too when
    `udp`), outside the ephemeral range."""
    for _ in range(200):
        port = random.randrange(LOW, HIGH)
        if _free(port, udp):
            return port
    raise AssertionError("no free port on 127.0.0.1 in %d..%d" % (LOW, HIGH - 1))
