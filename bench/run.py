#!/usr/bin/env python3
"""brine's benchmark suite: a real master on loopback with the embedded store,
simulated minions from `brine swarm` and real `brine minion` processes.

Every figure is printed with its number of runs and min/median/max, and the
whole table is written as JSON to bench/results/<date>-<host>.json. A minion
missing from any result fails the run loudly: a benchmark that hides drops
measures nothing.
"""
import argparse
import json
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


def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
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


class Master:
    def __init__(self, brine, workdir, **opts):
        self.brine = brine
        self.dir = tempfile.mkdtemp(prefix="master-", dir=workdir)
        self.port = free_port()
        self.config = os.path.join(self.dir, "master")
        cfg = {"interface": "127.0.0.1", "port": self.port, "pki_dir": "pki",
               "cachedir": "cache", "sock_dir": "run", "auto_accept": "true",
               "log_file": "master.log", "log_level": "warning"}
        cfg.update(opts)
        with open(self.config, "w") as f:
            for k, v in cfg.items():
                f.write(f"{k}: {v}\n")
        self.proc = subprocess.Popen([brine, "master", "-c", self.config],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(os.path.join(self.dir, "run", "master.sock")), 10,
                 "the master's socket")

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

    def stop(self):
        stop_process(self.proc)


class Swarm:
    """`brine swarm` with its stdout parsed as it comes."""

    def __init__(self, brine, master, count, prefix="bench-", rate=0):
        args = [brine, "swarm", "--master", f"127.0.0.1:{master.port}", "--count", str(count),
                "--id-prefix", prefix, "--keys-dir", KEYS, "--acceptance-wait-time", "10"]
        if rate:
            args += ["--connect-rate", str(rate)]
        self.count = count
        self.all_connected = None
        self.all_connected_unix = None
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

    def wait_connected(self, timeout):
        try:
            return wait_for(lambda: self.all_connected, timeout,
                            f"{self.count} swarm minions to connect")
        except BenchError:
            last = self.lines[-1].strip() if self.lines else "no report"
            raise BenchError(f"{self.count} swarm minions did not all connect in {timeout} s "
                             f"(last report: {last}; swarm errors: {self.errors[-3:]})")

    def stop(self):
        stop_process(self.proc)


class RealMinions:
    def __init__(self, brine, master, workdir, count, prefix):
        self.procs = []
        for i in range(count):
            d = tempfile.mkdtemp(prefix=f"{prefix}{i}-", dir=workdir)
            cfg = os.path.join(d, "minion")
            with open(cfg, "w") as f:
                f.write(f"id: {prefix}{i:03d}\nmaster: 127.0.0.1\nmaster_port: {master.port}\n"
                        f"pki_dir: pki\ncachedir: cache\nlog_file: minion.log\n"
                        f"log_level: warning\nacceptance_wait_time: 1\n")
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
    def __init__(self, brine, quick):
        self.brine = os.path.abspath(brine)
        self.quick = quick
        self.rows = []
        self.work = tempfile.mkdtemp(prefix="brine-bench-")

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

    def accept_all(self, n):
        """`brine key accept --all` with n pending minions: the CLI's time, the
        time until all serve, and the worst test.ping of an already accepted
        minion meanwhile (the master must not stall other work)."""
        m = Master(self.brine, self.work, auto_accept="false")
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
            self.record(f"key accept --all of {n} pending: CLI", "s", [cli])
            self.record(f"key accept --all of {n} pending: all serving", "s",
                        [s.all_connected_unix - t0_unix])
            self.record(f"test.ping of another minion during accept --all of {n}", "s", worst)
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
        finally:
            for s in swarms:
                s.stop()
            m.stop()

    def returns_per_second(self, m, n, seconds):
        total, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            rc, out, err = m.cli("cmd", "-t", "30", "--out", "json", "*", "test.echo", "x")
            got = json.loads(out) if out.strip() else {}
            if rc != 0 or len(got) != n:
                raise BenchError(f"test.echo: {len(got)} of {n} returned: {err.strip()[:200]}")
            total += len(got)
        elapsed = time.monotonic() - t0
        self.record(f"returns per second, sequential jobs against {n} minions", "1/s",
                    [total / elapsed])

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

    def run(self):
        started = time.monotonic()
        if self.quick:
            self.auth_storm(1000, 1)
            self.accept_all(1000)
            self.swarm_figures([1, 100, 1000], 5, 5, 3)
            self.real_minions([10, 50], 5, 12)
        else:
            self.auth_storm(1000, 3)
            self.auth_storm(10000, 3)
            self.accept_all(10000)
            self.swarm_figures([1, 100, 1000, 10000], 7, 30, 10)
            self.real_minions([10, 50], 7, 30)
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
        print(f"\nbrine benchmarks ({machine['mode']}) on {machine['host']}: "
              f"{machine['cores']} cores, {cpu}; {machine['seconds']} s")
        print(f"{'figure':58} {'runs':>4} {'min':>10} {'median':>10} {'max':>10}  unit  target")
        for r in self.rows:
            print(f"{r['figure']:58} {r['runs']:>4} {r['min']:>10.4g} {r['median']:>10.4g} "
                  f"{r['max']:>10.4g}  {r['unit']:5} {r.get('target', '')}")
        os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
        name = time.strftime("%Y-%m-%d") + "-" + platform.node() + (
            "-quick" if self.quick else "") + ".json"
        path = os.path.join(ROOT, "bench", "results", name)
        with open(path, "w") as f:
            json.dump({"machine": machine, "figures": self.rows}, f, indent=2)
        print(f"results: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--brine", default=os.path.join(ROOT, "build/release/src/app/brine"))
    ap.add_argument("--quick", action="store_true", help="bounded CI mode (< 2 minutes)")
    args = ap.parse_args()
    suite = Suite(args.brine, args.quick)
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
