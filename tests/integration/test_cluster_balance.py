#!/usr/bin/env python3
"""The master cluster spreads its minions: minions hold long-lived
connections, so a member that comes back would stay empty behind a round
robin balancer. The members over their even share shed minions to it
gradually (each asked to connect again through the balancer), with no
return lost meanwhile. Everything runs on loopback."""

import os
import re
import threading
import unittest

from harness import SLACK, wait_for
import clustercase
from clustercase import ClusterTestCase

setUpModule = clustercase.start_store
tearDownModule = clustercase.stop_store


class BalanceTest(ClusterTestCase):

    def connected(self, master):
        """{member name: connected} of the live members, as `master` sees them."""
        return {m["name"]: m["stats"].get("connected", 0)
                for m in self.status(master)["members"] if m["alive"] and not m["removed"]}

    def test_a_member_that_comes_back_takes_its_share_and_no_return_is_lost(self):
        ms, lb = self.cluster(3)
        a, b, late = ms.masters
        late_name = "%s:%d" % (os.uname().nodename, late.port)
        late.daemon.terminate()
        wait_for(lambda: late_name not in self.connected(a), 30 * SLACK, "a to see the third down")
        ids = ["r%02d" % i for i in range(30)]
        self.add_minions(ms, lb, ids)
        self.answered(a, ids, timeout=60)
        # The counts are each member's at its last heartbeat (a second).
        before = wait_for(lambda: (lambda c: sum(c.values()) == 30 and c)(self.connected(a)),
                          10 * SLACK, "the two members' heartbeats to count the 30 minions")

        # Jobs all along, on both members that were up.
        jids = []
        done = threading.Event()
        failures = []

        def loop():
            n = 0
            while not done.is_set():
                try:
                    self.publish_async(a if n % 2 else b, jids, "test.ping")
                except AssertionError as e:
                    failures.append(str(e))
                n += 1
                done.wait(0.3)
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        since = {m.name: m.daemon.mark() for m in ms.masters}
        try:
            late.start()

            def balanced():
                c = self.connected(a)
                return (len(c) == 3 and sum(c.values()) == 30 and
                        all(7 <= n <= 13 for n in c.values()) and c)
            spread = wait_for(balanced, 90 * SLACK,
                              "each of the three members to hold 10 +- 3 of the 30 minions")
        finally:
            done.set()
            t.join(timeout=60)
        self.assertEqual(failures, [])
        print("\ncluster balance: %s before the third came back, %s after; %d jobs meanwhile"
              % (sorted(before.values()), sorted(spread.values()), len(jids)))
        # The members over their share said what they did.
        shed = sum(m.daemon.count(r"asked \d+ of its minions to connect again through the "
                                  r"balancer", since[m.name]) for m in (a, b))
        self.assertGreater(shed, 0)
        # The status shows each member's share, and the even share.
        # (A minion moving between members counts twice until the next
        # heartbeat: the line is read again until it is settled.)
        def settled_status():
            rc, out, err = a.brine("cluster", "status")
            self.assertEqual(rc, 0, err)
            return "30 minions over 3 live members: an even share is 10 each" in out and out
        out = wait_for(settled_status, 30 * SLACK, "cluster status to count the 30 minions once")
        self.assertEqual(len(re.findall(r" yes +(?:-|up [\d.]+ ms) +\d+ +\d+% ", out)), 3, out)
        # No return lost: every (jid, minion) of every job published while
        # the minions moved is a return in the store, none undelivered.
        db = self.store["store"].rsplit("/", 1)[1].split("?")[0]
        in_jobs = ",".join("'%s'" % j for j in jids)

        def complete():
            rows = clustercase.PG.psql(
                "SELECT count(*) FROM returns WHERE jid = ANY(ARRAY[%s])" % in_jobs, db)
            return int(rows) == len(ids) * len(jids)
        wait_for(complete, 120 * SLACK, "every return of %d jobs from 30 minions" % len(jids))
        lost = clustercase.PG.psql(
            "SELECT count(*) FROM undelivered WHERE jid = ANY(ARRAY[%s])" % in_jobs, db)
        self.assertEqual(int(lost), 0)
        # And the minions answer through whichever member holds them now.
        self.answered(late, ids)


if __name__ == "__main__":
    unittest.main()
