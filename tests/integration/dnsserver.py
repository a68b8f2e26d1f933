#!/usr/bin/env python3
"""A real DNS server for tests: dnsmasq (Debian's dnsmasq-base) on
127.0.0.1 and a free port, serving the SRV and A records a test gives it, and
restarted on the same port when the test changes them. Standard library only;
every wait is bounded."""

import os
import random
import shutil
import socket
import struct
import subprocess
import time

from ports import free_port

DNSMASQ = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"


def srv_query(port, name, timeout=0.5):
    """Sends one SRV query for `name` to 127.0.0.1:`port`; returns the RCODE
    and the answer count, or None without an answer in time."""
    qid = random.randrange(65536)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 33, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(packet, ("127.0.0.1", port))
        try:
            reply, _ = s.recvfrom(4096)
        except (socket.timeout, ConnectionRefusedError):
            return None
    rid, flags, _, ancount = struct.unpack(">HHHH", reply[:8])
    if rid != qid:
        return None
    return flags & 0xF, ancount


class Dnsmasq:
    """dnsmasq answering for `domains` (and refusing nothing else upstream:
    it has none). Records: srv (name, target, port, priority, weight) tuples,
    target None for RFC 2782's "not available" record; hosts (name, ip)."""

    def __init__(self, workdir, domains, srv=(), hosts=(), ttl=5):
        self.workdir = workdir
        self.domains = list(domains)
        self.ttl = ttl
        self.port = free_port(udp=True)
        self.proc = None
        self.log_path = os.path.join(workdir, "dnsmasq.log")
        self.start(srv, hosts)

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def start(self, srv, hosts, ttl=None):
        if ttl is not None:
            self.ttl = ttl
        args = ["timeout", "-k", "5", "900", DNSMASQ, "--keep-in-foreground",
                "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces",
                "--listen-address=127.0.0.1", "--port=%d" % self.port, "--pid-file=",
                "--log-facility=-", "--log-queries", "--local-ttl=%d" % self.ttl]
        args += ["--local=/%s/" % d for d in self.domains]
        for name, target, port, priority, weight in srv:
            if target is None:
                args.append("--srv-host=%s" % name)
            else:
                args.append("--srv-host=%s,%s,%d,%d,%d" % (name, target, port, priority, weight))
        args += ["--host-record=%s,%s" % (name, ip) for name, ip in hosts]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        finally:
            log.close()
        probe = "_probe._tcp." + self.domains[0]
        deadline = time.monotonic() + 10
        while srv_query(self.port, probe) is None:
            if self.proc.poll() is not None:
                raise AssertionError("dnsmasq exited with %s:\n%s" % (self.proc.returncode,
                                                                      self.log()))
            if time.monotonic() >= deadline:
                raise AssertionError("dnsmasq did not answer within 10 s:\n" + self.log())
            time.sleep(0.05)

    def restart(self, srv, hosts, ttl=None):
        """New records on the same port (dnsmasq reads --srv-host only at start)."""
        self.stop()
        self.start(srv, hosts, ttl)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-3000:]
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
