"""What the cluster suites share: masters of one cluster on a fresh
PostgreSQL database behind a real HAProxy, minions that know only the
balancer, and what a test reads of them."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import unittest

from harness import BRINE_BIN, SLACK, MasterSet, free_port, wait_for, write_config
from haproxy import LoadBalancer, require_haproxy
from pgserver import PostgresServer, require_postgres

PG = None


def start_store():
    """setUpModule of a cluster suite: one PostgreSQL for its clusters."""
    global PG
    require_postgres()
    require_haproxy()
    PG = PostgresServer()
    PG.start()


def stop_store():
    if PG is not None:
        PG.cleanup()


class ClusterTestCase(unittest.TestCase):
    databases = 0

    def cluster(self, n=3, idle=60, start=True, cleanup=None, metrics=False, **opts):
        """`n` masters of cluster `c1` on a fresh database, the cluster key
        made by `brine cluster init` on the first and copied to the others,
        behind a load balancer with idle timeout `idle`. `cleanup` registers
        their stops: self.addCleanup by default, a class's addClassCleanup
        for a cluster made in setUpClass. `metrics`: each master serves
        its Prometheus endpoint on a port of its own (options
        "metrics_port")."""
        cleanup = cleanup or self.addCleanup
        ClusterTestCase.databases += 1
        db = "brine_cluster_%d_%d" % (os.getpid(), ClusterTestCase.databases)
        PG.create_database(db)
        pw = os.path.join(PG.dir, db + ".pw")
        PG.password_file(pw)
        self.store = {"store": PG.url(db), "store_password_file": pw}
        master_opts = dict(self.store)
        master_opts.update({"cluster_id": "c1", "cluster_pki_dir": "cluster"})
        master_opts.update(opts)
        ms = MasterSet(n, master_opts=master_opts, shared_key=False, start=False)
        cleanup(ms.stop)
        for m in ms.masters:
            m.options["cluster_port"] = free_port()
            if metrics:
                m.options["metrics_port"] = free_port()
            write_config(m.config, m.options)
        rc, out, err = ms.masters[0].brine("cluster", "init")
        self.assertEqual(rc, 0, err)
        self.assertIn("made the cluster key of c1", out)
        self.cluster_finger = re.search(r"fingerprint: (\S+)", out).group(1)
        for m in ms.masters[1:]:
            shutil.copytree(os.path.join(ms.masters[0].dir, "cluster"),
                            os.path.join(m.dir, "cluster"))
        lb = LoadBalancer([m.port for m in ms.masters], idle_timeout=idle)
        cleanup(lb.stop)
        if start:
            for m in ms.masters:
                m.start()
            lb.start()
        return ms, lb

    def add_minions(self, ms, lb, ids, **opts):
        options = {"master_alive_interval": 6}
        options.update(opts)
        for mid in ids:
            ms.add_minion(mid, masters=["127.0.0.1:%d" % lb.port], **options)

    def start_swarm(self, ms, lb, count, prefix):
        """`brine swarm` of `count` minions named PREFIX… that know only the
        balancer (their keys accepted by auto_accept); stopped at cleanup.
        Returns the list its output lines are appended to."""
        proc = subprocess.Popen(
            [BRINE_BIN, "swarm", "--master", "127.0.0.1:%d" % lb.port, "--count", str(count),
             "--id-prefix", prefix, "--keys-dir", os.path.join(ms.dir, "swarm-keys"),
             "--acceptance-wait-time", "1", "--seconds", str(int(300 * SLACK))],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        lines = []
        reader = threading.Thread(target=lambda: [lines.append(l) for l in proc.stdout],
                                  daemon=True)
        reader.start()

        def stop():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
            reader.join(timeout=5)
            proc.stdout.close()
        self.addCleanup(stop)
        return lines

    def served_by(self, ms, mid, since=None):
        """The master whose log last shows `mid` connecting (after `since`,
        a {master name: log offset} map)."""
        best = None
        for m in ms.masters:
            text = m.daemon.log_since((since or {}).get(m.name, 0))
            at = text.rfind("minion %s connected from" % mid)
            if at >= 0 and (best is None or at > best[1]):
                best = (m, at)
        return best[0] if best else None

    def answered(self, master, ids, timeout=30):
        def ok():
            rc, got, _ = master.ping_json(timeout=3)
            return all(got.get(i) is True for i in ids)
        wait_for(ok, timeout * SLACK, "every minion to answer %s" % master.name)

    def status(self, master):
        rc, out, err = master.brine("cluster", "status", "--json")
        self.assertIn(rc, (0, 2), err)
        return json.loads(out)

    def publish_async(self, master, jids, fun, *args):
        rc, out, err = master.brine("cmd", "--async", "*", fun, *args)
        found = re.search(r"job ID: (\d+)", out)
        self.assertTrue(rc == 0 and found, "%s: rc %d %s %s" % (master.name, rc, out, err))
        jids.append(found.group(1))
