#!/usr/bin/env python3
"""The master cluster's long tests, a suite of their own so that they run
beside test_cluster's: a master killed with SIGKILL during a 200-job loop
loses no return, and the balancer's idle timeout never cuts a healthy
minion idle for a minute. The idle minute passes while the kill test runs
on a cluster of its own, so that the suite spends it once, not after the
kill test. Everything runs on loopback."""

import json
import os
import subprocess
import time
import unittest

from harness import BRINE_BIN, SLACK, tail, wait_for
import clustercase
from clustercase import ClusterTestCase

setUpModule = clustercase.start_store
tearDownModule = clustercase.stop_store


class LongTest(ClusterTestCase):

    @classmethod
    def setUpClass(cls):
        # The idle minute's cluster, made first. HAProxy cuts a connection
        # idle for 5 s; the minions' pings every master_alive_interval / 2 =
        # 3 s keep theirs busy. Nothing but those pings reaches its minions
        # until its test looks at them.
        case = cls()
        ms, lb = case.cluster(2, idle=5, cleanup=cls.addClassCleanup)
        ids = ["i%d" % i for i in range(3)]
        case.add_minions(ms, lb, ids, master_alive_interval=6)
        case.answered(ms.masters[0], ids)
        cls.idle = {"ms": ms, "ids": ids, "began": time.monotonic(),
                    "since": {m.name: m.daemon.mark() for m in ms.masters},
                    "minion_since": {i: ms.minions[i].mark() for i in ids}}

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
            rows = clustercase.PG.psql("SELECT count(*) FROM returns WHERE jid = ANY(ARRAY[%s])"
                                       % ",".join("'%s'" % j for j in jids), db)
            return int(rows) == len(ids) * len(jids)
        wait_for(complete, 120 * SLACK, "every return of 200 jobs from %d minions" % len(ids))
        lost = clustercase.PG.psql("SELECT count(*) FROM undelivered WHERE jid = ANY(ARRAY[%s])"
                                   % ",".join("'%s'" % j for j in jids), db)
        self.assertEqual(int(lost), 0)
        # Both survivors answer alike for every job.
        for m in (a, b):
            listed = {j["jid"]: j for j in m.jobs()}
            for jid in jids:
                self.assertEqual(sorted(listed[jid]["returned"]), ids, (m.name, listed[jid]))
        # While it is dead, the survivors' status says so: down, serving no
        # one, its last heartbeat's count given as stale, with its age.
        member = "%s:%d" % (os.uname().nodename, victim.port)
        wait_for(lambda: not {x["name"]: x for x in self.status(a)["members"]}[member]["alive"],
                 30 * SLACK, "a to see the victim dead")
        rc, out, err = a.brine("cluster", "status")
        row = [l for l in out.splitlines() if l.startswith(member + " ")]
        self.assertEqual(len(row), 1, out)
        self.assertRegex(row[0], r" down +\S+ +0 +- +- +- +- +[\d.]+ s +\(stale: \d+ connected at "
                                 r"its last heartbeat, [\d.]+ s ago\)$", out)
        # The victim, restarted, rejoins and takes new connections.
        since = {m.name: m.daemon.mark() for m in ms.masters}
        victim.start()
        wait_for(lambda: self.status(a)["members"] and all(
            x["alive"] for x in self.status(a)["members"]), 30 * SLACK, "the victim alive again")
        more = ["n%d" % i for i in range(3)]
        self.add_minions(ms, lb, more)
        wait_for(lambda: all(self.served_by(ms, i, since) for i in more), 30 * SLACK,
                 "the new minions to connect")
        # It takes its share: new connections through the balancer, or
        # minions the others shed to it.
        wait_for(lambda: victim.daemon.count(r"minion [kn]\d connected from",
                                             since[victim.name]) > 0,
                 60 * SLACK, "the restarted master to take connections")
        self.answered(victim, ids + more)

    def test_the_balancers_idle_timeout_never_cuts_a_healthy_minion(self):
        ms, ids = self.idle["ms"], self.idle["ids"]
        since, minion_since = self.idle["since"], self.idle["minion_since"]
        # The idle minute itself is what is tested: what is left of it after
        # the kill test (the test names run in order), or all of it alone.
        time.sleep(max(0.0, self.idle["began"] + 60 - time.monotonic()))
        for m in ms.masters:
            self.assertEqual(m.daemon.count(r"connected from", since[m.name]), 0,
                             tail(m.daemon.log_since(since[m.name])))
        for i in ids:
            text = ms.minions[i].log_since(minion_since[i])
            self.assertNotRegex(text, r"(?i)reconnect|closed|lost", text)
        self.answered(ms.masters[1], ids, timeout=10)


if __name__ == "__main__":
    unittest.main()
