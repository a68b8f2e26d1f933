#!/usr/bin/env python3
"""Scheduled runs (the minion's `schedule`): runs are granted and recorded by
the master (a jid, `brine job list`, a report for a state run), spread over
their interval by the minion's id on the wall clock, skipped past
maxrunning, deferred by a master at max_concurrent_runs and never lost; at
scale, a swarm's run starts per second stay flat, also after the master
restarts. Evidence is the runs' own records: jids (the master's clock when it
granted each run), reports' start and duration, the runs' return values."""

import collections
import json
import os
import re
import signal
import time
import unittest

from harness import ClusterTestCase, jid_time, wait_for, wait_log, write_config
from test_swarm import Swarm

TREE = {
    "top.sls": "base:\n  '*':\n    - quiet\n",
    "quiet.sls": "one:\n  test.succeed_without_changes\n",
    "slow.sls": "nap:\n  cmd.run:\n    - name: sleep 1\n",
}


def write_tree(root):
    os.makedirs(root, exist_ok=True)
    for name, text in TREE.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)


def scheduled(jobs, name):
    """The jobs of `brine job list --out json` that schedule job `name` ran."""
    return [j for j in jobs if j.get("user") == "schedule:" + name]


def started(report):
    """A report's start (the master's record) as unix seconds."""
    return report["started_ms"] / 1000.0


def connected_swarm(case, c, count, prefix, extra, seconds, timeout):
    """A Swarm of `count` minions on cluster `c` once all are connected
    (stopped at the test's end)."""
    s = Swarm(c, count=count, prefix=prefix, extra=extra, seconds=seconds)
    case.addCleanup(s.stop, signal.SIGKILL)
    wait_for(lambda: s.saw(r"^all %d connected" % count) or s.proc.poll() is not None, timeout,
             "the swarm connected")
    case.assertIsNone(s.proc.poll(), "".join(s.err[-5:]))
    return s


def per_second(times, start, end):
    """Run starts per whole second of [start, end)."""
    counts = collections.Counter(int(t - start) for t in times if start <= t < end)
    return [counts.get(i, 0) for i in range(int(end - start))]


class ScheduleTest(ClusterTestCase):

    def test_scheduled_ping_is_recorded_spread_and_listed(self):
        c = self.cluster()
        c.add_accepted_minion("m1", schedule={"ping": {"function": "test.ping", "seconds": 2}})
        # Three runs within 20 s, each a job of its own for m1 alone, returned.
        wait_for(lambda: len([j for j in scheduled(c.jobs(function="test.ping"), "ping")
                              if j["returned"] == ["m1"]]) >= 4, 20,
                 "four scheduled test.ping runs returned")
        runs = sorted(scheduled(c.jobs(function="test.ping"), "ping"), key=lambda j: j["jid"])
        for j in runs:
            self.assertEqual(j["minions"], ["m1"], j)
            self.assertEqual((j["target"], j["tgt_type"]), ("m1", "list"), j)
        # The master granted them on the minion's slots: 2 s apart, all at one
        # offset of the 2 s interval (its id's), within scheduling noise. (The
        # first may have waited for the minion's connection.)
        times = [jid_time(j["jid"]) for j in runs if j["returned"]][1:]
        gaps = [b - a for a, b in zip(times, times[1:])]
        self.assertTrue(all(1.5 < g < 2.5 for g in gaps), gaps)
        phases = sorted(t % 2 for t in times)
        self.assertLess(min(phases[-1] - phases[0], 2 - phases[-1] + phases[0]), 0.5, phases)
        # brine job list says which schedule job ran it; job show has its return.
        rc, out, err = c.brine("job", "list", "--function", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"%s .* test\.ping  list:m1  1/1 returned  \(schedule ping\)"
                         % runs[0]["jid"])
        self.assertEqual(c.job(runs[0]["jid"])["returns"], {"m1": True})
        # The minion said where its slot is.
        wait_log(c.minions["m1"], r"schedule job ping: every 2 s, at [\d.]+ s into each interval")

    def test_run_on_start(self):
        c = self.cluster()
        since = time.time()
        c.add_accepted_minion("m1", schedule={
            "early": {"function": "test.arg", "days": 1, "run_on_start": True,
                      "args": ["early"]},
            "late": {"function": "test.arg", "days": 1, "args": ["late"]},
        })
        wait_for(lambda: scheduled(c.jobs(function="test.arg"), "early"), 20,
                 "the run_on_start run")
        early = scheduled(c.jobs(function="test.arg"), "early")
        self.assertEqual(len(early), 1, early)
        self.assertGreater(jid_time(early[0]["jid"]), since - 1)
        wait_for(lambda: c.job(early[0]["jid"])["returns"], 10, "its return")
        self.assertEqual(c.job(early[0]["jid"])["returns"]["m1"]["args"], ["early"])
        # Without run_on_start a daily job waits for its slot (by the id's
        # hash, somewhere in the day): 5 s more and nothing ran (a slot in
        # these seconds is a chance of 1 in 8,000).
        time.sleep(5)
        self.assertEqual(scheduled(c.jobs(function="test.arg"), "late"), [])

    def test_maxrunning_skips_runs_while_one_is_under_way(self):
        c = self.cluster()
        # Every second, a run that takes 2.5 s and prints its own start and end.
        c.add_accepted_minion("m1", schedule={"slow": {
            "function": "cmd.run", "seconds": 1, "maxrunning": 1,
            "args": ["echo $(date +%s.%N) && sleep 2.5 && echo $(date +%s.%N)"],
            "kwargs": {"python_shell": True}}})
        wait_for(lambda: len([j for j in scheduled(c.jobs(function="cmd.run"), "slow")
                              if j["returned"]]) >= 3, 30, "three runs of the slow job")
        spans = []
        for j in scheduled(c.jobs(function="cmd.run"), "slow"):
            if not j["returned"]:
                continue
            start, end = map(float, c.job(j["jid"])["returns"]["m1"].split())
            spans.append((start, end))
        spans.sort()
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            self.assertGreaterEqual(s2, e1, "runs overlap: %r" % spans)
        wait_log(c.minions["m1"], r"schedule job slow: 1 run\(s\) still under way \(maxrunning 1\); "
                                  r"this run is skipped")

    def test_scheduled_state_apply_makes_a_report(self):
        c = self.cluster(master_opts={"file_roots": {"base": ["srv"]}})
        write_tree(c.path("srv"))
        c.add_accepted_minion("m1", schedule={"hs": {"function": "state.apply", "seconds": 3}})

        def reports():
            rc, out, err = c.brine("report", "list", "--out", "json")
            self.assertEqual(rc, 0, err)
            return json.loads(out)

        wait_for(lambda: reports(), 30, "a report of the scheduled state.apply")
        r = reports()[0]
        self.assertEqual((r["minion"], r["fun"], r["status"]), ("m1", "state.apply",
                                                                     "unchanged"), r)
        job = [j for j in scheduled(c.jobs(function="state.apply"), "hs") if j["jid"] == r["jid"]]
        self.assertEqual(len(job), 1, r)
        self.assertEqual(r["counts"]["succeeded"], 1, r)

    def test_max_concurrent_runs_defers_and_loses_nothing(self):
        # One state run in flight at a time on the master; three minions each
        # want a 1 s state run every 2 s: more than one at a time can serve.
        c = self.cluster(master_opts={"file_roots": {"base": ["srv"]}, "max_concurrent_runs": 1,
                                      "run_retry_after": 1})
        write_tree(c.path("srv"))
        mids = ["m1", "m2", "m3"]
        for mid in mids:
            c.add_accepted_minion(mid, schedule={"slow": {"function": "state.sls", "seconds": 2,
                                                          "args": ["slow"]}})

        def reports():
            rc, out, err = c.brine("report", "list", "--out", "json", "--limit", "1000")
            self.assertEqual(rc, 0, err)
            return json.loads(out)

        wait_for(lambda: all(len([r for r in reports() if r["minion"] == m]) >= 3 for m in mids),
                 60, "three runs of each minion")
        got = reports()
        # Never two at once: each run began after the one before it ended
        # (the master's own records of each run's start and duration).
        ends = sorted((started(r), started(r) + r["duration_ms"] / 1000.0) for r in got)
        for (s1, e1), (s2, e2) in zip(ends, ends[1:]):
            self.assertGreaterEqual(s2 + 0.05, e1, "state runs overlap: %r" % ends)
        # Turned away and asked again, not dropped.
        deferred = sum(m.count(r"run deferred by the master \(master 127\.0\.0\.1:\d+: "
                               r"max_concurrent_runs \(1\) state runs and compiles in flight\)")
                       for m in c.minions.values())
        self.assertGreater(deferred, 0)
        # Every granted run returned (jobs recorded == reports).
        for mid in mids:
            jobs = [j for j in scheduled(c.jobs(function="state.sls"), "slow")
                    if j["minions"] == [mid]]
            wait_for(lambda: all(j["returned"] for j in
                                 [x for x in scheduled(c.jobs(function="state.sls"), "slow")
                                  if x["minions"] == [mid]][1:]), 20,
                     "every granted run of %s returned" % mid)
            self.assertGreaterEqual(len(jobs), 3)

    def test_plan_shows_the_expected_load(self):
        c = self.cluster(master_opts={"schedule_harmonic": True, "schedule_harmonic_base": 60})
        c.add_accepted_minion("m1", schedule={"a": {"function": "test.ping", "seconds": 50},
                                              "b": {"function": "test.ping", "minutes": 5}})
        c.add_accepted_minion("m2", schedule={"a": {"function": "test.ping", "seconds": 50}})
        c.add_accepted_minion("m3")

        def plan(*args):
            rc, out, err = c.brine("schedule", "plan", "--out", "json", *args)
            self.assertEqual(rc, 0, err)
            return json.loads(out)

        wait_for(lambda: plan()["minions"] == 2, 10, "two minions' schedules")
        p = plan("--minutes", "8")
        self.assertEqual((p["minions"], p["targeted"]), (2, 3), p)
        # 50 s is rounded to 60 s, 5 min to 4 min (60 * 2^2).
        jobs = {j["name"]: j for j in p["jobs"]}
        self.assertEqual((jobs["a"]["seconds"], jobs["a"]["period"], jobs["a"]["minions"]),
                         (50, 60, 2))
        self.assertEqual((jobs["b"]["seconds"], jobs["b"]["period"]), (300, 240))
        # Per minute: both a's, and b in 2 of the 8 minutes.
        self.assertEqual(len(p["runs"]), 8)
        self.assertEqual(sum(p["runs"]), 8 * 2 + 2, p["runs"])
        self.assertEqual(plan("m2")["minions"], 1)
        # The minion was told the period: its runs come every 60 s, not 50.
        wait_log(c.minions["m1"], r"schedule job a: every 50 s")  # its own, at start
        rc, out, err = c.brine("schedule", "plan", "--minutes", "3")
        self.assertEqual(rc, 0, err)
        self.assertIn("harmonic periods from 1m", out)
        self.assertRegex(out, r"a\s+test\.ping\s+50s\s+1m\s+2")
        rc, out, err = c.brine("schedule", "plan", "--tgt-type", "compound", "G@x:y and (")
        self.assertEqual(rc, 3, out + err)

    def test_a_schedule_in_the_pillar_runs_and_follows_pillar_refreshes(self):
        """Salt's pillar `schedule`: merged with the config's (the config's
        job wins by name), applied when the pillar arrives and again on
        saltutil.refresh_pillar; a broken one is refused, named, and the
        schedule in effect stays."""
        c = self.cluster(start=False)
        root = c.path("pillar")
        os.makedirs(root)

        def pillar(text):
            with open(os.path.join(root, "top.sls"), "w") as f:
                f.write("base:\n  '*':\n    - sched\n")
            with open(os.path.join(root, "sched.sls"), "w") as f:
                f.write(text)

        pillar("schedule:\n"
               "  fromconfig: {function: test.ping, seconds: 3600}\n"
               "  frompillar: {function: test.echo, args: [pillared], seconds: 2}\n")
        c.master_options["pillar_roots"] = {"base": [root]}
        write_config(c.config, c.master_options)
        c.start_master()
        m = c.add_accepted_minion(
            "m1", schedule={"fromconfig": {"function": "test.ping", "seconds": 2}})

        def runs(name, function):
            return [j for j in scheduled(c.jobs(function=function), name) if j["returned"]]
        # Both run every 2 s: the pillar's job, and the config's under the
        # name the pillar gave too (the config's definition wins).
        wait_for(lambda: len(runs("frompillar", "test.echo")) >= 2
                 and len(runs("fromconfig", "test.ping")) >= 2, 30,
                 "the pillar's and the config's schedule jobs to run twice each")
        jid = runs("frompillar", "test.echo")[0]["jid"]
        self.assertEqual(c.job(jid)["returns"], {"m1": "pillared"})
        wait_log(m, r"schedule from the config and the pillar: 2 job\(s\)")

        def plan():
            rc, out, err = c.brine("schedule", "plan", "--out", "json")
            self.assertEqual(rc, 0, err)
            return {j["name"]: j for j in json.loads(out)["jobs"]}
        wait_for(lambda: set(plan()) == {"fromconfig", "frompillar"}, 10,
                 "the master to plan with both jobs")
        self.assertEqual(plan()["fromconfig"]["seconds"], 2)

        # A broken pillar schedule: named in the log, the jobs stay.
        since = m.mark()
        pillar("schedule:\n  frompillar: {function: test.echo, minuts: 2}\n")
        rc, out, err = c.brine("cmd", "m1", "saltutil.refresh_pillar")
        self.assertEqual(rc, 0, out + err)
        wait_log(m, r"the pillar's schedule: schedule job frompillar: unknown key minuts \(did "
                    r"you mean 'minutes'\?\); .*; the schedule stays as it was", since=since)
        self.assertEqual(set(plan()), {"fromconfig", "frompillar"})

        # The pillar's job removed: the master is told, and it runs no more
        # once the minion applied the change.
        since = m.mark()
        pillar("other: 1\n")
        rc, out, err = c.brine("cmd", "m1", "saltutil.refresh_pillar")
        self.assertEqual(rc, 0, out + err)
        wait_log(m, r"schedule from the config and the pillar: 1 job\(s\)", since=since)
        wait_for(lambda: set(plan()) == {"fromconfig"}, 10,
                 "the master to plan without the pillar's job")
        before = {j["jid"] for j in scheduled(c.jobs(function="test.echo"), "frompillar")}
        # Two more runs of the config's job (4 s) and none of the removed one.
        after_change = len(runs("fromconfig", "test.ping"))
        wait_for(lambda: len(runs("fromconfig", "test.ping")) >= after_change + 2, 20,
                 "two more runs of the config's job")
        later = {j["jid"] for j in scheduled(c.jobs(function="test.echo"), "frompillar")}
        self.assertLessEqual(len(later - before), 1, "the removed job kept running: %s"
                             % sorted(later - before))

    def test_bad_schedule_stops_the_minion_naming_job_and_key(self):
        c = self.cluster()
        m = c.add_minion("m1", schedule={"hs": {"function": "state.apply", "minuts": 30}})
        rc = m.wait_exit(15)
        del c.minions["m1"]  # exited on purpose: not an unclean stop
        self.assertNotEqual(rc, 0)
        self.assertRegex(m.log(), r"line \d+: schedule job hs: unknown key minuts \(did you mean "
                                  r"'minutes'\?\)")


if __name__ == "__main__":
    unittest.main()
