#!/usr/bin/env python3
"""Nothing lost: publishes held for minions that are not connected and
recorded as undelivered after their deadline, returns that wait in the
minion's spool for the master that published the job (or go to any master),
a full spool that refuses jobs with a reason, and jobs a restarted master
still owes."""

import calendar
import json
import os
import re
import subprocess
import threading
import time
import unittest

from harness import (BRINE_BIN, ClusterTestCase, MasterSet, tail, wait_for, wait_log)


def utc_seconds(text):
    """A job record's UTC time ("2026-11-28 06:55:57") as unix seconds."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


def async_jid(out):
    m = re.search(r"Executed command with job ID: (\d+)", out)
    assert m, "no job id in: %r" % out
    return m.group(1)


class Events:
    """`brine events PREFIX` of one master, read as it comes."""

    def __init__(self, master, prefix):
        self.lines = []
        self.proc = subprocess.Popen(
            [BRINE_BIN, "events", "-c", master.config, prefix, "--seconds", "60"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=lambda: [self.lines.append(l)
                                                       for l in self.proc.stdout], daemon=True)
        self.reader.start()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.reader.join(5)
        self.proc.stdout.close()


class HeldPublishTest(ClusterTestCase):

    def test_publish_waits_for_a_minion_that_connects_within_the_deadline(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        self.assertEqual(m.terminate(), 0)
        wait_log(c.master, r"minion m1 at \S+ disconnected", 5)
        p = subprocess.Popen([BRINE_BIN, "cmd", "-c", c.config, "-t", "30", "--out", "json", "m1",
                              "test.echo", "late"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # The job is held before the minion comes back.
        wait_for(lambda: [j for j in c.jobs(function="test.echo") if j["running"] == ["m1"]], 10,
                 "the job to be recorded and held for m1")
        since = c.master.mark()
        m.start()
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(json.loads(out), {"m1": "late"})
        wait_log(c.master, r"minion m1 connected", 1, since)

    def test_not_delivered_by_the_deadline_is_recorded_with_the_reason(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        c.add_accepted_minion("m2")
        self.assertEqual(m.terminate(), 0)
        wait_log(c.master, r"minion m1 at \S+ disconnected", 5)
        rc, out, err = c.brine("cmd", "-t", "2", "*", "test.ping")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("m2:\n    True", out)
        self.assertIn("m1:\n    Minion did not return. [Not connected]", out)
        jid = re.search(r"jid (\d+)", err).group(1)
        job = c.job(jid)
        self.assertEqual(job["returns"], {"m2": True})
        self.assertEqual(job["undelivered"], {"m1": "not connected"})
        self.assertEqual(job["running"], [])
        # The minion comes back after the deadline: the job is not run late.
        since = c.master.mark()
        m.start()
        c.wait_connected("m1", since=since)
        rc, out, err = c.brine("cmd", "m1", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(c.job(jid)["undelivered"], {"m1": "not connected"})
        rc, out, err = c.brine("job", "list")
        self.assertRegex(out, r"(?m)^%s\s.*1/2 returned, 1 undelivered$" % jid)

    def test_async_job_is_held_for_publish_hold(self):
        c = self.cluster(master_opts={"publish_hold": 2})
        m = c.add_accepted_minion("m1")
        self.assertEqual(m.terminate(), 0)
        wait_log(c.master, r"minion m1 at \S+ disconnected", 5)
        rc, out, err = c.brine("cmd", "--async", "m1", "test.ping")
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        # The hold is in the job's own record: delivery is due publish_hold
        # after the publish (rounded up to the second). Until then the minion
        # is running; a loaded machine may read the job after that already.
        job = c.job(jid)
        held = utc_seconds(job["deliver_by"]) - utc_seconds(job["created"])
        self.assertIn(held, (2, 3), job)
        if not job["undelivered"]:
            self.assertEqual(job["running"], ["m1"])
        wait_for(lambda: c.job(jid)["undelivered"] == {"m1": "not connected"}, 5,
                 "m1 recorded as undelivered after publish_hold")
        self.assertEqual(c.job(jid)["running"], [])

    def test_master_restart_keeps_holding_open_jobs(self):
        c = self.cluster(master_opts={"publish_hold": 30})
        m = c.add_accepted_minion("m1")
        self.assertEqual(m.terminate(), 0)
        wait_log(c.master, r"minion m1 at \S+ disconnected", 5)
        marker = os.path.join(c.dir, "ran")
        rc, out, err = c.brine("cmd", "--async", "m1", "cmd.run", "echo x >> " + marker)
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        c.restart_master()
        wait_log(c.master, r"1 jobs of the last run still within their delivery deadline", 5)
        m.start()
        wait_for(lambda: "m1" in c.job(jid)["returns"], 15, "the held job to run after restart")
        with open(marker) as f:
            self.assertEqual(f.read(), "x\n")
        # Another restart: the job is settled, nothing is sent again.
        c.restart_master()
        c.wait_connected("m1")
        rc, out, err = c.brine("cmd", "m1", "test.ping")
        self.assertEqual(rc, 0, err)
        with open(marker) as f:
            self.assertEqual(f.read(), "x\n", "the job ran twice")


class ReturnsToOriginTest(unittest.TestCase):

    def master_set(self, n, **kw):
        ms = MasterSet(n, **kw)
        self.addCleanup(ms.stop)
        return ms

    def test_return_waits_for_the_master_that_published_it(self):
        ms = self.master_set(2)
        a, b = ms.masters
        m = ms.add_minion("m1", master_alive_interval=3)
        wait_for(lambda: a.ping_json("m1", 2)[1] == {"m1": True}, 15, "m1 on master-0")
        wait_for(lambda: b.ping_json("m1", 2)[1] == {"m1": True}, 15, "m1 on master-1")
        started = os.path.join(ms.minion_dir("m1"), "started")
        rc, out, err = a.brine("cmd", "--async", "m1", "cmd.run",
                               "touch %s; sleep 2; echo done" % started)
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        wait_for(lambda: os.path.exists(started), 10, "m1 to start the job")
        a.kill()
        wait_log(m, r"job %s finished while master 127\.0\.0\.1:%d is away" % (jid, a.port), 10)
        # master-1 never gets it: origin is the default strategy.
        events = Events(b, "brine/job/%s/" % jid)
        self.addCleanup(events.stop)
        a.start()
        wait_for(lambda: a.job(jid)["returns"].get("m1") == "done", 15,
                 "the return in master-0's job cache after its restart")
        self.assertEqual(events.lines, [])

    def test_any_strategy_delivers_to_the_master_that_is_up(self):
        ms = self.master_set(2)
        a, b = ms.masters
        ms.add_minion("m1", master_alive_interval=3, master_return_strategy="any")
        wait_for(lambda: a.ping_json("m1", 2)[1] == {"m1": True}, 15, "m1 on master-0")
        wait_for(lambda: b.ping_json("m1", 2)[1] == {"m1": True}, 15, "m1 on master-1")
        events = Events(b, "brine/job/")
        self.addCleanup(events.stop)
        started = os.path.join(ms.minion_dir("m1"), "started")
        rc, out, err = a.brine("cmd", "--async", "m1", "cmd.run",
                               "touch %s; sleep 2; echo done" % started)
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        wait_for(lambda: os.path.exists(started), 10, "m1 to start the job")
        a.kill()
        wait_for(lambda: any("brine/job/%s/ret/m1" % jid in l for l in events.lines), 15,
                 "master-1 to store the return of master-0's job")

    def test_full_spool_refuses_jobs_until_returns_are_delivered(self):
        ms = self.master_set(2)
        a, b = ms.masters
        m = ms.add_minion("m1", master_alive_interval=3, spool_max_bytes=65536)
        wait_for(lambda: a.ping_json("m1", 2)[1] == {"m1": True}, 15, "m1 on master-0")
        wait_for(lambda: b.ping_json("m1", 2)[1] == {"m1": True}, 15, "m1 on master-1")
        started = os.path.join(ms.minion_dir("m1"), "started")
        rc, out, err = a.brine("cmd", "--async", "m1", "cmd.run",
                               "touch %s; sleep 1; head -c 70000 /dev/zero | tr '\\\\0' x" % started)
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        wait_for(lambda: os.path.exists(started), 10, "m1 to start the job")
        a.kill()
        wait_log(m, r"job %s finished while master" % jid, 10)
        rc, out, err = b.brine("cmd", "-t", "5", "m1", "test.ping")
        self.assertEqual(rc, 2, out + err)
        self.assertRegex(out, r"m1:\n    Minion did not return\. \[Refused: return spool full")
        refused = re.search(r"jid (\d+)", err).group(1)
        self.assertRegex(b.job(refused)["undelivered"]["m1"], r"^refused: return spool full")
        wait_log(m, r"refusing new jobs until masters acknowledge returns", 2)
        a.start()
        wait_for(lambda: len(a.job(jid)["returns"].get("m1", "")) == 70000, 15,
                 "the 70000-byte return on master-0")
        wait_for(lambda: b.ping_json("m1", 2)[1] == {"m1": True}, 10,
                 "jobs accepted again once the spool drained")


if __name__ == "__main__":
    unittest.main()
