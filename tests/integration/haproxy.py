#!/usr/bin/env python3
"""A real HAProxy in TCP mode in front of brine masters, for the cluster
tests (standard library only).

    lb = LoadBalancer([m.port for m in masters], idle_timeout=5)
    lb.start()                     # haproxy -db -f DIR/haproxy.cfg
    minion "master: 127.0.0.1:%d" % lb.port
    lb.set_servers([...]); lb.reload()   # add or remove a master
    lb.stop()

Round robin over the masters' minion ports; `timeout client` and `timeout
server` are the idle timeout (what a cloud load balancer cuts idle
connections at); health checks every second take a dead master out and
`option redispatch` sends a new connection elsewhere. Every wait is bounded.
"""

import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import free_port, wait_for


def haproxy_bin():
    for d in ("/usr/sbin", "/usr/local/sbin"):
        p = os.path.join(d, "haproxy")
        if os.access(p, os.X_OK):
            return p
    return shutil.which("haproxy")


def require_haproxy():
    """SkipTest when HAProxy is not installed; AssertionError when CI
    (BRINE_REQUIRE_POSTGRES=1, set by scripts/test.sh, which installs both)
    says it must be."""
    if haproxy_bin():
        return
    why = "HAProxy is not installed (apt-get install haproxy; scripts/deps.sh does)"
    if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
        raise AssertionError(why)
    raise unittest.SkipTest(why)


CONFIG = """global
    maxconn {maxconn}
defaults
    mode tcp
    timeout connect 2s
    timeout client {idle}s
    timeout server {idle}s
    retries 3
    option redispatch
frontend brine_minions
    bind 127.0.0.1:{port}
    default_backend brine_masters
backend brine_masters
    balance roundrobin
{servers}
"""


class LoadBalancer:
    def __init__(self, ports, idle_timeout=60):
        self.dir = tempfile.mkdtemp(prefix="brine-lb-")
        self.port = free_port()
        self.idle = idle_timeout
        self.ports = list(ports)
        self.proc = None
        self.old = []  # processes a reload left serving their connections
        self.config = os.path.join(self.dir, "haproxy.cfg")
        self.log_path = os.path.join(self.dir, "haproxy.log")
        self.write()

    def write(self):
        servers = "\n".join("    server m%d 127.0.0.1:%d check inter 1s fall 2 rise 1" % (i, p)
                            for i, p in enumerate(self.ports))
        with open(self.config, "w") as f:
            # Two descriptors a connection, within what this process may open.
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            limit = hard if hard != resource.RLIM_INFINITY else 1 << 20
            maxconn = max(256, min(20000, (limit - 100) // 2))
            f.write(CONFIG.format(idle=self.idle, port=self.port, servers=servers,
                                  maxconn=maxconn))

    def start(self):
        subprocess.run([haproxy_bin(), "-c", "-f", self.config], check=True,
                       capture_output=True, timeout=30)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen([haproxy_bin(), "-db", "-f", self.config],
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        finally:
            log.close()

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError("haproxy exited: " + self.log())
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0
        wait_for(listening, 15, "haproxy to listen on 127.0.0.1:%d" % self.port)
        return self

    def set_servers(self, ports):
        """A new server list, taken up by reload()."""
        self.ports = list(ports)
        self.write()

    def reload(self):
        """HAProxy's soft reload: a new process takes the listening port with
        the new server list (-sf); the old one keeps the connections it has
        until they end, so no minion is cut."""
        old = self.proc
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen([haproxy_bin(), "-db", "-f", self.config, "-sf",
                                          str(old.pid)], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        finally:
            log.close()
        self.old.append(old)
        # The new server list serves new connections only once the old
        # process has let go of the listening port (-sf: the new one signals
        # it after binding); until then a connect may reach the old list.
        wait_for(lambda: not self._listens(old.pid), 15,
                 "the old haproxy (pid %d) to stop listening on 127.0.0.1:%d after the reload"
                 % (old.pid, self.port))

    def _listens(self, pid):
        """Whether process `pid` holds a socket listening on self.port."""
        try:
            inodes = set()
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            return False  # gone
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    next(f)
                    for line in f:
                        cols = line.split()
                        # local address ends in :PORT (hex); state 0A is LISTEN
                        if (cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == self.port
                                and cols[9] in inodes):
                            return True
            except OSError:
                continue
        return False

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self, remove=True):
        for p in self.old + [self.proc]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        self.proc = None
        self.old = []
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)
