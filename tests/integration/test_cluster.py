#!/usr/bin/env python3
"""The master cluster: masters behind a real HAProxy (TCP mode, round
robin) on one real PostgreSQL store act as one. A job published on any
master reaches the minions of every master and its returns stream back; a
master killed with SIGKILL loses nothing; a removed master's minions move; a
master with another cluster key is refused; the balancer's idle timeout
never cuts a healthy minion. Everything runs on loopback."""

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import unittest

from harness import (BRINE_BIN, SLACK, MasterNode, MasterSet, frame, free_port, logged_at,
                     make_client_cert, read_frames, read_until_closed, tail, tls_context,
                     wait_for, wait_log, write_config)
from haproxy import LoadBalancer, require_haproxy
from pgserver import PostgresServer, require_postgres

PG = None


def setUpModule():
    global PG
    require_postgres()
    require_haproxy()
    PG = PostgresServer()
    PG.start()


def tearDownModule():
    if PG is not None:
        PG.cleanup()


class ClusterTestCase(unittest.TestCase):
    databases = 0

    def cluster(self, n=3, idle=60, start=True, **opts):
        """`n` masters of cluster `c1` on a fresh database, the cluster key
        made by `brine cluster init` on the first and copied to the others,
        behind a load balancer with idle timeout `idle`."""
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
        self.addCleanup(ms.stop)
        for m in ms.masters:
            m.options["cluster_port"] = free_port()
            write_config(m.config, m.options)
        rc, out, err = ms.masters[0].brine("cluster", "init")
        self.assertEqual(rc, 0, err)
        self.assertIn("made the cluster key of c1", out)
        self.cluster_finger = re.search(r"fingerprint: (\S+)", out).group(1)
        for m in ms.masters[1:]:
            shutil.copytree(os.path.join(ms.masters[0].dir, "cluster"),
                            os.path.join(m.dir, "cluster"))
        lb = LoadBalancer([m.port for m in ms.masters], idle_timeout=idle)
        self.addCleanup(lb.stop)
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


class OneClusterTest(ClusterTestCase):

    def test_a_job_published_on_any_master_reaches_every_minion(self):
        ms, lb = self.cluster(3)
        ids = ["m%02d" % i for i in range(10)]
        self.add_minions(ms, lb, ids)
        # Round robin spreads ten connections over three masters.
        wait_for(lambda: all(self.served_by(ms, i) for i in ids), 30 * SLACK,
                 "every minion to connect through the balancer")
        spread = {m.name: [i for i in ids if self.served_by(ms, i) is m] for m in ms.masters}
        for name, held in spread.items():
            self.assertTrue(held, "round robin left %s without minions: %s" % (name, spread))
        # Every master presents the cluster key: one pinned fingerprint.
        for mid in ids:
            log = ms.minions[mid].log()
            self.assertNotIn("not the pinned master key", log)
        for m in ms.masters:
            rc, got, err = m.ping_json(timeout=20)
            self.assertEqual(rc, 0, "%s: %s %s" % (m.name, got, err))
            self.assertEqual(sorted(got), ids)
            self.assertTrue(all(v is True for v in got.values()), got)
        # Each master received the returns of its own minions for every job.
        st = self.status(ms.masters[0])
        self.assertEqual(st["cluster_finger"], self.cluster_finger)
        members = {x["name"]: x for x in st["members"]}
        self.assertEqual(len(members), 3, st)
        for m in ms.masters:
            x = members["%s:%d" % (os.uname().nodename, m.port)]
            self.assertTrue(x["alive"], x)
            wait_for(lambda: self.status(ms.masters[0])["members"] and
                     {y["name"]: y for y in self.status(ms.masters[0])["members"]}[x["name"]]
                     ["stats"].get("returns", 0) >= 3 * len(spread[m.name]),
                     10 * SLACK, "%s to report the returns it received" % m.name)
        # Every member links to every other over mutual TLS on its peer port.
        for m in ms.masters:
            def linked():
                rows = self.status(m)["members"]
                return len(rows) == 3 and all(
                    x["self"] or (x["link"] and x["link"]["up"]) for x in rows)
            wait_for(linked, 15 * SLACK, "%s linked to both other members" % m.name)
        rc, out, err = ms.masters[1].brine("cluster", "status")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(re.findall(r" yes +up [\d.]+ ms", out)), 2, out)
        # The job cache is one: the same answer on every master.
        jobs = [sorted(j["jid"] for j in m.jobs("test.ping")) for m in ms.masters]
        self.assertEqual(len(jobs[0]), 3)
        self.assertEqual(jobs[0], jobs[1])
        self.assertEqual(jobs[0], jobs[2])
        # Minions on the other members count as connected: a batch reaches
        # them, and those that do not answer in time are "[No response]".
        a = ms.masters[0]
        rc, out, err = a.brine("cmd", "--batch", "4", "--out", "json", "*", "test.ping")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(json.loads(out)), ids)
        self.assertNotIn("Not connected", out + err)
        rc, out, err = a.brine("cmd", "-t", "1", "*", "test.sleep", "3")
        self.assertNotEqual(rc, 0, out)
        self.assertEqual(out.count("Minion did not return. [No response]"), len(ids), out)


class SwarmThroughTheBalancerTest(ClusterTestCase):

    def test_a_thousand_swarm_minions_answer_every_master(self):
        ms, lb = self.cluster(3)
        count = int(os.environ.get("BRINE_CLUSTER_SWARM", "1000"))
        keys = os.path.join(ms.dir, "swarm-keys")
        proc = subprocess.Popen(
            [BRINE_BIN, "swarm", "--master", "127.0.0.1:%d" % lb.port, "--count", str(count),
             "--id-prefix", "sw-", "--keys-dir", keys, "--acceptance-wait-time", "1",
             "--seconds", str(int(300 * SLACK))],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        lines = []
        reader = threading.Thread(target=lambda: [lines.append(l) for l in proc.stdout],
                                  daemon=True)
        reader.start()

        def stop():
            if proc.poll() is None:
                proc.send_signal(2)
            proc.wait(timeout=30)
            reader.join(timeout=5)
        self.addCleanup(stop)
        wait_for(lambda: any(re.search(r"^all %d connected" % count, l) for l in list(lines)),
                 120 * SLACK, "all %d swarm minions connected through the balancer" % count)
        for m in ms.masters:
            rc, out, err = m.brine("cmd", "-t", str(int(30 * SLACK)), "--out", "json", "sw-*",
                                   "test.ping", timeout=60)
            self.assertEqual(rc, 0, "%s: %s" % (m.name, tail(err)))
            got = json.loads(out)
            self.assertEqual(len(got), count)
            self.assertTrue(all(v is True for v in got.values()))
        members = self.status(ms.masters[0])["members"]
        for x in members:
            # Each master received returns: its share of the swarm, three jobs.
            self.assertGreater(x["stats"].get("connected", 0), 0, x)


class FailureTest(ClusterTestCase):

    def publish_async(self, master, jids, fun, *args):
        rc, out, err = master.brine("cmd", "--async", "*", fun, *args)
        found = re.search(r"job ID: (\d+)", out)
        self.assertTrue(rc == 0 and found, "%s: rc %d %s %s" % (master.name, rc, out, err))
        jids.append(found.group(1))

    def test_a_master_killed_mid_job_loses_no_return(self):
        ms, lb = self.cluster(3)
        ids = ["k%d" % i for i in range(6)]
        self.add_minions(ms, lb, ids)
        a, b, victim = ms.masters
        self.answered(a, ids)
        on_victim = [i for i in ids if self.served_by(ms, i) is victim]
        self.assertTrue(on_victim, "round robin gave the victim no minion")
        jids = []
        # A CLI attached to a survivor while the victim dies: it still
        # receives every return, those of the victim's minions included.
        cli = subprocess.Popen([BRINE_BIN, "cmd", "-c", a.config, "-t", str(int(60 * SLACK)),
                                "--out", "json", "*", "test.sleep", "2"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        for n in range(200):
            if n == 60:
                victim.kill()
            if n % 2:
                self.publish_async(a if n % 4 == 1 else b, jids, "test.sleep", "0.2")
            else:
                self.publish_async(a if n % 4 == 0 else b, jids, "cmd.run", "echo %d" % n)
        out, err = cli.communicate(timeout=120 * SLACK)
        self.assertEqual(cli.returncode, 0, err)
        self.assertEqual(sorted(json.loads(out)), ids)
        # Every (jid, minion) ends as a return: the victim's minions re-sent
        # what it had not acknowledged, through the survivors.
        db = self.store["store"].rsplit("/", 1)[1].split("?")[0]

        def complete():
            rows = PG.psql("SELECT count(*) FROM returns WHERE jid = ANY(ARRAY[%s])"
                           % ",".join("'%s'" % j for j in jids), db)
            return int(rows) == len(ids) * len(jids)
        wait_for(complete, 120 * SLACK, "every return of 200 jobs from %d minions" % len(ids))
        lost = PG.psql("SELECT count(*) FROM undelivered WHERE jid = ANY(ARRAY[%s])"
                       % ",".join("'%s'" % j for j in jids), db)
        self.assertEqual(int(lost), 0)
        # Both survivors answer alike for every job.
        for m in (a, b):
            listed = {j["jid"]: j for j in m.jobs()}
            for jid in jids:
                self.assertEqual(sorted(listed[jid]["returned"]), ids, (m.name, listed[jid]))
        # The victim, restarted, rejoins and takes new connections.
        since = {m.name: m.daemon.mark() for m in ms.masters}
        victim.start()
        wait_for(lambda: self.status(a)["members"] and all(
            x["alive"] for x in self.status(a)["members"]), 30 * SLACK, "the victim alive again")
        more = ["n%d" % i for i in range(3)]
        self.add_minions(ms, lb, more)
        wait_for(lambda: all(self.served_by(ms, i, since) for i in more), 30 * SLACK,
                 "the new minions to connect")
        self.assertTrue(any(self.served_by(ms, i, since) is victim for i in more) or
                        victim.daemon.count(r"minion k\d connected from", since[victim.name]) > 0,
                        "the restarted master took no connection")
        self.answered(victim, ids + more)

    def test_a_removed_master_hands_its_minions_to_the_others(self):
        ms, lb = self.cluster(3)
        ids = ["r%d" % i for i in range(6)]
        self.add_minions(ms, lb, ids)
        a, b, leaving = ms.masters
        self.answered(a, ids)
        self.assertTrue(any(self.served_by(ms, i) is leaving for i in ids))
        name = "%s:%d" % (os.uname().nodename, leaving.port)
        rc, out, err = a.brine("cluster", "remove-peer", name)
        self.assertEqual(rc, 0, err)
        self.assertIn("removed " + name, out)
        self.assertEqual(leaving.daemon.wait_exit(30 * SLACK), 0, tail(leaving.daemon.log()))
        self.assertIn("was removed", leaving.daemon.log())
        self.answered(a, ids)
        rows = {x["name"]: x for x in self.status(a)["members"]}
        self.assertTrue(rows[name]["removed"])
        rc, out, err = a.brine("cluster", "remove-peer", "nobody:1")
        self.assertNotEqual(rc, 0)
        self.assertIn("no master named nobody:1", err)

    def test_a_key_decision_on_one_master_cuts_a_minion_on_another_within_a_second(self):
        ms, lb = self.cluster(2)
        ids = ["d%d" % i for i in range(4)]
        self.add_minions(ms, lb, ids)
        a, b = ms.masters
        self.answered(a, ids)
        victim = next(i for i in ids if self.served_by(ms, i) is b)
        since, since_a = b.daemon.mark(), a.daemon.mark()
        rc, out, err = a.brine("key", "reject", victim)
        self.assertEqual(rc, 0, err)
        # Within a second by the masters' own records: the decision's line on
        # one, the cut on the other.
        closing = r"minion %s at .*: key rejected; closing" % victim
        wait_log(b.daemon, closing, 5, since)
        took = (logged_at(b.daemon, closing, since)
                - logged_at(a.daemon, r"keys: 1 rejected by the CLI: %s$" % victim, since_a))
        self.assertLess(took, 1 * SLACK)
        rc, got, err = a.ping_json(timeout=5)
        self.assertNotIn(victim, got)
        # Delete: the same, for a minion on the other member.
        gone = next(i for i in ids if i != victim and self.served_by(ms, i) is b)
        since, since_a = b.daemon.mark(), a.daemon.mark()
        rc, out, err = a.brine("key", "delete", gone)
        self.assertEqual(rc, 0, err)
        closing = r"minion %s at .*: key deleted on the master; closing" % gone
        wait_log(b.daemon, closing, 5, since)
        took = (logged_at(b.daemon, closing, since)
                - logged_at(a.daemon, r"keys: 1 deleted by the CLI: %s$" % gone, since_a))
        self.assertLess(took, 1 * SLACK)


class MembershipTest(ClusterTestCase):

    def test_a_master_added_while_jobs_run_serves_minions_with_no_minion_change(self):
        ms, lb = self.cluster(3, start=False)
        a, b, new = ms.masters
        a.start()
        b.start()
        lb.set_servers([a.port, b.port])
        lb.start()
        ids = ["a%d" % i for i in range(4)]
        self.add_minions(ms, lb, ids)
        self.answered(a, ids)
        jids, failures = [], []
        done = threading.Event()

        def loop():
            while not done.is_set() and len(jids) < 400:
                rc, out, err = a.brine("cmd", "--async", "*", "test.ping")
                found = re.search(r"job ID: (\d+)", out)
                if rc == 0 and found:
                    jids.append(found.group(1))
                else:
                    failures.append(err)
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        try:
            # The new master needs the cluster key and nothing else: the
            # others learn of it from the store.
            new.start()
            wait_for(lambda: len(self.status(a)["members"]) == 3 and all(
                x["alive"] for x in self.status(a)["members"]), 20 * SLACK,
                "the running masters to see the new one")
            lb.set_servers([a.port, b.port, new.port])
            lb.reload()
            since = {m.name: m.daemon.mark() for m in ms.masters}
            more = ["b%d" % i for i in range(6)]
            self.add_minions(ms, lb, more)
            wait_for(lambda: all(self.served_by(ms, i, since) for i in more), 30 * SLACK,
                     "the new minions to connect")
            self.assertTrue(any(self.served_by(ms, i, since) is new for i in more),
                            "no new minion landed on the new master")
            self.answered(new, ids + more)
            count = len(jids)
            wait_for(lambda: len(jids) >= count + 20, 60 * SLACK, "20 more jobs afterwards")
        finally:
            done.set()
            t.join(timeout=120)
        self.assertEqual(failures, [])
        db = self.store["store"].rsplit("/", 1)[1].split("?")[0]

        # Later jobs target the new minions too: each job against its own
        # expected set.
        def incomplete():
            return int(PG.psql(
                "SELECT count(*) FROM jobs j WHERE j.jid = ANY(ARRAY[%s]) AND "
                "(SELECT count(*) FROM returns r WHERE r.jid = j.jid) < "
                "json_array_length(j.minions::json)" % ",".join("'%s'" % j for j in jids), db))
        wait_for(lambda: incomplete() == 0, 60 * SLACK,
                 "every return of the %d jobs published meanwhile" % len(jids))

    def test_a_member_that_loses_the_store_refuses_publishes_until_it_is_back(self):
        ms, lb = self.cluster(2)
        ids = ["s%d" % i for i in range(2)]
        self.add_minions(ms, lb, ids)
        a = ms.masters[0]
        self.answered(a, ids)
        PG.stop()
        try:
            def refused():
                rc, out, err = a.brine("cmd", "--async", "*", "test.ping")
                return rc != 0 and "takes no publishes until it does" in err and err
            err = wait_for(refused, 30 * SLACK, "a publish refused while the store is down")
            self.assertIn("does not answer", err)
            wait_log(a.daemon, r"the store does not answer .*takes no publishes", 10 * SLACK)
        finally:
            PG.start_again()
        wait_log(a.daemon, r"the store answers again; taking publishes", 60 * SLACK)
        self.answered(a, ids)


class AcceptTest(ClusterTestCase):

    def test_a_key_accepted_on_one_master_serves_a_minion_waiting_on_another(self):
        ms, lb = self.cluster(2, auto_accept=False)
        a, b = ms.masters
        ids = ["p%d" % i for i in range(4)]
        self.add_minions(ms, lb, ids)
        wait_for(lambda: sorted(a.keys().get("pending", [])) == ids, 30 * SLACK,
                 "four pending keys on every master")
        for mid in ids:
            rc, out, err = a.brine("key", "accept", mid)
            self.assertEqual(rc, 0, err)
        # Those waiting on b are served as soon as a's decision reaches it.
        self.answered(b, ids)


class IdleTest(ClusterTestCase):

    def test_the_balancers_idle_timeout_never_cuts_a_healthy_minion(self):
        # HAProxy cuts a connection idle for 5 s; the minions' pings every
        # master_alive_interval / 2 = 3 s keep theirs busy.
        ms, lb = self.cluster(2, idle=5)
        ids = ["i%d" % i for i in range(3)]
        self.add_minions(ms, lb, ids, master_alive_interval=6)
        self.answered(ms.masters[0], ids)
        since = {m.name: m.daemon.mark() for m in ms.masters}
        minion_since = {i: ms.minions[i].mark() for i in ids}
        time.sleep(60)  # the idle minute itself is what is tested
        for m in ms.masters:
            self.assertEqual(m.daemon.count(r"connected from", since[m.name]), 0,
                             tail(m.daemon.log_since(since[m.name])))
        for i in ids:
            text = ms.minions[i].log_since(minion_since[i])
            self.assertNotRegex(text, r"(?i)reconnect|closed|lost", text)
        self.answered(ms.masters[1], ids, timeout=10)


class RefusalTest(ClusterTestCase):

    def test_a_master_with_another_cluster_key_refuses_to_join(self):
        ms, lb = self.cluster(2)
        intruder = ms.masters[1]
        intruder.daemon.terminate()
        shutil.rmtree(os.path.join(intruder.dir, "cluster"))
        rc, out, err = intruder.brine("cluster", "init")
        self.assertEqual(rc, 0, err)
        since = intruder.daemon.mark()
        intruder.daemon.start()
        self.assertNotEqual(intruder.daemon.wait_exit(30 * SLACK), None, "it did not stop")
        self.assertNotEqual(intruder.daemon.returncode, 0)
        intruder.daemon.expect_clean_exit = False  # refused on purpose
        text = intruder.daemon.log_since(since)
        self.assertIn("presents cluster key", text)
        self.assertIn("copy cluster_pki_dir from a running master", text)

    def test_a_peer_without_the_cluster_key_is_refused_on_the_peer_port(self):
        ms, lb = self.cluster(1)
        (m,) = ms.masters
        d = self.enterContext_tmp()
        cert, key = make_client_cert(d)
        since = m.daemon.mark()
        with socket.create_connection(("127.0.0.1", m.options["cluster_port"]), timeout=10) as raw:
            with tls_context(cert, key).wrap_socket(raw) as s:
                s.sendall(frame(16, 0, {"cluster_id": "c1", "name": "intruder:1",
                                        "peer": "127.0.0.1:1", "finger": "00",
                                        "cluster_finger": self.cluster_finger,
                                        "proof": "00" * 64}))
                got, closed = read_until_closed(s, 10 * SLACK)
        self.assertTrue(closed, "the master kept the intruder's link open")
        frames = read_frames(got)
        self.assertEqual(frames[0]["t"], 1, frames)  # error
        self.assertIn("refused", frames[0]["b"]["message"])
        wait_log(m.daemon, r"peer connection from .* refused: its TLS key is not the key its "
                 r"hello names", 5 * SLACK, since)

    def test_a_cluster_without_the_shared_store_is_refused_naming_the_option(self):
        d = self.enterContext_tmp()
        conf = os.path.join(d, "master.conf")
        write_config(conf, {"cluster_id": "c1", "pki_dir": "pki", "cachedir": "cache",
                            "sock_dir": "sock"})
        p = subprocess.run([BRINE_BIN, "master", "-c", conf], capture_output=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0)
        err = p.stderr.decode()
        self.assertIn("cluster_id is set but store is sqlite", err)
        self.assertIn("store: postgresql://", err)
        rc = subprocess.run([BRINE_BIN, "cluster", "-c", conf, "status"], capture_output=True,
                            timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(rc.returncode, 0)

    def enterContext_tmp(self):
        import tempfile
        d = tempfile.mkdtemp(prefix="brine-cluster-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


if __name__ == "__main__":
    unittest.main()
