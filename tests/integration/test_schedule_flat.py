#!/usr/bin/env python3
"""Scheduled runs at scale, a suite of its own so that it runs beside the
other scheduler tests (tests/integration/test_schedule.py): a swarm's run
starts per second stay flat over their interval, also after the master
restarts. Evidence is the runs' own records: their jids, the master's clock
when it granted each run."""

import time
import unittest

from harness import ClusterTestCase, jid_time, wait_for
from test_schedule import connected_swarm, per_second

# The swarm at scale, with fewer minions than the bench's 10,000 (ASan, two
# cores): COUNT minions on a PERIOD s interval start COUNT / PERIOD runs a
# second on average. Each window looked at is two periods: 2,000 runs, over
# 20 one-second buckets of 100 runs on average (a longer period would give
# the same runs in more, smaller buckets and take longer).
COUNT = 1000
PERIOD = 10
FLAT = 1.5  # the bound: the busiest second at most this many times the mean


class ScheduleFlatTest(ClusterTestCase):

    def starts(self, c, since, until):
        jobs = c.jobs(function="test.ping")
        return [jid_time(j["jid"]) for j in jobs if j.get("user") == "schedule:swarm"
                and since <= jid_time(j["jid"]) < until]

    def assert_flat(self, times, start, what):
        hist = per_second(times, start, start + 2 * PERIOD)
        mean = sum(hist) / len(hist)
        self.assertGreater(mean, 0.8 * COUNT / PERIOD, "%s: %r" % (what, hist))
        self.assertLessEqual(max(hist) / mean, FLAT, "%s: per second %r" % (what, hist))
        return max(hist) / mean

    def test_swarm_runs_stay_flat_also_after_a_master_restart(self):
        c = self.cluster(master_opts={"auto_accept": True})
        s = connected_swarm(self, c, COUNT, "sc-",
                            ["--schedule", "test.ping:%d" % PERIOD, "--connect-rate", "500"],
                            seconds=400, timeout=180)
        # Two whole periods from the next second, once every minion has been
        # connected for a period (its schedule reached the master).
        start = int(time.time()) + 2
        wait_for(lambda: time.time() > start + 2 * PERIOD + 3, 2 * PERIOD + 10, "two periods")
        before = self.assert_flat(self.starts(c, start, start + 2 * PERIOD), start,
                                  "before the restart")
        # A master restart: the minions reconnect within seconds, all at once,
        # but their slots are on the clock, not at their connects.
        c.restart_master()
        wait_for(lambda: s.saw(r"^all %d serving again" % COUNT), 120, "the swarm back")
        # The runs that came due while the master was down were asked for
        # again every second and granted as the minions came back: a few
        # seconds of catching up, then the slots as before.
        start = int(time.time()) + 5
        wait_for(lambda: time.time() > start + 2 * PERIOD + 3, 2 * PERIOD + 10, "two periods")
        after = self.assert_flat(self.starts(c, start, start + 2 * PERIOD), start,
                                 "after the restart")
        print("\nswarm %d minions every %d s: peak/mean %.2f before, %.2f after a restart"
              % (COUNT, PERIOD, before, after))


if __name__ == "__main__":
    unittest.main()
