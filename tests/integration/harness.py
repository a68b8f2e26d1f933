#!/usr/bin/env python3
"""Helpers for brine's integration tests.

The tests drive the real `brine` binary as a user would: they start `brine
master` and `brine minion` processes on 127.0.0.1 with temporary directories
and free ports, and talk to them only through the CLI, the processes' log
output and the master's TCP port.

Everything here is bounded in time: every wait has a deadline and fails with a
message naming what it waited for.
"""

import calendar
import collections
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import time

from ports import free_port  # noqa: F401 (the suites import it from here)
import unittest

BRINE_BIN = os.environ.get("BRINE_BIN", "/work/main/build/debug/src/app/brine")

# Poll interval of wait_for(); short, so waits end soon after their condition.
POLL = 0.05
# Every deadline of wait_for() and wait_log() is multiplied by this. A deadline
# bounds a hang; it measures nothing, and a test that needs the machine to be
# fast is wrong. Under ASan on a loaded 2-core machine things take several
# times as long as on an idle one, so the bounds are generous by default.
SLACK = float(os.environ.get("BRINE_TEST_SLACK", "3"))
# Bound on a daemon's exit after SIGTERM.
STOP_TIMEOUT = 10 * SLACK
# Default bound on one CLI call (each call's bound is multiplied by SLACK).
CLI_TIMEOUT = 30

FINGERPRINT_RE = r"[0-9a-f]{2}(?::[0-9a-f]{2}){31}"




def wait_for(predicate, timeout, what):
    """Polls predicate() every POLL seconds until it returns a true value, which
    is returned. Fails with a message naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(POLL)


def yaml_value(v):
    """A config value as YAML text (enough for the options brine has)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "''"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dict):
        return json.dumps(v)  # a flow mapping (nested values as they are)
    if isinstance(v, (list, tuple)):
        return json.dumps([x if isinstance(x, (int, bool, dict, list)) else str(x) for x in v])
    return json.dumps(str(v))  # JSON is YAML: a double-quoted scalar, a flow sequence


def write_config(path, options):
    with open(path, "w") as f:
        for k, v in options.items():
            f.write("%s: %s\n" % (k, yaml_value(v)))


# ---------------------------------------------------------------------------
# Processes


class Daemon:
    """A `brine master` or `brine minion` process whose stdout and stderr go to
    a log file."""

    def __init__(self, name, args, log_path, cwd):
        self.name = name
        self.args = args
        self.log_path = log_path
        self.cwd = cwd
        self.proc = None
        # When a test kills a daemon on purpose its exit status is not checked.
        self.expect_clean_exit = True
        self.returncode = None

    def start(self):
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [BRINE_BIN] + self.args, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.cwd)
        finally:
            log.close()
        self.returncode = None
        self.expect_clean_exit = True
        return self

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def mark(self):
        """The current end of the log; pass it as `since` to look only at what
        is logged afterwards."""
        try:
            return os.path.getsize(self.log_path)
        except FileNotFoundError:
            return 0

    def log_since(self, since=0):
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode("utf-8", "replace")

    def count(self, regex, since=0):
        return len(re.findall(regex, self.log_since(since)))

    def wait_exit(self, timeout):
        """Waits for the process to end; returns its exit status or None."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def terminate(self, timeout=STOP_TIMEOUT):
        """SIGTERM, then wait. Returns the exit status; kills it (and returns
        None) if it does not exit within `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait_exit(timeout)
        if rc is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        return rc

    def kill(self):
        """SIGKILL on purpose: the exit status is not checked afterwards."""
        self.expect_clean_exit = False
        if self.proc.poll() is None:
            self.proc.kill()
        self.returncode = self.proc.wait(timeout=10)
        return self.returncode

    def __repr__(self):
        return "<%s pid %s>" % (self.name, self.proc.pid if self.proc else None)


def wait_log(daemon, regex, timeout=10, since=0):
    """Waits until `daemon`'s log (from offset `since`) matches `regex`; returns
    the match. Fails at once if the daemon exits without logging it, and
    after `timeout` seconds (times SLACK)."""
    pattern = re.compile(regex)
    timeout *= SLACK
    deadline = time.monotonic() + timeout
    while True:
        # Checked before reading, so a line written just before exit counts.
        running = daemon.alive()
        m = pattern.search(daemon.log_since(since))
        if m:
            return m
        if not running:
            raise AssertionError("%s exited (status %s) while waiting for /%s/ in its log:\n%s"
                                 % (daemon.name, daemon.proc.poll(), regex,
                                    tail(daemon.log_since(since))))
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for /%s/ in the log of %s; "
                                 "log:\n%s" % (timeout, regex, daemon.name,
                                               tail(daemon.log_since(since))))
        time.sleep(POLL)


def jid_time(jid):
    """A jid's moment as unix seconds: a jid is the publishing master's clock
    (YYYYmmddHHMMSS and microseconds, UTC), so jids are records of when jobs
    were published."""
    return calendar.timegm(time.strptime(jid[:14], "%Y%m%d%H%M%S")) + int(jid[14:]) / 1e6


class MasterCli:
    """What tests read through a master's CLI; the class provides brine()."""

    def job(self, jid):
        rc, out, err = self.brine("job", "show", jid, "--out", "json")
        assert rc == 0, "brine job show %s: rc %d, stderr %s" % (jid, rc, err)
        return json.loads(out)

    def jobs(self, function=None, limit=100000):
        """`brine job list --out json`: every job's minions, who returned, who
        was not reached (with the reason) and who is running, newest first, in
        one call."""
        args = ["job", "list", "--out", "json", "--limit", str(limit)]
        if function:
            args += ["--function", function]
        rc, out, err = self.brine(*args)
        assert rc == 0, "brine job list --out json: rc %d, stderr %s" % (rc, err)
        return json.loads(out)

    def keys(self):
        rc, out, err = self.brine("key", "list", "--json")
        assert rc == 0, "brine key list --json: rc %d, stderr %s" % (rc, err)
        return json.loads(out)


def scrape(port):
    """The Prometheus text a daemon's metrics endpoint on `port` serves."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10 * SLACK)
    try:
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        assert r.status == 200, r.status
        return r.read().decode("utf-8")
    finally:
        conn.close()


def figure(text, name, labels=""):
    """The value of one sample of the Prometheus text (0 when absent)."""
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else 0.0


def tail(text, lines=30):
    return "\n".join(text.splitlines()[-lines:])


def process_tree(pid):
    """`pid` and every process descended from it, read from each process's
    parent in /proc/*/stat (a process that exits meanwhile is left out)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # The command may hold spaces and parentheses: the fields after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += parents.get(p, [])
    return tree


# A socket a process holds: protocol "tcp", "tcp6", "udp" or "udp6"; its local
# address (text) and port; listening: a TCP socket in LISTEN or a UDP socket
# bound and not connected, what a server binds to be reached.
Socket = collections.namedtuple("Socket", "protocol address port listening")

_TCP_LISTEN = "0A"
_UDP_UNCONNECTED = "07"


def _proc_net_address(hex_address):
    """/proc/net/*'s "0100007F:1F90" (the address as 32-bit words in the
    host's byte order) as ("127.0.0.1", 8080)."""
    host, port = hex_address.split(":")
    raw = b"".join(struct.pack("=I", int(host[i:i + 8], 16)) for i in range(0, len(host), 8))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw), int(port, 16)


def sockets_of(pid):
    """The TCP and UDP sockets (IPv4 and IPv6) process `pid` holds: its
    descriptors' socket inodes (/proc/PID/fd) looked up in its network
    namespace's tables (/proc/PID/net/tcp, tcp6, udp, udp6). A list of
    Socket; empty for a process that is gone."""
    inodes = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except (FileNotFoundError, ProcessLookupError):
        return []
    for fd in fds:
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for protocol in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, protocol)) as f:
                lines = f.readlines()[1:]
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in lines:
            fields = line.split()
            if fields[9] not in inodes:
                continue
            address, port = _proc_net_address(fields[1])
            listening = fields[3] == (_TCP_LISTEN if protocol.startswith("tcp")
                                      else _UDP_UNCONNECTED)
            out.append(Socket(protocol, address, port, listening))
    return out


def abort_daemons(daemons, directory):
    """Kills every daemon and removes `directory`, checking nothing."""
    for d in daemons:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(timeout=10)
    shutil.rmtree(directory, ignore_errors=True)


def stop_daemons(order, directory):
    """SIGTERM to every daemon of `order`, bounded waits, then checks that
    every daemon not killed on purpose exited with status 0. Removes
    `directory` (kept when BRINE_KEEP_FAILED is set and something failed).
    Raises AssertionError listing any unclean exit."""
    problems = []
    for d in order:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for d in order:
        if d.proc is None:
            continue
        rc = d.wait_exit(max(0.1, deadline - time.monotonic()))
        if rc is None:
            d.proc.kill()
            d.proc.wait(timeout=10)
            problems.append("%s did not exit within %d s of SIGTERM" % (d.name, STOP_TIMEOUT))
        elif d.expect_clean_exit and rc != 0:
            problems.append("%s exited with status %d; log:\n%s" % (d.name, rc, tail(d.log())))
    if problems and os.environ.get("BRINE_KEEP_FAILED"):
        problems.append("kept " + directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)
    if problems:
        raise AssertionError("\n".join(problems))


# ---------------------------------------------------------------------------
# Cluster


class Cluster(MasterCli):
    """A master (and its minions) in a temporary directory.

    Layout: DIR/master.conf with pki_dir, cachedir and sock_dir relative to
    DIR (master-pki, master-cache, sock); DIR/minions/ID/minion.conf with pki
    and cache beside it."""

    def __init__(self, master_opts=None, start=True, wait_ready=True):
        if not os.access(BRINE_BIN, os.X_OK):
            raise AssertionError("no brine binary at %s (build it, or set BRINE_BIN)" % BRINE_BIN)
        self.dir = tempfile.mkdtemp(prefix="brine-it-")
        self.port = free_port()
        self.config = os.path.join(self.dir, "master.conf")
        self.master_options = {
            "interface": "127.0.0.1",
            "port": self.port,
            "pki_dir": "master-pki",
            "cachedir": "master-cache",
            "sock_dir": "sock",
        }
        self.master_options.update(master_opts or {})
        write_config(self.config, self.master_options)
        self.master = Daemon("master", ["master", "-c", self.config],
                             os.path.join(self.dir, "master.log"), self.dir)
        self.minions = {}
        self.stopped = False
        if start:
            try:
                self.start_master(wait_ready)
            except BaseException:
                self.abort()
                raise

    # -- paths

    @property
    def pki_dir(self):
        return os.path.join(self.dir, "master-pki")

    @property
    def sock_path(self):
        return os.path.join(self.dir, "sock", "master.sock")

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def configure(self, **opts):
        """Adds master options and writes the config again (read at the
        master's next start)."""
        self.master_options.update(opts)
        write_config(self.config, self.master_options)

    # -- master

    def start_master(self, wait_ready=True):
        since = self.master.mark()
        self.master.start()
        if wait_ready:
            wait_log(self.master, r"master listening on 127\.0\.0\.1:%d" % self.port, 15,
                     since=since)
            wait_for(lambda: os.path.exists(self.sock_path), 5, "the master's local API socket")
        return self.master

    def restart_master(self):
        rc = self.master.terminate()
        assert rc == 0, "master exited with %r on SIGTERM; log:\n%s" % (rc, tail(self.master.log()))
        return self.start_master()

    def master_fingerprint(self):
        m = re.search(r"master listening on \S+ \(fingerprint (%s)\)" % FINGERPRINT_RE,
                      self.master.log())
        assert m, "no fingerprint in the master log:\n" + tail(self.master.log())
        return m.group(1)

    # -- minions

    def minion_dir(self, mid):
        return os.path.join(self.dir, "minions", mid)

    def add_minion(self, mid, start=True, **opts):
        d = self.minion_dir(mid)
        os.makedirs(d, exist_ok=True)
        options = {
            "id": mid,
            "master": "127.0.0.1",
            "master_port": self.port,
            "pki_dir": "pki",
            "cachedir": "cache",
            "acceptance_wait_time": 1,
            "acceptance_wait_time_max": 2,
        }
        options.update(opts)
        conf = os.path.join(d, "minion.conf")
        write_config(conf, options)
        m = Daemon("minion " + mid, ["minion", "-c", conf], os.path.join(d, "minion.log"), d)
        self.minions[mid] = m
        if start:
            m.start()
        return m

    def minion_fingerprint(self, mid):
        m = re.search(r"minion %s starting \(fingerprint (%s)\)" % (re.escape(mid), FINGERPRINT_RE),
                      self.minions[mid].log())
        assert m, "no fingerprint in the log of minion %s" % mid
        return m.group(1)

    def wait_connected(self, mid, timeout=15, since=0):
        """Waits until the master logs minion `mid` as connected (accepted)."""
        return wait_log(self.master, r"minion %s connected from" % re.escape(mid), timeout, since)

    def wait_pending(self, mid, timeout=15):
        return wait_for(lambda: mid in self.keys()["pending"], timeout,
                        "minion %s to be pending in 'brine key list'" % mid)

    def add_accepted_minion(self, mid, **opts):
        """Starts a minion, accepts its key and waits until it answers."""
        return self.add_accepted_minions({mid: opts})[mid]

    def add_accepted_minions(self, minions):
        """add_accepted_minion() for each of `minions` ({id: options}, or ids),
        side by side: every minion starts, then each key is accepted once the
        master logs it pending (it logs that after storing the key), then
        every connection is waited for."""
        if not isinstance(minions, dict):
            minions = {mid: {} for mid in minions}
        since = self.master.mark()
        started = {mid: self.add_minion(mid, **opts) for mid, opts in minions.items()}
        for mid in minions:
            wait_log(self.master, r"minion %s at \S+ is pending" % re.escape(mid), 15, since)
            rc, out, err = self.brine("key", "accept", mid)
            assert rc == 0, "key accept %s: %d %s %s" % (mid, rc, out, err)
        for mid in minions:
            self.wait_connected(mid, since=since)
        return started

    # -- CLI

    def brine(self, *args, timeout=CLI_TIMEOUT, config=True):
        """Runs `brine SUB -c MASTER_CONFIG REST...`; returns (rc, stdout, stderr)."""
        argv = [BRINE_BIN, args[0]]
        if config:
            argv += ["-c", self.config]
        argv += list(args[1:])
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=timeout * SLACK, cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise AssertionError("'brine %s' did not finish within %s s"
                                 % (" ".join(args), timeout * SLACK))
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def ping(self, target, *extra, timeout=CLI_TIMEOUT):
        return self.brine("cmd", "-t", "10", *extra, target, "test.ping", timeout=timeout)

    # -- teardown

    def abort(self):
        """Kills every process and removes the directory, checking nothing."""
        self.stopped = True
        abort_daemons([self.master] + list(self.minions.values()), self.dir)

    def stop(self):
        """SIGTERM to every process, bounded waits, then checks that every
        daemon not killed on purpose exited with status 0. Removes the
        directory. Raises AssertionError listing any unclean exit."""
        if self.stopped:
            return
        self.stopped = True
        # Minions first, so that they do not log a lost master on the way out.
        stop_daemons(list(self.minions.values()) + [self.master], self.dir)


class ClusterTestCase(unittest.TestCase):
    """Gives each test `self.cluster()`, stopped (and checked) at cleanup."""

    def cluster(self, **kw):
        c = Cluster(**kw)
        self.addCleanup(c.stop)
        return c


class ClusterCase(unittest.TestCase):
    """One master and its accepted minions shared by every test of a class:
    made in setUpClass (which kills everything and fails if any step does),
    stopped and checked in tearDownClass. Tests reach it as `self.c`.

    MINIONS: the minions' ids, or {id: minion options}. master_opts: the
    master's options. before_start() runs once the cluster's directory and
    config exist and before the master starts (write a tree there, or add
    options with self.c.configure()); after_start() once every minion is
    accepted and connected."""

    MINIONS = ()
    master_opts = {}

    @classmethod
    def before_start(cls):
        pass

    @classmethod
    def after_start(cls):
        pass

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(master_opts=dict(cls.master_opts), start=False)
        try:
            cls.before_start()
            cls.c.start_master()
            cls.c.add_accepted_minions(cls.MINIONS)
            cls.after_start()
        except BaseException:
            cls.c.abort()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()


# ---------------------------------------------------------------------------
# Several masters


def make_master_keypair(directory):
    """An Ed25519 master keypair (master.pem 0600, master.pub) made with the
    openssl CLI, for masters that share one identity."""
    os.makedirs(directory, exist_ok=True)
    pem = os.path.join(directory, "master.pem")
    pub = os.path.join(directory, "master.pub")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", pem],
                   check=True, capture_output=True, timeout=30)
    os.chmod(pem, 0o600)
    subprocess.run(["openssl", "pkey", "-in", pem, "-pubout", "-out", pub],
                   check=True, capture_output=True, timeout=30)
    return pem, pub


class MasterNode(MasterCli):
    """One master of a MasterSet: its own directory, port, config and CLI."""

    def __init__(self, root, name, options):
        self.name = name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.port = options.get("port") or free_port()
        self.config = os.path.join(self.dir, "master.conf")
        self.options = {
            "interface": "127.0.0.1",
            "port": self.port,
            "pki_dir": "pki",
            "cachedir": "cache",
            "sock_dir": "sock",
        }
        self.options.update(options)
        write_config(self.config, self.options)
        self.daemon = Daemon(name, ["master", "-c", self.config],
                             os.path.join(self.dir, "master.log"), self.dir)

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    @property
    def sock_path(self):
        return os.path.join(self.dir, "sock", "master.sock")

    def start(self, wait_ready=True):
        since = self.daemon.mark()
        self.daemon.start()
        if wait_ready:
            wait_log(self.daemon, r"master listening on 127\.0\.0\.1:%d" % self.port, 15,
                     since=since)
            wait_for(lambda: os.path.exists(self.sock_path), 5,
                     "the local API socket of " + self.name)
        return self

    def kill(self):
        return self.daemon.kill()

    def brine(self, *args, timeout=CLI_TIMEOUT):
        argv = [BRINE_BIN, args[0], "-c", self.config] + list(args[1:])
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=timeout * SLACK, cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise AssertionError("'brine %s' on %s did not finish within %s s"
                                 % (" ".join(args), self.name, timeout * SLACK))
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def ping_json(self, target="*", timeout=10):
        """`brine cmd --out json TARGET test.ping`: (rc, {minion: return}, stderr)."""
        rc, out, err = self.brine("cmd", "-t", str(timeout), "--out", "json", target, "test.ping",
                                  timeout=timeout + 30)
        return rc, (json.loads(out) if out.strip() else {}), err

    def connected(self, mid, since=0):
        """How often this master logged `mid` as connected since `since`."""
        return self.daemon.count(r"minion %s connected from" % re.escape(mid), since)


class MasterSet:
    """N masters on 127.0.0.1 sharing one master keypair (copied into each
    pki_dir before the first start, as the README tells users), and minions
    that list them.

    Layout: DIR/master-N/ per master; DIR/minions/ID/ per minion."""

    def __init__(self, n, master_opts=None, shared_key=True, start=True):
        if not os.access(BRINE_BIN, os.X_OK):
            raise AssertionError("no brine binary at %s (build it, or set BRINE_BIN)" % BRINE_BIN)
        self.dir = tempfile.mkdtemp(prefix="brine-ha-")
        self.minions = {}
        self.stopped = False
        opts = {"auto_accept": True}
        opts.update(master_opts or {})
        self.masters = [MasterNode(self.dir, "master-%d" % i, dict(opts)) for i in range(n)]
        try:
            if shared_key:
                pem, pub = make_master_keypair(os.path.join(self.dir, "shared-key"))
                for m in self.masters:
                    pki = os.path.join(m.dir, "pki")
                    os.makedirs(pki, mode=0o700)
                    shutil.copy2(pem, os.path.join(pki, "master.pem"))
                    shutil.copy2(pub, os.path.join(pki, "master.pub"))
            if start:
                for m in self.masters:
                    m.start()
        except BaseException:
            self.abort()
            raise

    def minion_dir(self, mid):
        return os.path.join(self.dir, "minions", mid)

    def add_minion(self, mid, masters=None, start=True, **opts):
        """A minion listing `masters` (addresses; default every master)."""
        d = self.minion_dir(mid)
        os.makedirs(d, exist_ok=True)
        options = {
            "id": mid,
            "master": masters if masters is not None else [m.address for m in self.masters],
            "pki_dir": "pki",
            "cachedir": "cache",
            "acceptance_wait_time": 1,
            "acceptance_wait_time_max": 2,
        }
        options.update(opts)
        if options.get("use_srv_records"):
            del options["master"]  # the masters come from DNS
        conf = os.path.join(d, "minion.conf")
        write_config(conf, options)
        m = Daemon("minion " + mid, ["minion", "-c", conf], os.path.join(d, "minion.log"), d)
        m.config = conf
        self.minions[mid] = m
        if start:
            m.start()
        return m

    def wait_served(self, mid, master, timeout=15, since=0):
        """Waits until `master` (a MasterNode) logs minion `mid` as connected."""
        return wait_log(master.daemon, r"minion %s connected from" % re.escape(mid), timeout,
                        since)

    def abort(self):
        self.stopped = True
        abort_daemons([m.daemon for m in self.masters] + list(self.minions.values()), self.dir)

    def stop(self):
        """SIGTERM to every process (minions first), bounded waits; raises
        listing any daemon not killed on purpose that exited uncleanly."""
        if self.stopped:
            return
        self.stopped = True
        stop_daemons(list(self.minions.values()) + [m.daemon for m in self.masters], self.dir)


# ---------------------------------------------------------------------------
# MessagePack (the subset brine's frames use)


def mp_encode(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 0x80:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack("b", v)
        if 0 <= v <= 0xFF:
            return b"\xcc" + struct.pack(">B", v)
        if 0 <= v <= 0xFFFF:
            return b"\xcd" + struct.pack(">H", v)
        if 0 <= v <= 0xFFFFFFFF:
            return b"\xce" + struct.pack(">I", v)
        if v >= 0:
            return b"\xcf" + struct.pack(">Q", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        n = len(b)
        if n < 32:
            return bytes([0xA0 | n]) + b
        if n <= 0xFF:
            return b"\xd9" + struct.pack(">B", n) + b
        if n <= 0xFFFF:
            return b"\xda" + struct.pack(">H", n) + b
        return b"\xdb" + struct.pack(">I", n) + b
    if isinstance(v, (list, tuple)):
        n = len(v)
        head = bytes([0x90 | n]) if n < 16 else (
            b"\xdc" + struct.pack(">H", n) if n <= 0xFFFF else b"\xdd" + struct.pack(">I", n))
        return head + b"".join(mp_encode(x) for x in v)
    if isinstance(v, dict):
        n = len(v)
        head = bytes([0x80 | n]) if n < 16 else (
            b"\xde" + struct.pack(">H", n) if n <= 0xFFFF else b"\xdf" + struct.pack(">I", n))
        return head + b"".join(mp_encode(k) + mp_encode(x) for k, x in v.items())
    raise TypeError("cannot encode %r" % (v,))


def mp_decode(data):
    """Decodes one MessagePack value; returns (value, bytes used)."""

    def take(pos, n):
        if pos + n > len(data):
            raise ValueError("truncated MessagePack")
        return data[pos:pos + n], pos + n

    def value(pos):
        b, pos = take(pos, 1)
        t = b[0]
        if t < 0x80:
            return t, pos
        if t >= 0xE0:
            return t - 0x100, pos
        if 0x80 <= t <= 0x8F:
            return mapping(pos, t & 0x0F)
        if 0x90 <= t <= 0x9F:
            return array(pos, t & 0x0F)
        if 0xA0 <= t <= 0xBF:
            s, pos = take(pos, t & 0x1F)
            return s.decode("utf-8"), pos
        if t == 0xC0:
            return None, pos
        if t == 0xC2:
            return False, pos
        if t == 0xC3:
            return True, pos
        fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
                 0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
        if t in fixed:
            fmt = fixed[t]
            raw, pos = take(pos, struct.calcsize(fmt))
            return struct.unpack(fmt, raw)[0], pos
        lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
        if t in lengths:
            fmt = lengths[t]
            raw, pos = take(pos, struct.calcsize(fmt))
            s, pos = take(pos, struct.unpack(fmt, raw)[0])
            return (s.decode("utf-8") if t >= 0xD9 else bytes(s)), pos
        if t in (0xDC, 0xDD, 0xDE, 0xDF):
            fmt = ">H" if t in (0xDC, 0xDE) else ">I"
            raw, pos = take(pos, struct.calcsize(fmt))
            n = struct.unpack(fmt, raw)[0]
            return (array if t in (0xDC, 0xDD) else mapping)(pos, n)
        raise ValueError("unsupported MessagePack type byte 0x%02x" % t)

    def array(pos, n):
        out = []
        for _ in range(n):
            v, pos = value(pos)
            out.append(v)
        return out, pos

    def mapping(pos, n):
        out = {}
        for _ in range(n):
            k, pos = value(pos)
            v, pos = value(pos)
            out[k] = v
        return out, pos

    return value(0)


def frame(msg_type, request_id=0, body=None):
    """One wire frame: 4-byte big-endian length + MessagePack {"t","id","b"}."""
    payload = mp_encode({"t": msg_type, "id": request_id, "b": body or {}})
    return struct.pack(">I", len(payload)) + payload


def read_frames(data):
    """Splits bytes into decoded frames; ignores an incomplete tail."""
    out = []
    pos = 0
    while pos + 4 <= len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        if pos + 4 + n > len(data):
            break
        v, _ = mp_decode(data[pos + 4:pos + 4 + n])
        out.append(v)
        pos += 4 + n
    return out


# ---------------------------------------------------------------------------
# Raw clients of the master's port


def make_client_cert(directory):
    """A self-signed Ed25519 certificate made with the openssl CLI; returns
    (cert path, key path)."""
    key = os.path.join(directory, "intruder-key.pem")
    cert = os.path.join(directory, "intruder-cert.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key],
                   check=True, capture_output=True, timeout=30)
    subprocess.run(["openssl", "req", "-x509", "-new", "-key", key, "-subj", "/CN=x", "-days",
                    "2", "-out", cert], check=True, capture_output=True, timeout=30)
    return cert, key


def tls_context(cert=None, key=None, max_version=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if max_version is not None:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.maximum_version = max_version
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def peer_name(sock):
    """How the master names this client in its log: 127.0.0.1:PORT."""
    host, port = sock.getsockname()[:2]
    return "%s:%d" % (host, port)


def read_until_closed(sock, timeout):
    """Reads until the peer closes; returns (bytes, closed). `closed` is False
    if the deadline passed with the connection still open."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, False
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return data, False
        except ssl.SSLZeroReturnError:
            return data, True
        except (ssl.SSLError, ConnectionError, OSError):
            return data, True
        if not chunk:
            return data, True
        data += chunk
