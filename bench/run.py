#!/usr/bin/env python3
"""brine's benchmark suite: a real master on loopback with the embedded store,
simulated minions from `brine swarm` and real `brine minion` processes; for high
availability, pairs of masters sharing one keypair, one of them killed (-9)
under its minions, and a master holding publishes for minions that are away.

Every figure is printed with its number of runs and min/median/max, and the
whole table is written as JSON to bench/results/<date>-<host>.json. A minion
missing from any result fails the run loudly: a benchmark that hides drops
measures nothing.
"""
import argparse
import json
import resource
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = os.path.join(tempfile.gettempdir(), "brine-bench-keys")


class BenchError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise BenchError(f"timed out after {timeout} s waiting for {what}")


def proc_rss_kib(pid, field="VmRSS"):
    """VmRSS (now) or VmHWM (the peak since the process started), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def proc_rollup_kib(pid, field):
    """A field of /proc/PID/smaps_rollup (Pss, Private_Dirty, ...), in KiB."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_percent(pid, seconds):
    c0, t0 = proc_cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = proc_cpu_seconds(pid), time.monotonic()
    return 100.0 * (c1 - c0) / (t1 - t0)


def stop_process(proc):
    """SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_master_keypair(workdir):
    """master.pem and master.pub in a new directory: the keypair that masters
    sharing minions must all have."""
    d = tempfile.mkdtemp(prefix="master-keys-", dir=workdir)
    pem, pub = os.path.join(d, "master.pem"), os.path.join(d, "master.pub")
    for args in (["genpkey", "-algorithm", "ed25519", "-out", pem],
                 ["pkey", "-in", pem, "-pubout", "-out", pub]):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f"openssl {args[0]}: {r.stderr.strip()[:300]}")
    return d


class Master:
    """A master on its own port and directory. `keys`: a directory with
    master.pem and master.pub, installed before the first start so that
    several masters present one key. kill() and start() again keep the port
    and the directory (keys, job cache), as a restarted master would."""

    def __init__(self, brine, workdir, keys=None, **opts):
        self.brine = brine
        self.dir = tempfile.mkdtemp(prefix="master-", dir=workdir)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.config = os.path.join(self.dir, "master")
        self.log = os.path.join(self.dir, "master.log")
        cfg = {"interface": "127.0.0.1", "port": self.port, "pki_dir": "pki",
               "cachedir": "cache", "sock_dir": "run", "auto_accept": "true",
               "log_file": "master.log", "log_level": "warning"}
        cfg.update(opts)
        with open(self.config, "w") as f:
            for k, v in cfg.items():
                f.write(f"{k}: {v}\n")
        if keys:
            pki = os.path.join(self.dir, "pki")
            os.mkdir(pki, 0o700)
            for name, mode in (("master.pem", 0o600), ("master.pub", 0o644)):
                shutil.copyfile(os.path.join(keys, name), os.path.join(pki, name))
                os.chmod(os.path.join(pki, name), mode)
        self.start()

    def start(self):
        sock = os.path.join(self.dir, "run", "master.sock")
        # A killed master leaves its socket file behind: only a new one
        # says that this start is listening.
        if os.path.exists(sock):
            os.unlink(sock)
        self.proc = subprocess.Popen([self.brine, "master", "-c", self.config],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(sock) or self.proc.poll() is not None, 10,
                 "the master's socket")
        if self.proc.poll() is not None:
            raise BenchError(f"master {self.address} exited with {self.proc.returncode} at "
                             f"start; see {self.log}")

    def kill(self):
        """kill -9: no goodbye to its minions, as when its host dies."""
        self.proc.kill()
        self.proc.wait()

    def cli(self, *args, timeout=120):
        r = subprocess.run([self.brine, *args[:1], "-c", self.config, *args[1:]],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def ping(self, expected, timeout=30):
        """One `brine cmd '*' test.ping`: wall seconds, CLI start included."""
        t0 = time.monotonic()
        rc, out, err = self.cli("cmd", "-t", str(timeout), "--out", "json", "*", "test.ping",
                                timeout=timeout + 30)
        wall = time.monotonic() - t0
        got = json.loads(out) if out.strip() else {}
        if rc != 0 or len(got) != expected or not all(v is True for v in got.values()):
            raise BenchError(f"test.ping: {len(got)} of {expected} minions returned "
                             f"(exit {rc}): {err.strip()[:300]}")
        return wall

    def answers(self, minion, timeout=2):
        """Whether `minion` returns a `brine cmd -t TIMEOUT '*' test.ping` of
        this master (False, at once, while the master is down or does not
        know the minion yet)."""
        rc, out, _ = self.cli("cmd", "-t", str(timeout), "--out", "json", "*", "test.ping",
                              timeout=timeout + 30)
        try:
            got = json.loads(out) if out.strip() else {}
        except ValueError:
            return False
        return got.get(minion) is True

    def stop(self):
        stop_process(self.proc)


class Swarm:
    """`brine swarm` with its stdout parsed as it comes. `masters`: a Master
    or a list of them; `options`: more swarm arguments (--master-type ...)."""

    def __init__(self, brine, masters, count, prefix="bench-", rate=0, options=()):
        if not isinstance(masters, list):
            masters = [masters]
        args = [brine, "swarm", "--master", ",".join(m.address for m in masters),
                "--count", str(count), "--id-prefix", prefix, "--keys-dir", KEYS,
                "--acceptance-wait-time", "10", *options]
        if rate:
            args += ["--connect-rate", str(rate)]
        self.count = count
        self.all_connected = None
        self.all_connected_unix = None
        self.lost_unix = None
        self.serving_again = None
        self.serving_again_unix = None
        self.per_master = {}  # HOST:PORT -> accepted links, from the last report
        self.publishes = {}
        self.lines = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._drain_err, daemon=True)
        self.err_reader.start()
        self.errors = []

    def _drain_err(self):
        for line in self.proc.stderr:
            if "keys" not in line and "trusting" not in line:
                self.errors.append(line.rstrip())

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.match(r"all (\d+) connected after ([\d.]+) s \(unix ([\d.]+)\)", line)
            if m:
                self.all_connected_unix = float(m.group(3))
                self.all_connected = float(m.group(2))
            m = re.match(r"publish (\d+) reached all \d+ minions: first after ([\d.]+) ms, "
                         r"last after ([\d.]+) ms", line)
            if m:
                self.publishes[m.group(1)] = float(m.group(3))
            m = re.match(r"lost a master: \d+ of \d+ serving at unix ([\d.]+)", line)
            if m:
                self.lost_unix = float(m.group(1))
            m = re.match(r"all \d+ serving again ([\d.]+) s after the first loss "
                         r"\(unix ([\d.]+)\)", line)
            if m:
                self.serving_again_unix = float(m.group(2))
                self.serving_again = float(m.group(1))
            m = re.match(r"t=[\d.]+s .* masters (.*)", line)
            if m:
                self.per_master = {k: int(v) for k, v in
                                   (kv.rsplit("=", 1) for kv in m.group(1).split())}

    def last_report(self):
        last = self.lines[-1].strip() if self.lines else "no report"
        return f"last report: {last}; swarm errors: {self.errors[-3:]}"

    def wait_connected(self, timeout):
        try:
            return wait_for(lambda: self.all_connected, timeout,
                            f"{self.count} swarm minions to connect")
        except BenchError:
            raise BenchError(f"{self.count} swarm minions did not all connect in {timeout} s "
                             f"({self.last_report()})")

    def wait_links(self, expected, timeout):
        """Until the report counts `expected` ({HOST:PORT: accepted links})."""
        try:
            wait_for(lambda: all(self.per_master.get(k) == v for k, v in expected.items()),
                     timeout, "the swarm's links")
        except BenchError:
            raise BenchError(f"swarm links per master: wanted {expected} within {timeout} s "
                             f"({self.last_report()})")

    def wait_serving_again(self, timeout):
        try:
            return wait_for(lambda: self.serving_again, timeout,
                            f"{self.count} swarm minions to serve again")
        except BenchError:
            raise BenchError(f"{self.count} swarm minions were not all serving again "
                             f"{timeout} s after losing their master ({self.last_report()})")

    def stop(self):
        stop_process(self.proc)


class RealMinions:
    """`count` minion processes. `masters`: a Master or a list of them (the
    minion's `master` list, in that order); `opts`: more config lines."""

    def __init__(self, brine, masters, workdir, count, prefix, **opts):
        self.procs = []
        self.ids = []
        self.logs = []
        if isinstance(masters, list):
            where = {"master": "[" + ", ".join(m.address for m in masters) + "]"}
        else:
            where = {"master": "127.0.0.1", "master_port": masters.port}
        for i in range(count):
            d = tempfile.mkdtemp(prefix=f"{prefix}{i}-", dir=workdir)
            cfg = os.path.join(d, "minion")
            self.ids.append(f"{prefix}{i:03d}")
            self.logs.append(os.path.join(d, "minion.log"))
            lines = {"id": self.ids[-1], **where, "pki_dir": "pki", "cachedir": "cache",
                     "log_file": "minion.log", "log_level": "warning",
                     "acceptance_wait_time": 1, **opts}
            with open(cfg, "w") as f:
                for k, v in lines.items():
                    f.write(f"{k}: {v}\n")
            self.procs.append(subprocess.Popen([brine, "minion", "-c", cfg],
                                               stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


class Suite:
    def __init__(self, brine, quick, only=None):
        self.brine = os.path.abspath(brine)
        self.quick = quick
        self.only = only  # one group of plan(), or None for all
        self.rows = []
        self.work = tempfile.mkdtemp(prefix="brine-bench-")
        self.keys = None  # the keypair of masters that share minions, made once

    def shared_keys(self):
        if not self.keys:
            self.keys = make_master_keypair(self.work)
        return self.keys

    def master_pair(self):
        """Two masters with one keypair; the caller stops them. When the
        second cannot start, the first is stopped here."""
        masters = []
        try:
            for _ in range(2):
                masters.append(Master(self.brine, self.work, keys=self.shared_keys()))
        except Exception:
            for m in masters:
                m.stop()
            raise
        return masters

    def record(self, name, unit, values, target=None):
        values = [float(v) for v in values]
        row = {"figure": name, "unit": unit, "runs": len(values), "min": min(values),
               "median": statistics.median(values), "max": max(values)}
        if target is not None:
            row["target"] = target
        self.rows.append(row)
        print(f"  {name}: median {row['median']:.4g} {unit} over {len(values)} runs",
              file=sys.stderr, flush=True)

    def auth_storm(self, n, runs):
        times = []
        for _ in range(runs):
            m = Master(self.brine, self.work)
            s = Swarm(self.brine, m, n)
            try:
                times.append(s.wait_connected(120))
            finally:
                s.stop()
                m.stop()
        self.record(f"auth storm {n}: all accepted and connected", "s", times,
                    "<= 10 s" if n == 10000 else None)
        self.record(f"auth storm {n}: handshakes per second", "1/s", [n / t for t in times])

    def accept_all(self, n, label="", **opts):
        """`brine key accept --all` with n pending minions: the CLI's time, the
        time until all serve, and the worst test.ping of an already accepted
        minion meanwhile (the master must not stall other work)."""
        m = Master(self.brine, self.work, auto_accept="false", **opts)
        probe = Swarm(self.brine, m, 1, prefix="probe-")
        s = None
        try:
            wait_for(lambda: m.cli("key", "accept", "probe-1")[0] == 0, 30, "the probe minion")
            probe.wait_connected(30)
            s = Swarm(self.brine, m, n, prefix=f"accept{n}-")

            def pending():
                rc, out, _ = m.cli("key", "list", "--json")
                return rc == 0 and len(json.loads(out)["pending"]) == n
            wait_for(pending, 120, f"{n} pending keys", interval=0.5)
            worst = []
            stop = threading.Event()

            def probe_pings():
                while not stop.is_set():
                    t0 = time.monotonic()
                    rc, out, err = m.cli("cmd", "-t", "10", "--out", "json", "probe-1",
                                         "test.ping")
                    if rc != 0:
                        worst.append(float("inf"))
                        return
                    worst.append(time.monotonic() - t0)
            pinger = threading.Thread(target=probe_pings, daemon=True)
            pinger.start()
            t0_unix, t0 = time.time(), time.monotonic()
            rc, out, err = m.cli("key", "accept", "--all")
            cli = time.monotonic() - t0
            if rc != 0 or out.count("accepted.") != n:
                raise BenchError(f"key accept --all: exit {rc}, {out.count('accepted.')} of {n}")
            s.wait_connected(120)
            stop.set()
            pinger.join(30)
            if not worst or max(worst) == float("inf"):
                raise BenchError("test.ping of an accepted minion failed during accept --all")
            self.record(f"key accept --all of {n} pending{label}: CLI", "s", [cli])
            self.record(f"key accept --all of {n} pending{label}: all serving", "s",
                        [s.all_connected_unix - t0_unix])
            self.record(f"test.ping of another minion during accept --all of {n}{label}", "s",
                        worst)
        finally:
            if s:
                s.stop()
            probe.stop()
            m.stop()

    def swarm_figures(self, sizes, ping_runs, idle_seconds, returns_seconds):
        m = Master(self.brine, self.work)
        swarms = []
        try:
            time.sleep(0.5)
            self.record("master RSS, 0 minions", "KiB", [proc_rss_kib(m.proc.pid)])
            base_rss = proc_rss_kib(m.proc.pid)
            connected = 0
            for n in sizes:
                add = n - connected
                if add > 0:
                    s = Swarm(self.brine, m, add, prefix=f"bench{n}-")
                    swarms.append(s)
                    s.wait_connected(120)
                    connected = n
                walls = [m.ping(n) for _ in range(ping_runs)]
                self.record(f"test.ping across {n} swarm minions (CLI wall)", "s", walls,
                            {1000: "<= 0.1 s", 10000: "<= 0.5 s"}.get(n))
                if n >= 1000:
                    rss = proc_rss_kib(m.proc.pid)
                    self.record(f"master RSS, {n} minions", "KiB", [rss])
                    self.record(f"master memory per connected minion ({n})", "KiB",
                                [(rss - base_rss) / n], "<= 32 KiB")
                if n == sizes[-1]:
                    # A publish has reached everyone when the slowest swarm has it.
                    common = set.intersection(*(set(s.publishes) for s in swarms))
                    pubs = [max(s.publishes[j] for s in swarms) for j in common]
                    if pubs:
                        self.record(f"publish to the last of {n} minions receiving it", "ms",
                                    pubs)
                    self.record(f"master CPU, {n} idle minions over {idle_seconds} s", "%",
                                [cpu_percent(m.proc.pid, idle_seconds)],
                                "<= 2 %" if n == 10000 else None)
                if n == 1000:
                    self.returns_per_second(m, n, returns_seconds)
                    self.batch_wall(m, n, 1 if self.quick else 3)
        finally:
            for s in swarms:
                s.stop()
            m.stop()

    def batch_wall(self, m, n, runs):
        """`brine cmd --batch 10% '*' test.ping` across n swarm minions: ten
        windows of n/10, each slot refilled as its minion returns."""
        walls = []
        for _ in range(runs):
            t0 = time.monotonic()
            rc, out, err = m.cli("cmd", "-t", "30", "--out", "json", "--batch", "10%", "*",
                                 "test.ping")
            walls.append(time.monotonic() - t0)
            got = json.loads(out) if out.strip() else {}
            if rc != 0 or len(got) != n:
                raise BenchError(f"--batch 10%: {len(got)} of {n} returned: {err.strip()[:200]}")
        self.record(f"--batch 10% test.ping across {n} swarm minions (CLI wall)", "s", walls)

    def returns_per_second(self, m, n, seconds):
        self.record(f"returns per second, sequential jobs against {n} minions", "1/s",
                    [self.count_returns(m, n, seconds)])

    def state_apply(self, runs):
        """A 200-state tree (60 file.managed from Jinja templates, 40
        file.directory, 40 file.symlink, 60 cmd.run with unless): applied
        masterless with `brine call --local` (first run, then second runs
        that change nothing: wall and CPU), and through a master whose file
        server holds the tree (first run with the minion's cache cold, then
        second runs), with the minion's RSS after."""
        tree = tempfile.mkdtemp(prefix="tree-", dir=self.work)
        box = tempfile.mkdtemp(prefix="sandbox-", dir=self.work)
        os.makedirs(os.path.join(tree, "app", "files"))
        with open(os.path.join(tree, "top.sls"), "w") as f:
            f.write("base:\n  '*':\n    - app\n")
        sls = []
        for i in range(60):
            with open(os.path.join(tree, "app", "files", f"conf{i}.jinja"), "w") as f:
                f.write("# {{ name }}\nid={{ grains['id'] }}\nindex=%d\n" % i)
            sls.append(f"conf{i}:\n  file.managed:\n    - name: {{{{ box }}}}/conf{i}.txt\n"
                       f"    - source: salt://app/files/conf{i}.jinja\n    - template: jinja\n"
                       f"    - context:\n        name: conf{i}\n")
        for i in range(40):
            sls.append(f"dir{i}:\n  file.directory:\n    - name: {{{{ box }}}}/dir{i}\n")
            sls.append(f"link{i}:\n  file.symlink:\n    - name: {{{{ box }}}}/link{i}\n"
                       f"    - target: {{{{ box }}}}/conf{i}.txt\n")
        for i in range(60):
            sls.append(f"mark{i}:\n  cmd.run:\n    - name: touch {{{{ box }}}}/mark{i}\n"
                       f"    - unless: test -e {{{{ box }}}}/mark{i}\n")
        with open(os.path.join(tree, "app", "init.sls"), "w") as f:
            f.write("{% set box = grains['sandbox'] %}\n" + "\n".join(sls))
        # The same states with every unless through /bin/sh: `&& true` is
        # more than the in-process `test` builtin answers.
        os.makedirs(os.path.join(tree, "spawn"))
        with open(os.path.join(tree, "spawn", "init.sls"), "w") as f:
            f.write("{% set box = grains['sandbox'] %}\n" +
                    "\n".join(x.replace("    - unless: test -e {{ box }}/mark",
                                         "    - unless: true && test -e {{ box }}/mark")
                              for x in sls))

        def timed(argv):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            wall = time.monotonic() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if p.returncode != 0:
                raise BenchError(f"{' '.join(argv[:4])}...: exit {p.returncode}: "
                                 f"{p.stdout[-400:]} {p.stderr[-400:]}")
            return wall, cpu, p.stdout

        local = os.path.join(self.work, "local-minion")
        with open(local, "w") as f:
            f.write(f"id: bench-local\nfile_client: local\nfile_roots: {{base: [{tree}]}}\n"
                    f"pki_dir: {self.work}/local-pki\ncachedir: {self.work}/local-cache\n"
                    f"grains: {{sandbox: {box}}}\n")
        argv = [self.brine, "call", "--local", "-c", local, "--out", "json", "state.apply"]
        wall, cpu, out = timed(argv)
        changed = sum(1 for r in json.loads(out)["local"].values() if r["changes"])
        if changed != 200:
            raise BenchError(f"first masterless apply changed {changed} of 200 states")
        self.record("state.apply 200 states masterless, first run (wall)", "ms", [wall * 1000])
        walls, cpus = [], []
        for _ in range(runs):
            wall, cpu, out = timed(argv)
            if any(r["changes"] for r in json.loads(out)["local"].values()):
                raise BenchError("a second masterless apply changed something")
            walls.append(wall * 1000)
            cpus.append(cpu * 1000)
        self.record("state.apply 200 states masterless, second run (wall)", "ms", walls,
                    "<= 50 ms")
        self.record("state.apply 200 states masterless, second run (CPU)", "ms", cpus)
        walls = []
        spawn = argv[:-1] + ["state.sls", "spawn"]
        for _ in range(runs):
            wall, cpu, out = timed(spawn)
            if any(r["changes"] for r in json.loads(out)["local"].values()):
                raise BenchError("a second masterless apply (unless through the shell) changed "
                                 "something")
            walls.append(wall * 1000)
        self.record("the same, second run, each of the 60 unless through /bin/sh (wall)", "ms",
                    walls)

        shutil.rmtree(box)
        os.makedirs(box)
        # At debug the master logs one line per file request: a run's round
        # trips to the file server are the lines it added.
        m = Master(self.brine, self.work, file_roots=f"{{base: [{tree}]}}", log_level="debug")

        def file_requests():
            with open(m.log, errors="replace") as f:
                return sum(1 for line in f if ": file_request " in line)
        r = RealMinions(self.brine, m, self.work, 1, "apply-", grains=f"{{sandbox: {box}}}")
        try:
            mid = r.ids[0]
            def answers():
                rc, out, _ = m.cli("cmd", "-t", "1", "--out", "json", mid, "test.ping")
                return rc == 0 and out.strip() and json.loads(out).get(mid) is True
            wait_for(answers, 60, "the minion to answer")
            walls, trips = [], []
            for i in range(runs + 1):
                before = file_requests()
                t0 = time.monotonic()
                rc, out, err = m.cli("cmd", "-t", "120", "--out", "json", mid, "state.apply")
                wall = (time.monotonic() - t0) * 1000
                if rc != 0:
                    raise BenchError(f"state.apply through the master: exit {rc}: {err[-400:]}")
                ret = json.loads(out)[mid]
                changed = sum(1 for v in ret.values() if v["changes"])
                # Logged (and flushed: the master runs at debug) before the
                # reply went out, so before the run could end.
                requests = file_requests() - before
                if i == 0:
                    if changed != 200:
                        raise BenchError(f"first apply through the master changed {changed}")
                    self.record("state.apply 200 states through a master, first run, cold "
                                "file cache (CLI wall)", "ms", [wall])
                    self.record("file server round trips, first run (cold cache)", "requests",
                                [requests])
                else:
                    if changed:
                        raise BenchError("a second apply through the master changed something")
                    walls.append(wall)
                    trips.append(requests)
            self.record("state.apply 200 states through a master, second run (CLI wall)", "ms",
                        walls)
            self.record("file server round trips, second run", "requests", trips)
            self.record("minion RSS after the runs", "KiB", [proc_rss_kib(r.procs[0].pid)])
            # The minion runs jobs in its own process (their commands aside),
            # so its high-water mark is what a run takes at its peak.
            self.record("minion peak RSS during the runs (VmHWM)", "KiB",
                        [proc_rss_kib(r.procs[0].pid, "VmHWM")])
        finally:
            r.stop()
            m.stop()

    def scheduled_runs(self, n, period, windows):
        """Scheduled runs (the minions' `schedule`): n swarm minions with one
        job, test.ping every `period` s, each run granted and recorded by the
        master. Run starts per second come from the runs' own records, the
        jids the master minted when it granted them (its clock, to the
        microsecond), over `windows` whole periods once every minion has been
        connected for a period: the peak and the mean, with the spread (each
        minion's offset from its id) and without (`--schedule-no-spread`:
        every minion at offset 0, as a fleet started together runs unspread,
        Salt's way)."""
        import calendar

        def jid_time(jid):
            return calendar.timegm(time.strptime(jid[:14], "%Y%m%d%H%M%S")) + int(jid[14:]) / 1e6

        for spread in (True, False):
            prefix = f"bench-sched{n}-"
            m = Master(self.brine, self.work)
            s = None
            label = "spread by id" if spread else "no spread"
            try:
                opts = ["--schedule", f"test.ping:{period}", "--connect-rate", "2000"]
                if not spread:
                    opts.append("--schedule-no-spread")
                s = Swarm(self.brine, m, n, prefix=prefix, options=opts)
                s.wait_connected(300)
                start = int(time.time()) + period + 1
                end = start + windows * period
                wait_for(lambda: time.time() > end + 3, end - time.time() + 30,
                         "the measured periods", interval=0.5)
                rc, out, err = m.cli("job", "list", "--limit", str(n * (windows + 4) * 2),
                                     "--function", "test.ping", timeout=300)
                if rc != 0:
                    raise BenchError(f"brine job list: exit {rc}: {err.strip()[:300]}")
                starts = [jid_time(line.split()[0]) for line in out.splitlines()
                          if "(schedule swarm)" in line]
                starts = [t for t in starts if start <= t < end]
                hist = [0] * (end - start)
                for t in starts:
                    hist[int(t - start)] += 1
                expected = n * windows
                if len(starts) < expected * 0.98:
                    raise BenchError(f"scheduled runs ({label}): {len(starts)} of the {expected} "
                                     f"expected in {windows} periods ({s.last_report()})")
                mean = sum(hist) / len(hist)
                self.record(f"scheduled runs, {n} swarm minions every {period} s, {label}: "
                            "peak starts per second", "1/s", [max(hist)])
                self.record(f"scheduled runs, {n} swarm minions every {period} s, {label}: "
                            "mean starts per second", "1/s", [mean])
                self.record(f"scheduled runs, {n} swarm minions every {period} s, {label}: "
                            "peak / mean", "ratio", [max(hist) / mean],
                            target="<= 1.5" if spread else None)
            finally:
                if s:
                    s.stop()
                m.stop()

    def swarm_state_apply(self, n, rounds, idle_wait):
        """`brine cmd '*' state.apply` across n swarm minions (`brine swarm
        --states`) of a 20-state tree from the master's file server: file
        states into a sandbox directory per minion (a directory, a subdirectory,
        eight files with inline contents, two from a Jinja template through
        salt://), four test.succeed_with_changes that run on those files'
        changes, two test.succeed_without_changes and two test.nop. The
        figure: wall from the publish until the master has stored every
        minion's report, for the first run (every minion's salt:// cache
        cold, 16 states changed each) and the second (nothing changed); and
        the swarm's RSS before the runs, right after them, and `idle_wait`
        seconds later (0: not measured). `rounds` times, each from a new
        master and swarm.

        What the runs leave held is mostly the state compiler's process-wide
        cache of rendered sls (src/state/highstate.cc, bounded by its texts'
        bytes): each minion's sls renders to its own text here."""
        tree = tempfile.mkdtemp(prefix="swarm-tree-", dir=self.work)
        os.makedirs(os.path.join(tree, "fleet", "files"))
        with open(os.path.join(tree, "top.sls"), "w") as f:
            f.write("base:\n  '*':\n    - fleet\n")
        with open(os.path.join(tree, "fleet", "files", "app.conf.jinja"), "w") as f:
            f.write("# {{ name }}\nid={{ grains['id'] }}\n")
        sls = ["{% set dir = grains['sandbox'] ~ '/' ~ grains['id'] %}",
               "root:\n  file.directory:\n    - name: {{ dir }}\n    - makedirs: True",
               "confd:\n  file.directory:\n    - name: {{ dir }}/conf.d\n"
               "    - require:\n      - file: root"]
        for i in range(8):
            sls.append(f"conf{i}:\n  file.managed:\n    - name: {{{{ dir }}}}/conf.d/{i}.conf\n"
                       f"    - contents: setting{i}={{{{ grains['id'] }}}}\n"
                       f"    - require:\n      - file: confd")
        for i in range(2):
            sls.append(f"app{i}:\n  file.managed:\n    - name: {{{{ dir }}}}/app{i}.conf\n"
                       f"    - source: salt://fleet/files/app.conf.jinja\n"
                       f"    - template: jinja\n    - context:\n        name: app{i}\n"
                       f"    - require:\n      - file: root")
        for i in range(4):
            sls.append(f"notify{i}:\n  test.succeed_with_changes:\n    - onchanges:\n"
                       f"      - file: conf{2 * i}\n      - file: app{i % 2}")
        for i in range(2):
            sls.append(f"steady{i}:\n  test.succeed_without_changes")
            sls.append(f"noop{i}:\n  test.nop")
        with open(os.path.join(tree, "fleet", "init.sls"), "w") as f:
            f.write("\n\n".join(sls) + "\n")
        prefix = f"bench-st{n}-"
        figures = {}  # name -> (unit, values), recorded after every round

        def add(name, unit, value):
            figures.setdefault(name, (unit, []))[1].append(value)

        def reports(m, jid):
            rc, out, err = m.cli("report", "list", "--out", "json", "--minion", prefix + "*",
                                 "--limit", str(n + 100))
            if rc != 0:
                raise BenchError(f"brine report list: exit {rc}: {err.strip()[:300]}")
            return {r["minion"]: r for r in json.loads(out) if r["jid"] == jid}

        for _ in range(rounds):
            # Each round from nothing: a new master, swarm and sandbox, and
            # the swarm's salt:// cache (beside its keys) removed.
            box = tempfile.mkdtemp(prefix="swarm-sandbox-", dir=self.work)
            grains = os.path.join(box, "grains.yaml")
            with open(grains, "w") as f:
                f.write(f"sandbox: {box}\n")
            shutil.rmtree(os.path.join(KEYS, prefix + "files"), ignore_errors=True)
            m = Master(self.brine, self.work, file_roots=f"{{base: [{tree}]}}")
            s = None
            try:
                s = Swarm(self.brine, m, n, prefix=prefix,
                          options=("--states", "--grains", grains))
                s.wait_connected(180)
                rss_before = proc_rss_kib(s.proc.pid)
                add(f"swarm RSS, {n} minions with --states, before any run", "KiB", rss_before)
                for run, (want_status, want_changed) in enumerate((("changed", 16),
                                                                  ("unchanged", 0))):
                    t0 = time.monotonic()
                    rc, out, err = m.cli("cmd", "-t", "300", "--out", "json", "--show-jid", "*",
                                         "state.apply", timeout=400)
                    returned = time.monotonic() - t0
                    jid = re.search(r"^jid: (\d+)$", err, re.M)
                    got = json.loads(out) if out.strip() else {}
                    if rc != 0 or not jid or len(got) != n:
                        raise BenchError(f"state.apply across {n} swarm minions: {len(got)} "
                                         f"returned (exit {rc}): {err.strip()[-400:]}")
                    jid = jid.group(1)
                    for mid, ret in got.items():
                        if not isinstance(ret, dict) or len(ret) != 20:
                            raise BenchError(f"{mid}: not 20 states: {str(ret)[:300]}")
                        changed = sum(1 for v in ret.values() if v["changes"])
                        if changed != want_changed or not all(v["result"] is True
                                                              for v in ret.values()):
                            raise BenchError(f"{mid}: run {run + 1} changed {changed} states "
                                             f"(wanted {want_changed}) or failed one")
                    deadline = time.monotonic() + 120
                    while True:
                        stored = reports(m, jid)
                        if len(stored) == n:
                            break
                        if time.monotonic() > deadline:
                            raise BenchError(f"{len(stored)} of {n} reports of {jid} stored")
                        time.sleep(0.05)
                    wall = time.monotonic() - t0
                    bad = [mid for mid, r in stored.items() if r["status"] != want_status]
                    if bad:
                        raise BenchError(f"{len(bad)} reports not {want_status}, e.g. "
                                         f"{stored[bad[0]]}")
                    which = ("first run (salt:// caches cold)" if run == 0
                             else "second run (no changes)")
                    add(f"state.apply 20 states across {n} swarm minions, {which}: "
                        "all returned (CLI wall)", "s", returned)
                    add(f"state.apply 20 states across {n} swarm minions, {which}: "
                        "until every report is stored", "s", wall)
                add(f"swarm RSS, {n} minions with --states, right after two runs", "KiB",
                    proc_rss_kib(s.proc.pid))
                if idle_wait:
                    # jemalloc gives pages freed back after its decay time
                    # (10 s): what the runs still hold shows after that.
                    time.sleep(idle_wait)
                    rss_after = proc_rss_kib(s.proc.pid)
                    add(f"swarm RSS per minion with --states ({n}), idle after two runs", "KiB",
                        rss_after / n)
                    add(f"swarm RSS growth per minion over two runs ({n}), idle after", "KiB",
                        (rss_after - rss_before) / n)
            finally:
                if s:
                    s.stop()
                m.stop()
                shutil.rmtree(box, ignore_errors=True)
                shutil.rmtree(os.path.join(KEYS, prefix + "files"), ignore_errors=True)
        for name, (unit, values) in figures.items():
            self.record(name, unit, values)

    def real_minions(self, counts, ping_runs, idle_seconds):
        for n in counts:
            m = Master(self.brine, self.work)
            t0 = time.monotonic()
            r = RealMinions(self.brine, m, self.work, n, f"real{n}-")
            try:
                def all_answer():
                    rc, out, _ = m.cli("cmd", "-t", "1", "--out", "json", "*", "test.ping")
                    return out.strip() and len(json.loads(out)) == n
                wait_for(all_answer, 60, f"{n} real minions to answer")
                joined = time.monotonic() - t0
                if n == max(counts):
                    self.record(f"{n} real minions started at once: all answering", "s",
                                [joined], "<= 2 s" if n == 50 else None)
                walls = [m.ping(n) for _ in range(ping_runs)]
                self.record(f"test.ping across {n} real minions (CLI wall)", "s", walls,
                            {10: "<= 0.02 s", 50: "<= 0.05 s"}.get(n))
                if n == min(counts):
                    # Idle means idle for a while: the minion trims its
                    # start-up pages after 5 to 10 quiet seconds.
                    pid = r.procs[0].pid
                    self.record(f"idle real minion CPU over {idle_seconds} s", "%",
                                [cpu_percent(pid, idle_seconds)], "~0 %")
                    self.record("idle real minion RSS", "KiB", [proc_rss_kib(pid)], "<= 8192")
                    self.record("idle real minion PSS", "KiB", [proc_rollup_kib(pid, "Pss")])
                    self.record("idle real minion private dirty", "KiB",
                                [proc_rollup_kib(pid, "Private_Dirty")])
            finally:
                r.stop()
                m.stop()

    def failover_real_minion(self, kills, alive=3):
        """A real minion with master_type failover over [A, B]: kill -9 the
        master it serves from, time until the other master gets its
        test.ping return, then restart the killed one: the next target."""
        masters, r = [], None
        times = []
        try:
            masters = self.master_pair()
            r = RealMinions(self.brine, masters, self.work, 1, "failover-",
                            master_type="failover", master_alive_interval=alive)
            minion = r.ids[0]
            active, other = masters
            for kill in range(1, kills + 1):
                wait_for(lambda: active.answers(minion), 30,
                         f"{minion} to serve from {active.address}")
                # A master acknowledges a return within 1.25 s. Killed
                # before that, it is owed the return, and the minion's
                # delivery link to it, once it is back, takes its jobs too:
                # it would answer for a failover that has not happened.
                # Beyond that, the kills land at five points of the idle
                # minion's keepalive period (master_alive_interval / 3):
                # the time since its last contact decides the failover.
                time.sleep(1.5 + (kill % 5) * alive / 15)
                t0 = time.monotonic()
                active.kill()
                wait_for(lambda: other.answers(minion), alive + 30,
                         f"{minion} to fail over from {active.address} to {other.address}",
                         interval=0.1)
                times.append(time.monotonic() - t0)
                with open(r.logs[0], errors="replace") as f:
                    failovers = sum(1 for line in f if re.search(r"is dead: .*failing over", line))
                if failovers != kill:
                    raise BenchError(f"{other.address} got {minion}'s return after kill {kill}, "
                                     f"but its log says it failed over {failovers} times "
                                     f"({r.logs[0]})")
                active.start()
                active, other = other, active
        finally:
            if r:
                r.stop()
            for m in masters:
                m.stop()
        self.record(f"real minion failover (master_alive_interval {alive} s): kill to ping",
                    "s", times, f"<= {alive + 2} s")

    def failover_swarm(self, n, runs, deadline, alive=3):
        """n swarm minions, failover over [A, B], all on A: kill -9 A, time
        until all serve from B (from the swarm's first loss, and from the
        kill)."""
        since_loss, since_kill = [], []
        for _ in range(runs):
            masters, s = [], None
            try:
                masters = self.master_pair()
                a, b = masters
                s = Swarm(self.brine, masters, n, options=[
                    "--master-type", "failover", "--master-alive-interval", str(alive)])
                s.wait_connected(120)
                s.wait_links({a.address: n, b.address: 0}, 10)
                s.lost_unix = s.serving_again = None
                killed = time.time()
                a.kill()
                s.wait_serving_again(deadline)
                if s.lost_unix is None or s.lost_unix < killed:
                    raise BenchError(f"the swarm served again without reporting the loss of "
                                     f"{a.address} ({s.last_report()})")
                s.wait_links({a.address: 0, b.address: n}, 10)
                since_loss.append(s.serving_again)
                since_kill.append(s.serving_again_unix - killed)
            finally:
                if s:
                    s.stop()
                for m in masters:
                    m.stop()
        self.record(f"failover of {n} swarm minions (alive {alive} s): loss to serving", "s",
                    since_loss)
        self.record(f"failover of {n} swarm minions (alive {alive} s): kill to serving", "s",
                    since_kill)

    def hot_multi_master(self, n, runs):
        """n swarm minions connected to A and B at once: test.ping from B
        with A up, then with A killed -9 (the swarm retries A meanwhile; B
        must not notice). The pings are half a second apart, so that those
        after the kill meet the minions' waves of reconnects to A."""
        def pings(m):
            walls = []
            for _ in range(runs):
                walls.append(m.ping(n))
                time.sleep(0.5)
            return walls

        masters, s = [], None
        try:
            masters = self.master_pair()
            a, b = masters
            s = Swarm(self.brine, masters, n)
            s.wait_connected(120)
            s.wait_links({a.address: n, b.address: n}, 60)
            up = pings(b)
            a.kill()
            s.wait_links({a.address: 0, b.address: n}, 10)
            down = pings(b)
            if s.lost_unix is not None:
                raise BenchError(f"hot minions stopped serving when {a.address} died although "
                                 f"{b.address} is up ({s.last_report()})")
        finally:
            if s:
                s.stop()
            for m in masters:
                m.stop()
        self.record(f"hot multi-master test.ping, {n} minions, from B: both up", "s", up,
                    "<= 0.1 s")
        self.record(f"hot multi-master test.ping, {n} minions, from B: A killed", "s", down,
                    "<= 0.1 s")

    def publish_hold(self, n, jobs):
        """Memory a master spends on publishes held for accepted minions that
        are not connected: n swarm minions connect once and go, then `jobs`
        `brine cmd --async` publishes wait for them (publish_hold 600). The
        job cache's share (its pages in the master) is part of the cost."""
        m = Master(self.brine, self.work, publish_hold=600)
        try:
            s = Swarm(self.brine, m, n)
            try:
                s.wait_connected(120)
            finally:
                s.stop()
            # A restart: the master keeps the heap its connections freed
            # (some 30 MB for 1,000) and fills it first, which would hide
            # most of what the holds take.
            m.stop()
            m.start()
            time.sleep(1)
            before = proc_rss_kib(m.proc.pid)
            jids = []
            for _ in range(jobs):
                rc, out, err = m.cli("cmd", "--async", "*", "test.echo", "x")
                found = re.search(r"job ID: (\d+)", out)
                if rc != 0 or not found:
                    raise BenchError(f"cmd --async: exit {rc}: {err.strip()[:300]}")
                jids.append(found.group(1))
            time.sleep(1)
            after = proc_rss_kib(m.proc.pid)
            rc, out, err = m.cli("job", "show", jids[-1], "--out", "json")
            if rc != 0:
                raise BenchError(f"job show {jids[-1]}: exit {rc}: {err.strip()[:300]}")
            job = json.loads(out)
            if len(job["running"]) != n or job["undelivered"] or job["returns"]:
                raise BenchError(f"job {jids[-1]}: {len(job['running'])} of {n} minions held, "
                                 f"{len(job['undelivered'])} undelivered, "
                                 f"{len(job['returns'])} returned")
        finally:
            m.stop()
        print(f"  publish hold: RSS {before} KiB before, {after} KiB after", file=sys.stderr)
        self.record(f"master memory per held publish (job x minion), {jobs}x{n}", "B",
                    [(after - before) * 1024 / (jobs * n)])
        self.record(f"master memory per held job ({n} minions away)", "KiB",
                    [(after - before) / jobs])

    def client_start(self, runs):
        """CPU (user + sys, from wait4) of one `brine --help`, `brine
        --version`, `brine cmd` against a master that is not running (it fails
        at once) and `brine key list` (read from the store, as when no master
        runs), each beside a /bin/true: interleaved, so that the machine's
        drift hits them all alike. Nearly all of it is the process's start
        (loading, the allocator, static initialisers, the command line); the
        ratios are per pair."""
        m = Master(self.brine, self.work)
        m.stop()
        true = shutil.which("true") or "/bin/true"
        failing = "brine cmd, master down"
        commands = {"/bin/true": [true],
                    "brine --help": [self.brine, "--help"],
                    "brine --version": [self.brine, "--version"],
                    failing: [self.brine, "cmd", "-c", m.config, "-t", "5", "*", "test.ping"],
                    "brine key list": [self.brine, "key", "list", "-c", m.config]}

        def cpu_ms(argv):
            devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
            pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=devnull)
            _, status, usage = os.wait4(pid, 0)
            return (usage.ru_utime + usage.ru_stime) * 1e3, os.waitstatus_to_exitcode(status)

        r = subprocess.run(commands[failing], capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or not r.stderr.strip():
            raise BenchError(f"brine cmd with its master down: exit {r.returncode} and "
                             f"{r.stderr.strip()[:200]!r}; expected an error at once")
        times = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                ms, rc = cpu_ms(argv)
                if (rc == 0) != (name != failing):
                    raise BenchError(f"{' '.join(argv)}: exit {rc}")
                times[name].append(ms)
        for name, values in times.items():
            self.record(f"client start: {name}, CPU", "ms", values)
        # key list reads the store (SQLite): its figure is the start and some
        # work; the others are the start alone.
        for name in commands:
            if name != "/bin/true":
                self.record(f"client start: {name} / /bin/true, CPU", "x",
                            [a / b for a, b in zip(times[name], times["/bin/true"]) if b > 0],
                            None if name == "brine key list" else "<= 1.5")

    def grains_memory(self, n):
        """Master memory per minion with full grains cached (the Debian 12
        fixture, about 4 KiB of YAML), against minions that send only their id."""
        grains = os.path.join(ROOT, "src", "grains", "tests", "fixtures", "expected",
                              "debian-12.yaml")
        per = {}
        for label, options in (("id-only grains", ()), ("Debian 12 grains", ("--grains", grains))):
            m = Master(self.brine, self.work)
            s = None
            try:
                time.sleep(0.5)
                base_rss = proc_rss_kib(m.proc.pid)
                s = Swarm(self.brine, m, n, prefix="grains-", options=options)
                s.wait_connected(120)
                # A minion's grains go before its return on its connection:
                # once every minion answered, every minion's grains are cached.
                m.ping(n)
                per[label] = (proc_rss_kib(m.proc.pid) - base_rss) / n
                self.record(f"master memory per connected minion, {label} ({n})", "KiB",
                            [per[label]], "<= 32 KiB")
            finally:
                if s:
                    s.stop()
                m.stop()
        self.record(f"master memory per minion for its cached Debian 12 grains ({n})", "KiB",
                    [per["Debian 12 grains"] - per["id-only grains"]])

    def store_backends(self, n, ping_runs, returns_seconds, accept_n):
        """The same master work on the embedded SQLite store and on a shared
        PostgreSQL (a real server started here, on loopback): test.ping across
        n swarm minions, returns per second, master memory per minion, and
        accepting accept_n pending keys. Both masters and their swarms run
        at once and the runs alternate between them, so that the machine's
        drift hits both alike; the ratios are of paired runs."""
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from pgserver import PostgresServer, postgres_available
        if not postgres_available():
            raise BenchError("PostgreSQL is not installed (apt-get install postgresql)")
        pg = PostgresServer()
        pg.start()
        backends = ("sqlite", "postgresql")
        masters, swarms, opts = {}, {}, {"sqlite": {}}
        try:
            pg.create_database("bench")
            opts["postgresql"] = {"store": pg.url("bench"),
                                  "store_password_file": pg.password_file(
                                      os.path.join(self.work, "store.pw"))}
            for b in backends:
                masters[b] = Master(self.brine, self.work, **opts[b])
                time.sleep(0.5)
                base_rss = proc_rss_kib(masters[b].proc.pid)
                swarms[b] = Swarm(self.brine, masters[b], n, prefix=f"store-{b}-")
                swarms[b].wait_connected(180)
                masters[b].ping(n)  # every minion's grains cached, as in later runs
                self.record(f"master memory per connected minion ({n}), {b} store", "KiB",
                            [(proc_rss_kib(masters[b].proc.pid) - base_rss) / n])
            walls = {b: [] for b in backends}
            for i in range(ping_runs):
                for b in (backends if i % 2 == 0 else backends[::-1]):
                    walls[b].append(masters[b].ping(n))
            for b in backends:
                self.record(f"test.ping across {n} swarm minions, {b} store (CLI wall)", "s",
                            walls[b])
            self.record(f"test.ping across {n}: postgresql / sqlite, paired runs", "ratio",
                        [p / q for p, q in zip(walls["postgresql"], walls["sqlite"])], "<= 1.2")
            rates = {b: [] for b in backends}
            for i in range(2):
                for b in (backends if i % 2 == 0 else backends[::-1]):
                    rates[b].append(self.count_returns(masters[b], n, returns_seconds / 2))
            for b in backends:
                self.record(f"returns per second, sequential jobs against {n} minions, {b} store",
                            "1/s", rates[b])
            self.record("returns per second: postgresql / sqlite, paired runs", "ratio",
                        [p / q for p, q in zip(rates["postgresql"], rates["sqlite"])], ">= 0.5")
        finally:
            for b in backends:
                if b in swarms:
                    swarms[b].stop()
                if b in masters:
                    masters[b].stop()
        try:
            for b in backends:
                self.accept_all(accept_n, label=f", {b} store", **opts[b])
        finally:
            pg.cleanup()

    def cluster_figures(self, sizes, runs, returns_seconds, kills):
        """Three masters of one cluster behind a real HAProxy (TCP, round
        robin) against one master alone, both on one PostgreSQL: test.ping
        across n swarm minions from one master of each (paired, alternating
        runs: the ratio is the forwarding overhead), returns per second
        through the cluster, and the time until the minions of a killed
        member are served again through the balancer."""
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from pgserver import PostgresServer, postgres_available
        from haproxy import LoadBalancer, haproxy_bin
        if not postgres_available():
            raise BenchError("PostgreSQL is not installed (apt-get install postgresql)")
        if not haproxy_bin():
            raise BenchError("HAProxy is not installed (apt-get install haproxy)")
        pg = PostgresServer()
        pg.start()
        try:
            for n in sizes:
                self.cluster_run(pg, n, runs, returns_seconds, kills)
        finally:
            pg.cleanup()

    def cluster_run(self, pg, n, runs, returns_seconds, kills):
        from haproxy import LoadBalancer  # tests/integration, put on the path by cluster_figures
        tag = f"c{n}"
        pg.create_database(f"{tag}solo")
        pg.create_database(f"{tag}cluster")
        pw = pg.password_file(os.path.join(self.work, f"{tag}.pw"))
        solo_opts = {"store": pg.url(f"{tag}solo"), "store_password_file": pw}
        cluster_dir = os.path.join(self.work, f"{tag}-cluster-key")
        opts = {"store": pg.url(f"{tag}cluster"), "store_password_file": pw,
                "cluster_id": tag, "cluster_pki_dir": cluster_dir}
        init_conf = os.path.join(self.work, f"{tag}-init.conf")
        with open(init_conf, "w") as f:
            for k, v in opts.items():
                f.write(f"{k}: {v}\n")
        r = subprocess.run([self.brine, "cluster", "-c", init_conf, "init"], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise BenchError(f"brine cluster init: {r.stderr.strip()[:300]}")
        solo, members, swarms, lb = None, [], [], None
        try:
            solo = Master(self.brine, self.work, **solo_opts)
            members = [Master(self.brine, self.work, cluster_port=free_port(), **opts)
                       for _ in range(3)]
            lb = LoadBalancer([m.port for m in members], idle_timeout=120)
            lb.start()

            class Balancer:
                address = f"127.0.0.1:{lb.port}"
            swarms.append(Swarm(self.brine, solo, n, prefix=f"{tag}s-"))
            swarms.append(Swarm(self.brine, Balancer(), n, prefix=f"{tag}c-"))
            for s in swarms:
                s.wait_connected(300)
            # Keys accepted on the other members reach this one through the
            # store's feed: right after thousands connect at once a publish
            # may not target them all yet.
            for m in (solo, members[0]):
                t0, tries = time.monotonic(), []

                def answered_all():
                    tries.append(1)
                    try:
                        m.ping(n)
                        return True
                    except BenchError:
                        return False
                wait_for(answered_all, 120, f"all {n} minions to answer {m.address}")
                print(f"  {m.address}: all {n} answered after {len(tries)} pings, "
                      f"{time.monotonic() - t0:.1f} s", flush=True)
            walls = {"one master": [], "cluster": []}
            for i in range(runs):
                order = [("one master", solo), ("cluster", members[0])]
                for name, m in (order if i % 2 == 0 else order[::-1]):
                    walls[name].append(m.ping(n))
            for name, w in walls.items():
                self.record(f"test.ping across {n} swarm minions, {name} (CLI wall)", "s", w)
            self.record(f"test.ping across {n}: 3-master cluster behind HAProxy / one master",
                        "ratio", [c / o for c, o in zip(walls["cluster"], walls["one master"])],
                        "<= 1.5")
            self.record(f"returns per second through the cluster, sequential jobs, {n} minions",
                        "1/s", [self.count_returns(members[0], n, returns_seconds)])
            # A member killed: its minions come back through the balancer.
            # Each round kills the member (not the one the CLI uses) that
            # holds the most minions, then starts it again.
            s = swarms[1]
            served = []
            def holdings():
                """{port: minions connected} once every member is alive and
                their heartbeats account for every minion (a killed member's
                last row lingers for seconds, and a restarted one's first
                says nothing yet)."""
                got = {}

                def settled():
                    rc, out, err = members[0].cli("cluster", "status", "--json")
                    if rc not in (0, 2):
                        raise BenchError(f"brine cluster status: {err.strip()[:300]}")
                    rows = json.loads(out)["members"]
                    got.clear()
                    got.update({r["name"].rsplit(":", 1)[1]: r["stats"].get("connected", 0)
                                for r in rows})
                    return all(r["alive"] for r in rows) and sum(got.values()) == n
                wait_for(settled, 60, "every member alive, holding every minion between them")
                return got

            for _ in range(kills):
                held = holdings()
                victim = max(members[1:], key=lambda m: held.get(str(m.port), 0))
                print(f"  kill: members hold {held} minions; killing the one on port "
                      f"{victim.port}", flush=True)
                s.lost_unix = s.serving_again = s.serving_again_unix = None
                killed = time.time()
                victim.kill()
                s.wait_serving_again(120)
                served.append(s.serving_again_unix - killed)
                members[0].ping(n)
                victim.start()
            self.record(f"cluster member killed -9 ({n} minions in all): its minions served "
                        "again, from the kill", "s", served)
        finally:
            for s in swarms:
                s.stop()
            if lb:
                lb.stop()
            for m in members + ([solo] if solo else []):
                if m.proc.poll() is None:
                    m.stop()

    def store_failover(self, runs, n):
        """A master on a PostgreSQL pair under pg_auto_failover (tests/
        integration/pgfailover.py: monitor, primary, synchronous standby, the
        monitor's timings tuned to seconds) with n swarm minions, publishing
        test.ping --async in a loop: kill -9 the primary (postgres and its
        keeper), time until the standby is promoted and until the first
        publish started after the kill is recorded; then every return of every
        job must be in the store."""
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from pgfailover import FailoverCluster, pg_autoctl_available
        if not pg_autoctl_available():
            raise BenchError("pg_auto_failover is not installed (apt-get install "
                             "postgresql-15-auto-failover pg-auto-failover-cli)")
        promoted, resumed = [], []
        for _ in range(runs):
            pg = FailoverCluster()
            m = swarm = None
            try:
                pg.start()
                pw = pg.password_file(os.path.join(self.work, "failover-store.pw"))
                m = Master(self.brine, self.work, store=pg.url(), store_password_file=pw)
                swarm = Swarm(self.brine, m, n, prefix="store-failover-")
                swarm.wait_connected(120)
                m.ping(n)
                jobs, stop = [], threading.Event()

                def publish():
                    while not stop.is_set():
                        t0 = time.monotonic()
                        rc, out, _ = m.cli("cmd", "--async", "*", "test.ping", timeout=60)
                        jid = re.search(r"job ID: (\d{20})", out) if rc == 0 else None
                        if jid:
                            jobs.append((t0, time.monotonic(), jid.group(1)))
                        time.sleep(0.05)
                t = threading.Thread(target=publish, daemon=True)
                t.start()
                try:
                    wait_for(lambda: len(jobs) >= 3, 30, "three jobs before the kill")
                    # The clock starts at the kill itself: finding the
                    # primary asks the monitor, which takes a while.
                    old = pg.primary()
                    killed = time.monotonic()
                    pg.kill_node(old)
                    pg.wait_promoted(old)
                    promoted.append(time.monotonic() - killed)
                    wait_for(lambda: any(s >= killed for s, _, _ in jobs), 60,
                             "a job recorded after the store's failover")
                    resumed.append(min(f for s, f, _ in jobs if s >= killed) - killed)
                finally:
                    stop.set()
                    t.join(timeout=90)
                jids = [j for _, _, j in jobs]

                def stored():
                    rc, out, _ = m.cli("job", "list", "--out", "json", "--limit",
                                       str(len(jids) + 100))
                    listed = {j["jid"]: j for j in json.loads(out)} if rc == 0 else {}
                    return all(len(listed.get(j, {}).get("returned", [])) == n for j in jids)
                wait_for(stored, 60, f"every return of {len(jids)} jobs in the store",
                         interval=0.5)
            finally:
                if swarm:
                    swarm.stop()
                if m:
                    m.stop()
                pg.cleanup()
        self.record("store failover (pg_auto_failover): kill to standby promoted", "s", promoted)
        self.record(f"store failover: kill to first job recorded ({n} swarm minions)", "s",
                    resumed, "<= 20 s")

    def count_returns(self, m, n, seconds):
        """Returns per second of sequential test.echo jobs against n minions."""
        total, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            rc, out, err = m.cli("cmd", "-t", "30", "--out", "json", "*", "test.echo", "x")
            got = json.loads(out) if out.strip() else {}
            if rc != 0 or len(got) != n:
                raise BenchError(f"test.echo: {len(got)} of {n} returned: {err.strip()[:200]}")
            total += len(got)
        return total / (time.monotonic() - t0)

    def microbench(self, rounds, pillar_rounds):
        """In process, from bench/brine_microbench (built beside brine): each
        target expression parsed and matched against 10,000 cached minions
        with Salt's own grain sets, the pillar of 10,000 minions compiled
        from 10 sls files and a top file with mixed targets, and the state
        compiler on the fixtures' bench tree (render+compile per catalog)."""
        exe = os.path.join(os.path.dirname(self.brine), "..", "..", "bench", "brine_microbench")
        r = subprocess.run([exe, "--rounds", str(rounds), "--pillar-rounds", str(pillar_rounds)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise BenchError(f"{exe}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
        parse = []
        for line in r.stdout.splitlines():
            d = json.loads(line)
            if d["bench"] == "target_floor":
                self.record(f"grains floor: one grain lookup, {d['minions']} cached minions",
                            "ms", d["match_ms"])
            elif d["bench"] == "target":
                self.record(f"target {d['label']}: {d['matched']}/{d['minions']}", "ms",
                            d["match_ms"], "<= 20 ms")
                parse.append(statistics.median(d["parse_ms"]))
            elif d["bench"] == "grains_memory":
                self.record("grains of one minion as a tree (Debian/Ubuntu/Rocky fixtures)", "B",
                            [d["tree_bytes_per_minion"]])
                self.record("grains of one minion packed, as the master caches them", "B",
                            [d["packed_bytes_per_minion"]])
            elif d["bench"] == "pillar_load":
                self.record(f"pillar tree load ({d['sls']} sls, mixed top file)", "ms", d["ms"])
            elif d["bench"] == "pillar_compile":
                self.record(f"pillar {d['method']}, {d['minions']} minions", "1/s",
                            d["minions_per_s"])
            elif d["bench"] == "state_compile":
                # Salt 3006.26 on the same tree and machine: about 106 ms of CPU
                # (tests/fixtures/states/README.md, "Timing").
                self.record(f"state render+compile, '{d['tree']}' tree ({d['chunks']} chunks), "
                            "CPU per catalog", "ms", d["cpu_ms"], "<= 4 ms")
                self.record(f"state render+compile, '{d['tree']}' tree, wall per catalog", "ms",
                            d["wall_ms"])
                self.record("heap kept per compiled catalog (its lowstate)", "KiB",
                            [d["catalog_bytes"] / 1024])
            elif d["bench"] == "state_compile_cold":
                self.record(f"state render+compile, '{d['tree']}' tree, CPU per catalog with "
                            "the shared parse and YAML caches emptied first (a first compile)",
                            "ms", d["cpu_ms"])
            elif d["bench"] == "metrics":
                t = d["threads"]
                self.record(f"metrics: counter increment, {t} threads at once", "ns",
                            d["counter_ns"])
                self.record(f"metrics: histogram observation, {t} threads at once", "ns",
                            d["histogram_ns"])
                self.record(f"metrics: one shared std::atomic add, {t} threads at once (for "
                            "comparison)", "ns", d["shared_atomic_ns"])
            elif d["bench"] == "catalog":
                n = d["minions"]
                self.record(f"compile master: catalog compiled cold, '{d['tree']}' tree "
                            f"({d['chunks']} chunks; catalog cache and compile caches emptied), "
                            "CPU", "ms", d["cold_cpu_ms"])
                self.record(f"compile master: catalogs per core-second on a cache miss, {n} "
                            "minions of one role", "1/s", [d["miss_per_core_s"]])
                self.record(f"compile master: catalogs per core-second from the cache, {n} "
                            "minions", "1/s", [d["hit_per_core_s"]])
                self.record(f"compile master: catalog cache per minion, {n} minions sharing "
                            f"{d['catalogs']} catalog(s)", "B", [d["cache_bytes_per_minion"]])
                self.record("compile master: one catalog in the cache (a minion whose catalog "
                            "is its own costs this and 256 B)", "KiB", [d["catalog_bytes"] / 1024])
            elif d["bench"] == "template_render":
                self.record(f"templates rendered (slsutil.renderer, {d['templates']} renders of "
                            "the fixture trees' sls)", "1/s", [d["templates_per_s"]])
        if parse:
            self.record(f"target parse, median of each of {len(parse)} expressions", "ms", parse)

    def inventory(self, n, runs):
        """`brine inventory` against a store of n minions (SQLite, filled here
        directly: accepted keys, grains from /work/shared/fixtures (Salt 3006's
        Debian 12, Ubuntu 22.04 and Rocky 9 sets, a third each, with ids and
        addresses of their own), two in three connected, a last state run
        each). Wall time of the whole CLI process, start included, for the
        default fields, a compound grain target, chosen fields as CSV, and
        `brine report states` for one state ID."""
        import sqlite3
        fixtures = os.environ.get("BRINE_GRAINS_FIXTURES", "/work/shared/fixtures/grains")
        if not os.path.isdir(fixtures):
            fixtures = os.path.join(ROOT, "src", "grains", "tests", "fixtures", "expected")
        m = Master(self.brine, self.work)
        m.proc.terminate()
        m.proc.wait(30)
        # The grains as brine reads them: brine call --local on a minion
        # config whose grains are the fixture (every collected grain left out).
        sets = []
        for name in ("debian-12", "ubuntu-22", "rocky-9"):
            conf = os.path.join(m.dir, f"minion-{name}")
            with open(conf, "w") as f:
                f.write(f"id: {name}\ncachedir: {m.dir}/mc-{name}\npki_dir: {m.dir}/mp-{name}\n"
                        "grains_blacklist: ['*']\ngrains:\n")
                with open(os.path.join(fixtures, name + ".yaml")) as g:
                    for line in g:
                        if line.strip() and not line.lstrip().startswith("#") \
                                and not line.startswith("---"):
                            f.write("  " + line.rstrip("\n") + "\n")
            r = subprocess.run([self.brine, "call", "--local", "-c", conf, "--out", "json",
                                "grains.items"], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise BenchError(f"brine call --local grains.items: {r.stderr.strip()[:300]}")
            got = json.loads(r.stdout)
            sets.append(got.get("local", got))
        db = sqlite3.connect(os.path.join(m.dir, "cache", "jobs.db"))
        now = int(time.time())
        keys, data, reports, last, grain_rows = [], [], [], [], []
        for i in range(n):
            mid = f"inv{i:05d}"
            g = dict(sets[i % 3])
            g["id"] = g["fqdn"] = g["host"] = g["nodename"] = mid
            addr = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            g["ipv4"] = ["127.0.0.1", addr]
            g["ip4_interfaces"] = {"eth0": [addr], "lo": ["127.0.0.1"]}
            keys.append((mid, f"fp{i}", "accepted", "-----BEGIN PUBLIC KEY-----\n", now))
            data.append((mid, json.dumps(g), None, now - i % 3600,
                         "" if i % 3 == 2 else "127.0.0.1:4506"))
            # What the store's put_minion_data() writes beside them: each
            # top-level grain, and a '' row saying the grains are cached.
            grain_rows.append(("", mid, ""))
            grain_rows.extend((k, mid, json.dumps(v, separators=(",", ":")))
                              for k, v in g.items() if k)
            jid = f"2026010100000000{i % 100:04d}"
            status = "failed" if i % 10 == 0 else "changed"
            ret = {"pkg_|-nginx_|-nginx_|-installed": {
                "__id__": "nginx", "name": "nginx", "result": status != "failed",
                "changes": {}, "__run_num__": 0, "__sls__": "web"}}
            started = (now - 3600) * 1000 + i
            reports.append((jid, mid, "state.apply", started, 10.0, 9.0, status, 0,
                            2 if status == "failed" else 0, 1, int(status == "failed"), 0, 0, 1,
                            "{}", "[]", json.dumps(ret)))
            last.append((mid, jid, started))
        with db:
            db.executemany("INSERT INTO keys (id, fingerprint, state, pubkey, updated) "
                           "VALUES (?, ?, ?, ?, ?)", keys)
            db.executemany("INSERT INTO minion_data (id, grains, pillar, last_seen, master) "
                           "VALUES (?, ?, ?, ?, ?)", data)
            db.executemany("INSERT INTO minion_grains (key, id, value) VALUES (?, ?, ?)",
                           grain_rows)
            db.executemany("INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                           "?, ?, ?, ?)", reports)
            db.executemany("INSERT INTO last_reports (minion, jid, started) VALUES (?, ?, ?)",
                           last)
            db.executemany("INSERT INTO report_states (state_id, started, jid, minion, tag, "
                           "function, name, sls, result, changes) VALUES "
                           "('nginx', ?, ?, ?, 'pkg_|-nginx_|-nginx_|-installed', "
                           "'pkg.installed', 'nginx', 'web', ?, 0)",
                           [(r[3], r[0], r[1], int(r[6] != "failed")) for r in reports])
        db.close()
        queries = [
            ("default fields, every minion", ["inventory"], n),
            ("-C 'G@os:Debian and G@osmajorrelease:12'",
             ["inventory", "-C", "G@os:Debian and G@osmajorrelease:12"], (n + 2) // 3),
            ("--fields id,ip4_interfaces.eth0,num_cpus,mem_total,kernelrelease --out csv",
             ["inventory", "--fields", "id,ip4_interfaces.eth0,num_cpus,mem_total,kernelrelease",
              "--out", "csv"], n),
            ("-G os:Rocky --out json", ["inventory", "-G", "os:Rocky", "--out", "json"], n // 3),
        ]
        def cpu_ms():
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (ru.ru_utime + ru.ru_stime) * 1000

        # The master down (the CLI reads the store), then up (it answers
        # from memory, the last runs too).
        for how in ("store", "master"):
            if how == "master":
                m.start()
                # Untimed: the first answer waits for the master's start
                # load of its minion data cache (seconds at 10,000 minions).
                rc, out, err = m.cli("inventory", "--fields", "id")
                if rc != 0:
                    raise BenchError(f"brine inventory: exit {rc}: {err.strip()[:300]}")
            for label, args, expected in queries:
                walls, cpus = [], []
                for _ in range(runs):
                    c0, t0 = cpu_ms(), time.monotonic()
                    rc, out, err = m.cli(*args)
                    walls.append((time.monotonic() - t0) * 1000)
                    cpus.append(cpu_ms() - c0)
                    if rc != 0:
                        raise BenchError(f"brine {' '.join(args)}: exit {rc}: {err.strip()[:300]}")
                    lines = len(json.loads(out)) if "json" in args else len(out.splitlines()) - 1
                    if lines != expected:
                        raise BenchError(f"brine {' '.join(args)}: {lines} minions, expected "
                                         f"{expected}")
                by = "from the store" if how == "store" else "the master answering"
                self.record(f"inventory {label}, {n} minions, {by} (CLI wall)", "ms", walls,
                            "<= 50 ms" if n == 10000 else None)
                # User + system CPU of the process: what the wall would be on
                # an idle machine, whatever else runs beside the benchmark.
                self.record(f"inventory {label}, {n} minions, {by} (CLI CPU)", "ms", cpus)
        walls = []
        for _ in range(runs):
            t0 = time.monotonic()
            rc, out, err = m.cli("report", "states", "--id", "nginx", "--last", "--out", "json",
                                 "--limit", str(n))
            walls.append((time.monotonic() - t0) * 1000)
            if rc != 0 or len(json.loads(out)) != n:
                raise BenchError(f"brine report states: exit {rc}: {err.strip()[:300]}")
        self.record(f"report states --id nginx --last, {n} minions (CLI wall)", "ms", walls)
        m.proc.terminate()
        m.proc.wait(30)

    def plan(self):
        """(group, figures) in order; --only runs one group."""
        if self.quick:
            return [("client", lambda: self.client_start(100)),
                    ("micro", lambda: self.microbench(5, 1)),
                    ("auth", lambda: self.auth_storm(1000, 1)),
                    ("accept", lambda: self.accept_all(1000)),
                    ("swarm", lambda: self.swarm_figures([1, 100, 1000], 5, 5, 3)),
                    ("grains", lambda: self.grains_memory(1000)),
                    ("real", lambda: self.real_minions([10, 50], 5, 12)),
                    ("failover-real", lambda: self.failover_real_minion(5)),
                    ("failover-swarm", lambda: self.failover_swarm(1000, 1, 60)),
                    ("hot", lambda: self.hot_multi_master(1000, 5)),
                    ("publish-hold", lambda: self.publish_hold(1000, 50)),
                    ("store", lambda: self.store_backends(1000, 4, 4, 1000)),
                    ("store-failover", lambda: self.store_failover(1, 100)),
                    ("apply", lambda: self.state_apply(3)),
                    ("swarm-apply", lambda: self.swarm_state_apply(100, 1, 0)),
                    ("schedule", lambda: self.scheduled_runs(1000, 10, 1)),
                    ("cluster", lambda: self.cluster_figures([1000], 3, 3, 1)),
                    ("inventory", lambda: self.inventory(2000, 5))]
        return [("client", lambda: self.client_start(200)),
                ("micro", lambda: self.microbench(20, 5)),
                ("auth", lambda: self.auth_storm(1000, 3)),
                ("auth", lambda: self.auth_storm(10000, 3)),
                ("accept", lambda: self.accept_all(10000)),
                ("swarm", lambda: self.swarm_figures([1, 100, 1000, 10000], 7, 30, 10)),
                ("grains", lambda: self.grains_memory(10000)),
                ("real", lambda: self.real_minions([10, 50], 7, 30)),
                ("failover-real", lambda: self.failover_real_minion(20)),
                ("failover-swarm", lambda: self.failover_swarm(1000, 3, 60)),
                ("failover-swarm", lambda: self.failover_swarm(10000, 1, 120)),
                ("hot", lambda: self.hot_multi_master(1000, 7)),
                ("publish-hold", lambda: self.publish_hold(1000, 200)),
                ("store", lambda: self.store_backends(10000, 8, 10, 10000)),
                ("store-failover", lambda: self.store_failover(3, 1000)),
                ("apply", lambda: self.state_apply(10)),
                ("swarm-apply", lambda: self.swarm_state_apply(1000, 3, 12)),
                ("schedule", lambda: self.scheduled_runs(10000, 60, 2)),
                # 9,000, not 10,000: HAProxy holds two descriptors a minion,
                # and this machine's hard limit is 20,000 a process.
                ("cluster", lambda: self.cluster_figures([1000, 9000], 5, 10, 3)),
                ("inventory", lambda: self.inventory(10000, 15))]

    def run(self):
        started = time.monotonic()
        for group, figures in self.plan():
            if self.only in (None, group):
                figures()
        self.elapsed = time.monotonic() - started

    def report(self):
        cpu = "unknown"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        machine = {"host": platform.node(), "cores": os.cpu_count(), "cpu": cpu,
                   "kernel": platform.release(), "mode": "quick" if self.quick else "full",
                   "seconds": round(self.elapsed, 1)}
        mode = machine["mode"] + (f", only {self.only}" if self.only else "")
        print(f"\nbrine benchmarks ({mode}) on {machine['host']}: "
              f"{machine['cores']} cores, {cpu}; {machine['seconds']} s")
        print(f"{'figure':64} {'runs':>4} {'min':>10} {'median':>10} {'max':>10}  unit  target")
        for r in self.rows:
            print(f"{r['figure']:64} {r['runs']:>4} {r['min']:>10.4g} {r['median']:>10.4g} "
                  f"{r['max']:>10.4g}  {r['unit']:5} {r.get('target', '')}")
        if self.only:
            return  # a part of a run is not a result to keep
        os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
        name = time.strftime("%Y-%m-%d") + "-" + platform.node() + (
            "-quick" if self.quick else "") + ".json"
        path = os.path.join(ROOT, "bench", "results", name)
        with open(path, "w") as f:
            json.dump({"machine": machine, "figures": self.rows}, f, indent=2)
        print(f"results: {path}")


GROUPS = ["client", "micro", "auth", "accept", "swarm", "grains", "real", "failover-real", "failover-swarm",
          "hot", "publish-hold", "store", "store-failover", "apply", "swarm-apply", "schedule",
          "cluster", "inventory"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--brine", default=os.path.join(ROOT, "build/release/src/app/brine"))
    ap.add_argument("--quick", action="store_true", help="bounded CI mode (< 2 minutes)")
    ap.add_argument("--only", choices=GROUPS, metavar="GROUP",
                    help="run one group of figures (of the full run, or of --quick with it): "
                         + ", ".join(GROUPS) + "; prints the table, writes no results file")
    args = ap.parse_args()
    suite = Suite(args.brine, args.quick, args.only)
    try:
        suite.run()
    except BenchError as e:
        print(f"BENCHMARK FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(suite.work, ignore_errors=True)
    suite.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
