#!/usr/bin/env python3
"""The store survives its primary: PostgreSQL with a synchronous standby
under pg_auto_failover (pgfailover.py), reached by two masters through
libpq's multi-host URL. Jobs run while the primary is killed (kill -9 of its
postgres and of its keeper); the standby is promoted, the masters carry on,
and no return a minion had acknowledged is lost."""

import os
import re
import statistics
import threading
import time
import unittest

from harness import MasterSet, wait_for, wait_log
from pgfailover import FailoverCluster, require_pg_auto_failover

# From the kill to the first publish recorded after it, at most (the
# promotion takes ~6 s with the harness's monitor timings, then the masters'
# reconnect backoff, at most 1 s).
RESUME_BOUND = 45
# BRINE_PGAF_DEFAULT_TIMINGS=1 (pgfailover.py): pg_auto_failover's default
# timings, a failover of about 50 s, with store_failover_wait 60 as the
# README says to set then; a measurement, not part of the suite.
DEFAULT_TIMINGS = os.environ.get("BRINE_PGAF_DEFAULT_TIMINGS") == "1"
if DEFAULT_TIMINGS:
    RESUME_BOUND = 120
# Until every return of every job is in the store after the failover.
SETTLE_BOUND = 60
JOBS = [("test.ping",), ("cmd.run", "echo failover"), ("test.sleep", "0.2")]


def setUpModule():
    require_pg_auto_failover()


class StoreFailoverTest(unittest.TestCase):

    def setUp(self):
        self.pg = FailoverCluster()
        self.addCleanup(self.pg.cleanup)
        self.pg.start()
        pw = self.pg.password_file(os.path.join(self.pg.dir, "brine.pw"))
        os.chmod(pw, 0o600)
        self.store = {"store": self.pg.url(), "store_password_file": pw}
        if DEFAULT_TIMINGS:
            self.store["store_failover_wait"] = 60
        self.ms = MasterSet(2, master_opts=dict(self.store))
        self.addCleanup(self.ms.stop)
        self.minions = ["m1", "m2", "m3"]
        for mid in self.minions:
            self.ms.add_minion(mid)
        for m in self.ms.masters:
            wait_for(lambda m=m: self._answered(m), 30,
                     "%s to be answered by %s" % (m.name, ", ".join(self.minions)))

    def _answered(self, master):
        rc, got, _ = master.ping_json(timeout=3)
        return all(got.get(i) is True for i in self.minions)

    def _publish(self, master, fun_args):
        """`brine cmd --async '*' FUN ARGS`: the jid, or None when the master
        said the job was not recorded."""
        rc, out, err = master.brine("cmd", "--async", "*", *fun_args,
                                    timeout=90 if DEFAULT_TIMINGS else 40)
        if rc != 0:
            return None, err.strip()
        m = re.search(r"job ID: (\d{20})", out)
        self.assertIsNotNone(m, "brine cmd --async printed no jid: %r %r" % (out, err))
        return m.group(1), ""

    def test_masters_ride_through_a_primary_failover_and_lose_no_return(self):
        pg = self.pg
        old = pg.primary()
        old_port = pg.ports[old]
        # Synchronous replication is really on: the standby is listed and
        # reported sync (or quorum, pg_auto_failover's ANY 1 (...)).
        self.assertNotEqual(pg.synchronous_standby_names(old_port), "")
        self.assertIn(pg.sync_state(old_port), ("sync", "quorum"))
        self.assertEqual(pg.psql(old_port, "SHOW synchronous_commit"), "on")

        # `brine store check` names every host of the URL.
        rc, out, err = self.ms.masters[0].brine("store", "check")
        self.assertEqual(rc, 0, err)
        self.assertIn("store: postgresql %s" % pg.url(), out)

        published = []   # (started, finished, jid)
        failed = []      # (started, finished, error)
        stop = threading.Event()
        lock = threading.Lock()

        def loop(master, offset):
            i = offset
            while not stop.is_set():
                started = time.monotonic()
                jid, err = self._publish(master, JOBS[i % len(JOBS)])
                finished = time.monotonic()
                with lock:
                    if jid:
                        published.append((started, finished, jid))
                    else:
                        failed.append((started, finished, err))
                i += 1
                time.sleep(0.1)

        threads = [threading.Thread(target=loop, args=(m, n), daemon=True)
                   for n, m in enumerate(self.ms.masters)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: len(published) >= 6, 30, "six jobs published before the kill")
            marks = [m.daemon.mark() for m in self.ms.masters]
            killed_at = time.monotonic()
            pg.kill_node(old)
            new = pg.wait_promoted(old)
            promoted_at = time.monotonic()

            def resumed():
                with lock:
                    return any(s >= killed_at for s, _, _ in published)
            wait_for(resumed, RESUME_BOUND,
                     "a publish started after the kill of %s to be recorded" % old)
            with lock:
                resume = min(f for s, f, _ in published if s >= killed_at) - killed_at
            # A few more after the failover, on both masters.
            with lock:
                n = len(published)
            wait_for(lambda: len(published) >= n + 6, 30, "six more jobs after the failover")
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        unknown = [e for _, _, e in failed if "is unknown" in e]
        during = [f - s for s, f, _ in published if s >= killed_at - 1 and s < promoted_at]
        print("\nstore failover: %s promoted %.1f s after the kill of %s; first job stored "
              "%.1f s after the kill; %d publishes recorded (%d started during the failover, "
              "the longest answered in %.1f s), %d unknown, %d refused"
              % (new, promoted_at - killed_at, old, resume, len(published), len(during),
                 max(during, default=0), len(unknown), len(failed) - len(unknown)))
        self.assertLess(resume, RESUME_BOUND)
        # The masters noticed and came back, and said so.
        for m, since in zip(self.ms.masters, marks):
            self.assertIsNotNone(
                re.search(r"lost the connection|no longer takes writes|cannot connect",
                          m.daemon.log_since(since)), m.name + " never noticed the failover")
        # Each master's change feed found the new primary and resynced.
        for m, since in zip(self.ms.masters, marks):
            wait_log(m.daemon, r"the change feed is back", 30, since)
        # Within store_failover_wait (15 s) of each publish's arrival, the
        # store was back: every publish waited for it and was recorded,
        # none refused, none of unknown outcome.
        self.assertEqual(failed, [])
        # The store thread found its connection gone before using it again:
        # nothing is logged as lost once the feed is back.
        for m, since in zip(self.ms.masters, marks):
            log = m.daemon.log_since(since)
            back = log.find("the change feed is back")
            after = [line for line in log[back:].splitlines()
                     if "[error]" in line and "lost the connection" in line]
            self.assertEqual(after, [], m.name)

        # Zero acknowledged returns lost: every (jid, minion) of every job
        # published, before, during and after the failover, ends as a return
        # in the store (on the promoted standby), read through both masters;
        # and each minion's spool empties, so everything was acknowledged.
        jids = [j for _, _, j in published]
        a, b = self.ms.masters

        def all_returned():
            listed = {j["jid"]: j for j in a.jobs(limit=len(jids) + 100)}
            for jid in jids:
                j = listed.get(jid)
                if j is None or sorted(j.get("returned", [])) != self.minions:
                    return False
            return True
        try:
            wait_for(all_returned, SETTLE_BOUND,
                     "every return of the %d jobs in the store after the failover" % len(jids))
        except AssertionError:
            listed = {j["jid"]: j for j in a.jobs(limit=len(jids) + 100)}
            missing = [(jid, listed.get(jid)) for jid in jids
                       if listed.get(jid) is None or
                       sorted(listed[jid].get("returned", [])) != self.minions]
            raise AssertionError("jobs without all their returns: %s" % missing[:5])
        for jid in jids[:: max(1, len(jids) // 5)]:
            self.assertEqual(sorted(b.job(jid)["returns"]), self.minions, jid)

        def spools_empty():
            for mid in self.minions:
                d = os.path.join(self.ms.minion_dir(mid), "cache", "returns")
                if os.path.isdir(d) and any(f.endswith(".ret") for f in os.listdir(d)):
                    return False
            return True
        wait_for(spools_empty, 30, "every minion's spool to empty (all returns acknowledged)")


if __name__ == "__main__":
    unittest.main()
