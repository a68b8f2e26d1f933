#!/usr/bin/env python3
"""The master cluster: masters behind a real HAProxy (TCP mode, round
robin) on one real PostgreSQL store act as one. A job published on any
master reaches the minions of every master and its returns stream back; a
removed master's minions move; a master with another cluster key is
refused. The long tests (a master killed mid-job, the idle minute) are in
test_cluster_long. Everything runs on loopback."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import unittest

from harness import (BRINE_BIN, SLACK, figure, frame, make_client_cert, read_frames,
                     read_until_closed, scrape, sockets_of, tail, tls_context, wait_for,
                     wait_log, write_config)
import clustercase
from clustercase import ClusterTestCase

setUpModule = clustercase.start_store
tearDownModule = clustercase.stop_store


class OneClusterTest(ClusterTestCase):

    def test_real_and_swarm_minions_answer_a_job_published_on_any_master(self):
        """The issue's own test: three masters behind HAProxy (TCP, round
        robin), ten real minions and 1,000 swarm minions that know only the
        balancer; test.ping published on each master returns every one of
        them, and every master received returns."""
        ms, lb = self.cluster(3, metrics=True)
        ids = ["m%02d" % i for i in range(10)]
        count = int(os.environ.get("BRINE_CLUSTER_SWARM", "1000"))
        self.add_minions(ms, lb, ids)
        swarm = self.start_swarm(ms, lb, count, "sw-")
        # Round robin spreads the connections over three masters.
        wait_for(lambda: all(self.served_by(ms, i) for i in ids), 30 * SLACK,
                 "every minion to connect through the balancer")
        wait_for(lambda: any(re.search(r"^all %d connected" % count, l) for l in list(swarm)),
                 120 * SLACK, "all %d swarm minions connected through the balancer" % count)
        spread = {m.name: [i for i in ids if self.served_by(ms, i) is m] for m in ms.masters}
        for name, held in spread.items():
            self.assertTrue(held, "round robin left %s without minions: %s" % (name, spread))
        # Every master presents the cluster key: one pinned fingerprint.
        for mid in ids:
            log = ms.minions[mid].log()
            self.assertNotIn("not the pinned master key", log)
        for m in ms.masters:
            rc, out, err = m.brine("cmd", "-t", str(int(30 * SLACK)), "--out", "json", "*",
                                   "test.ping", timeout=int(30 * SLACK) + 60)
            self.assertEqual(rc, 0, "%s: %s" % (m.name, tail(err)))
            got = json.loads(out)
            self.assertEqual(sorted(i for i in got if not i.startswith("sw-")), ids, m.name)
            self.assertEqual(len([i for i in got if i.startswith("sw-")]), count, m.name)
            wrong = {i: v for i, v in got.items() if v is not True}
            self.assertFalse(wrong, "%s: minions that did not return True: %s"
                             % (m.name, dict(list(wrong.items())[:10])))
        # Each master received the returns of the minions connected to it,
        # for every job: the real ones, and the swarm minions that connected
        # to it and to no other master (one that moved may have returned to
        # either).
        st = self.status(ms.masters[0])
        self.assertEqual(st["cluster_finger"], self.cluster_finger)
        members = {x["name"]: x for x in st["members"]}
        self.assertEqual(len(members), 3, st)
        seen = {m.name: set(re.findall(r"minion (sw-\S+) connected from",
                                       m.daemon.log_since(0))) for m in ms.masters}
        for m in ms.masters:
            x = members["%s:%d" % (os.uname().nodename, m.port)]
            self.assertTrue(x["alive"], x)
            own = seen[m.name].difference(*[v for k, v in seen.items() if k != m.name])
            self.assertTrue(own, "round robin left %s without swarm minions" % m.name)
            expect = 3 * (len(spread[m.name]) + len(own))

            def received():
                rows = {y["name"]: y for y in self.status(ms.masters[0])["members"]}
                return rows[x["name"]]["stats"].get("returns", 0) >= expect
            wait_for(received, 10 * SLACK,
                     "%s to report the %d returns it received" % (m.name, expect))
        # The returns the other members received reach each member through
        # the store's change feed, and are counted there: with its own, at
        # least every return of the three jobs (a re-sent one counts again).
        every = 3 * (len(ids) + count)
        for m in ms.masters:
            def counted():
                text = scrape(m.options["metrics_port"])
                own = figure(text, "brine_returns_received_total")
                feed = figure(text, "brine_feed_returns_total")
                return (own, feed) if feed > 0 and own + feed >= every else None
            own, feed = wait_for(counted, 10 * SLACK,
                                 "%s to count %d returns, its own and the feed's" % (m.name, every))
            self.assertLess(own, every, "%s received every return itself" % m.name)
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
        rc, out, err = a.brine("cmd", "--batch", "4", "--out", "json", "m*", "test.ping")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(json.loads(out)), ids)
        self.assertNotIn("Not connected", out + err)
        rc, out, err = a.brine("cmd", "-t", "1", "m*", "test.sleep", "3")
        self.assertNotEqual(rc, 0, out)
        self.assertEqual(out.count("Minion did not return. [No response]"), len(ids), out)


class FailureTest(ClusterTestCase):

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
        # At once, by the masters' own records rather than by their clocks
        # (a time difference fails on a loaded machine; bench/ has figures):
        # the decision on one, then on the other the change feed's word of
        # that one key and the cut it caused, with no resync between them.
        closing = r"minion %s at .*: key rejected; closing" % victim
        wait_log(b.daemon, closing, 5, since)
        self.assert_cut_by_the_feed(a, b, victim, "rejected", closing, since, since_a)
        rc, got, err = a.ping_json(timeout=5)
        self.assertNotIn(victim, got)
        # Delete: the same, for a minion on the other member.
        gone = next(i for i in ids if i != victim and self.served_by(ms, i) is b)
        since, since_a = b.daemon.mark(), a.daemon.mark()
        rc, out, err = a.brine("key", "delete", gone)
        self.assertEqual(rc, 0, err)
        closing = r"minion %s at .*: key deleted on the master; closing" % gone
        wait_log(b.daemon, closing, 5, since)
        self.assert_cut_by_the_feed(a, b, gone, "deleted", closing, since, since_a)

    def assert_cut_by_the_feed(self, a, b, minion, verb, closing, since, since_a):
        """b closed `minion` because the change feed told it of a's decision:
        a logged the decision, b logged the feed's notice of that one key
        (store_sync's per-key path, taken only for a notification) before the
        close, and b reloaded no keys meanwhile (the path of a resync after
        an interrupted feed, the only other way b learns of a key)."""
        self.assertIn("keys: 1 %s by the CLI: %s\n" % (verb, minion), a.daemon.log_since(since_a))
        log = b.daemon.log_since(since)
        notice = re.search(r"minion %s: key %s on master %s:%d\n"
                           % (re.escape(minion), verb, re.escape(os.uname().nodename), a.port), log)
        self.assertTrue(notice, log)
        cut = re.compile(closing).search(log, notice.end())
        self.assertTrue(cut, "b closed %s before the feed's notice:\n%s" % (minion, log))
        self.assertNotIn("keys changed on other masters meanwhile", log[:cut.end()])


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
            return int(clustercase.PG.psql(
                "SELECT count(*) FROM jobs j WHERE j.jid = ANY(ARRAY[%s]) AND "
                "(SELECT count(*) FROM returns r WHERE r.jid = j.jid) < "
                "json_array_length(j.minions::json)" % ",".join("'%s'" % j for j in jids), db))
        wait_for(lambda: incomplete() == 0, 60 * SLACK,
                 "every return of the %d jobs published meanwhile" % len(jids))

    def test_a_member_that_loses_the_store_holds_publishes_until_it_is_back(self):
        """A publish while the store does not answer waits for it, up to
        store_failover_wait (5 s here) from its own arrival: recorded and
        sent once the store is back, or, past the bound, told why; never
        refused at once."""
        ms, lb = self.cluster(2, metrics=True, store_failover_wait=5)
        ids = ["s%d" % i for i in range(2)]
        self.add_minions(ms, lb, ids)
        a = ms.masters[0]
        self.answered(a, ids)

        def publish(out):
            out.append(a.brine("cmd", "--async", "*", "test.ping", timeout=60))

        # Past the bound: the store stays down; the CLI is told, with the
        # bound and the reason.
        since = a.daemon.mark()
        clustercase.PG.stop()
        try:
            wait_log(a.daemon, r"the store does not answer .*publishes wait for it up to "
                     r"store_failover_wait \(5 s\) each", 10 * SLACK, since)
            got = []
            publish(got)
            rc, out, err = got[0]
            self.assertNotEqual(rc, 0, out)
            self.assertIn("the job could not be recorded, so it was not sent: the store did not "
                          "answer within store_failover_wait (5 s)", err)
            self.assertNotIn("reconnecting after a lost connection", err)

            # Within the bound: a publish made while the store is down is
            # still waiting when it comes back, and is recorded then.
            got = []
            waiting = threading.Thread(target=publish, args=(got,))
            waiting.start()
            self.addCleanup(waiting.join, 60)
            wait_for(lambda: figure(scrape(a.options["metrics_port"]),
                                    "brine_publishes_recording") == 1, 10 * SLACK,
                     "the publish to wait for the store (brine_publishes_recording 1)")
        finally:
            clustercase.PG.start_again()
        waiting.join(60)
        self.assertEqual(len(got), 1, "the publish made while the store was down did not end")
        rc, out, err = got[0]
        self.assertEqual(rc, 0, err)
        jid = re.search(r"job ID: (\d{20})", out)
        self.assertIsNotNone(jid, out)
        wait_log(a.daemon, r"the store answers again", 60 * SLACK, since)
        wait_for(lambda: sorted(a.job(jid.group(1)).get("returns", {})) == ids, 30 * SLACK,
                 "the returns of the job published while the store was down")
        self.answered(a, ids)


class CatchUpTest(ClusterTestCase):

    def test_a_member_whose_feed_missed_a_publish_delivers_it_when_the_feed_is_back(self):
        ms, lb = self.cluster(2)
        ids = ["u%d" % i for i in range(4)]
        # Minions that do not give up on a master frozen for a few seconds.
        self.add_minions(ms, lb, ids, master_alive_interval=60)
        a, b = ms.masters
        self.answered(a, ids)
        on_b = [i for i in ids if self.served_by(ms, i) is b]
        self.assertTrue(on_b, "round robin gave b no minion")
        db = self.store["store"].rsplit("/", 1)[1].split("?")[0]
        since = b.daemon.mark()
        # b frozen, its LISTEN session cut: it cannot hear the publish.
        pid = b.daemon.proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            ports = ",".join(str(p) for p in sorted({s.port for s in sockets_of(pid)
                                                     if s.protocol == "tcp"}))
            cut = clustercase.PG.psql(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity WHERE "
                "datname = '%s' AND query LIKE 'LISTEN%%' AND client_port IN (%s)" % (db, ports))
            self.assertEqual(cut, "1")
            rc, out, err = a.brine("cmd", "--async", "*", "test.ping")
            self.assertEqual(rc, 0, err)
            jid = re.search(r"job ID: (\d+)", out).group(1)
        finally:
            os.kill(pid, signal.SIGCONT)
        # Back, b reads the open jobs it did not hear of and delivers this one.
        wait_log(b.daemon, r"1 jobs of other members published while the change feed was down "
                 r"taken on", 30, since)
        wait_for(lambda: int(clustercase.PG.psql(
            "SELECT count(*) FROM returns WHERE jid = '%s'" % jid, db)) == len(ids),
            30 * SLACK, "every minion's return, b's included")


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
