#!/usr/bin/env python3
"""Scheduled state runs at scale, a suite of its own so that it runs beside
the other scheduler tests (tests/integration/test_schedule.py): every
minion of a swarm runs, however often a master at max_concurrent_runs
defers it, and never more than that many at once by the reports' own start
and duration."""

import collections
import json
import time
import unittest

from harness import ClusterTestCase, wait_for
from test_schedule import connected_swarm, started


class ScheduleLimitTest(ClusterTestCase):

    def test_swarm_state_runs_all_happen_under_max_concurrent_runs(self):
        n, period, limit = 200, 10, 3
        c = self.cluster(master_opts={"auto_accept": True, "max_concurrent_runs": limit,
                                      "run_retry_after": 1})
        s = connected_swarm(self, c, n, "ad-",
                            ["--schedule", "state.apply:%d" % period, "--schedule-run-ms", "100"],
                            seconds=300, timeout=120)
        start = time.time() + period

        def reports():
            rc, out, err = c.brine("report", "list", "--out", "json", "--limit", "100000",
                                   "--since", "10m")
            self.assertEqual(rc, 0, err)
            return [r for r in json.loads(out) if started(r) >= start]

        # Three periods: each minion's three runs, however often deferred.
        wait_for(lambda: time.time() > start + 3 * period, 4 * period, "three periods")
        wait_for(lambda: len(set(r["minion"] for r in reports())) == n, 30,
                 "a run of every minion")
        got = reports()
        per_minion = collections.Counter(r["minion"] for r in got)
        self.assertEqual(len(per_minion), n)
        self.assertGreaterEqual(min(per_minion.values()), 2, per_minion.most_common()[-3:])
        # At most `limit` state runs at once, by the master's records.
        events = sorted([(started(r), 1) for r in got] +
                        [(started(r) + r["duration_ms"] / 1000.0, -1) for r in got])
        most = now = 0
        for _, d in events:
            now += d
            most = max(most, now)
        self.assertLessEqual(most, limit + 1, "runs at once")  # +1: ms rounding at the edges
        self.assertTrue(s.saw(r"deferred=[1-9]"), s.out[-3:])


if __name__ == "__main__":
    unittest.main()
