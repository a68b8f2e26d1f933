#!/usr/bin/env python3
"""Jobs: `brine cmd` targeting, output formats, exit statuses, the test and cmd
modules, job timeouts, concurrency, the job cache (`brine job`) and returns
that survive a lost minion or a restarted master."""

import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import (BRINE_BIN, ClusterCase, ClusterTestCase, tail, wait_for, wait_log)

MINIONS = ["m1", "m2", "m3"]


def procs_matching(regex):
    """Pids of processes whose full command line matches `regex` (pgrep -f)."""
    p = subprocess.run(["pgrep", "-f", regex], capture_output=True, text=True, timeout=10)
    return [int(x) for x in p.stdout.split()]


def children_matching(ppid, regex):
    """Pids of the children of `ppid` whose command line matches `regex`."""
    p = subprocess.run(["pgrep", "-P", str(ppid), "-f", regex], capture_output=True, text=True,
                       timeout=10)
    return [int(x) for x in p.stdout.split()]


def unique_seconds(whole):
    """A sleep duration no other process on the machine uses, to find it with pgrep."""
    return "%d.%05d" % (whole, random.randrange(100000))


def command_regex(text):
    # The command as the minion runs it (/bin/sh -c TEXT, or TEXT after exec),
    # not the brine CLI whose arguments also contain it.
    return "^((/bin/)?sh -c )?" + re.escape(text)


def async_jid(out):
    m = re.search(r"Executed command with job ID: (\d+)", out)
    assert m, "no job id in: %r" % out
    return m.group(1)


class SharedClusterJobs(ClusterCase):
    """Jobs that leave the three minions as they were share one cluster."""

    MINIONS = MINIONS

    def cmd(self, *args, timeout=30):
        return self.c.brine("cmd", *args, timeout=timeout)

    def cmd_json(self, *args, rc=0):
        code, out, err = self.cmd("--out", "json", *args)
        self.assertEqual(code, rc, "stdout %r stderr %r" % (out, err))
        return json.loads(out)  # the whole stdout is one JSON object

    def test_ping_all_nested(self):
        rc, out, err = self.cmd("*", "test.ping")
        self.assertEqual(rc, 0, err)
        for mid in MINIONS:
            self.assertRegex(out, r"(?m)^%s:\n    True$" % mid)
        self.assertEqual(len(out.splitlines()), 6, out)

    def test_ping_all_json(self):
        self.assertEqual(self.cmd_json("*", "test.ping"), {"m1": True, "m2": True, "m3": True})

    def test_glob_target(self):
        self.assertEqual(self.cmd_json("m[12]", "test.ping"), {"m1": True, "m2": True})

    def test_list_target(self):
        self.assertEqual(self.cmd_json("-L", "m1,m3", "test.ping"), {"m1": True, "m3": True})
        # Ids in the list that are not accepted minions get no job and are
        # reported (Salt's "missing"), with exit status 2.
        code, out, err = self.cmd("--out", "json", "-L", "m2,nosuch", "test.ping")
        self.assertEqual(code, 2, err)
        self.assertEqual(json.loads(out), {"m2": True})
        self.assertIn("nosuch: Minion did not return. [No accepted key]", err)

    def test_echo(self):
        self.assertEqual(self.cmd_json("m1", "test.echo", "hello"), {"m1": "hello"})

    def test_version(self):
        p = subprocess.run([BRINE_BIN, "--version"], capture_output=True, text=True, timeout=30)
        version = p.stdout.strip().split()[-1]
        self.assertRegex(version, r"\d")
        self.assertEqual(self.cmd_json("m2", "test.version"), {"m2": version})

    def test_cmd_run(self):
        self.assertEqual(self.cmd_json("m1", "cmd.run", "echo hi"), {"m1": "hi"})
        rc, out, err = self.cmd("m1", "cmd.run", "echo hi")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "m1:\n    hi\n")

    def test_cmd_run_all(self):
        ret = self.cmd_json("m1", "cmd.run_all", "echo out; echo err >&2; exit 4", rc=1)["m1"]
        self.assertEqual(set(ret), {"pid", "retcode", "stdout", "stderr"})
        self.assertIsInstance(ret["pid"], int)
        self.assertGreater(ret["pid"], 0)
        self.assertEqual(ret["retcode"], 4)
        self.assertEqual(ret["stdout"], "out")
        self.assertEqual(ret["stderr"], "err")

    def test_cmd_retcode(self):
        # The exit code is the answer; the job itself succeeded.
        self.assertEqual(self.cmd_json("m1", "cmd.retcode", "exit 3"), {"m1": 3})
        self.assertEqual(self.cmd_json("m1", "cmd.retcode", "true"), {"m1": 0})

    def test_cmd_run_cwd_and_env(self):
        where = os.path.realpath(self.c.dir)
        self.assertEqual(self.cmd_json("m1", "cmd.run", "pwd", "cwd=" + where), {"m1": where})
        self.assertEqual(self.cmd_json("m1", "cmd.run", "echo $FOO", 'env={"FOO": "bar"}'),
                         {"m1": "bar"})

    def test_failing_function_exits_1(self):
        rc, out, err = self.cmd("m1", "cmd.run", "echo before; exit 3")
        self.assertEqual(rc, 1, "stdout %r stderr %r" % (out, err))
        self.assertIn("before", out)
        rc, out, err = self.cmd("m1", "no.such_function")
        self.assertEqual(rc, 1, "stdout %r stderr %r" % (out, err))
        self.assertIn("'no.such_function' is not available", out)

    def test_no_minion_matched(self):
        rc, out, err = self.cmd("nosuch*", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertEqual(out, "")
        self.assertIn("No minions matched the target", err)
        rc, out, err = self.cmd("-L", "x,y", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("No minions matched the target", err)
        # --out json still prints its one object.
        rc, out, err = self.cmd("--out", "json", "nosuch*", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertEqual(json.loads(out), {})

    def test_job_timeout_kills_the_command(self):
        secs = unique_seconds(100)
        command = "sleep " + secs
        p = subprocess.Popen([BRINE_BIN, "cmd", "-c", self.c.config, "-t", "15", "--out", "json",
                              "m1", "cmd.run", command, "timeout=2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: procs_matching(command_regex(command)), 3,
                     "the job's '%s' process to start" % command)
            out, err = p.communicate(timeout=15)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 1, "stdout %r stderr %r" % (out, err))
        ret = json.loads(out)["m1"]
        self.assertRegex(ret, r"^ERROR: .*timed out after 2 s")
        wait_for(lambda: not procs_matching(command_regex(command)), 3,
                 "no '%s' process to remain" % command)

    def test_jobs_run_concurrently(self):
        # Each job announces that it started and then waits for the other's
        # announcement: both can finish only if they ran at the same time.
        # Run one after the other, the first would give up (exit 1) after its
        # bound and the second would never see it.
        barrier = tempfile.mkdtemp(prefix="brine-overlap-")
        self.addCleanup(shutil.rmtree, barrier, True)
        jids = []
        for me, other in (("a", "b"), ("b", "a")):
            script = ("touch %s/%s; i=0; until [ -e %s/%s ]; do "
                      "i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done; echo met %s"
                      % (barrier, me, barrier, other, me))
            rc, out, err = self.cmd("--async", "m1", "cmd.run", script, "timeout=120")
            self.assertEqual(rc, 0, err)
            jids.append(async_jid(out))
        self.assertNotEqual(jids[0], jids[1])

        def both_done():
            return all("m1" in self.c.job(j)["returns"] for j in jids)

        wait_for(both_done, 120, "both barrier jobs to return")
        self.assertEqual([self.c.job(j)["returns"]["m1"] for j in jids], ["met a", "met b"])

    def test_sleeps_overlap_in_saltutil_running(self):
        # The minion's own record of its running jobs lists both sleeps at once.
        jids = []
        for _ in range(2):
            rc, out, err = self.cmd("--async", "m1", "test.sleep", "600")
            self.assertEqual(rc, 0, err)
            jids.append(async_jid(out))

        def running():
            rc, out, err = self.cmd("-t", "30", "--out", "json", "m1", "saltutil.running")
            if rc != 0:
                return None
            return {j["jid"] for j in json.loads(out)["m1"]} >= set(jids)

        wait_for(running, 60, "saltutil.running to list both test.sleep jobs")
        for jid in jids:
            rc, out, err = self.c.brine("job", "kill", jid, timeout=60)
            self.assertEqual(rc, 0, out + err)
        wait_for(lambda: all("m1" in self.c.job(j)["returns"] for j in jids), 60,
                 "the killed sleeps to return")

    def test_job_list_and_show(self):
        rc, out, err = self.cmd("--async", "*", "test.echo", "cached")
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        wait_for(lambda: len(self.c.job(jid)["returns"]) == 3, 10, "three returns of job " + jid)
        job = self.c.job(jid)
        self.assertEqual(job["jid"], jid)
        self.assertEqual(job["fun"], "test.echo")
        self.assertEqual(job["args"], ["cached"])
        self.assertEqual(job["minions"], MINIONS)
        self.assertEqual(job["returns"], {"m1": "cached", "m2": "cached", "m3": "cached"})
        self.assertEqual(job["undelivered"], {})
        self.assertEqual(job["running"], [])

        rc, out, err = self.c.brine("job", "list")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^%s\s.*test\.echo.*3/3 returned$" % jid)

        rc, out, err = self.c.brine("job", "show", jid)
        self.assertEqual(rc, 0, err)
        self.assertIn("jid: " + jid, out)
        for mid in MINIONS:
            self.assertRegex(out, r"(?m)^%s:\n    cached$" % mid)

        rc, out, err = self.c.brine("job", "show", "20000101000000000000")
        self.assertNotEqual(rc, 0)
        self.assertIn("no job", err)


class JobFailureTest(ClusterTestCase):
    """Jobs whose minions stop, die, or whose master restarts."""

    def test_stopped_minion_is_reported_not_returned(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        since = c.master.mark()
        self.assertEqual(m.terminate(), 0)
        wait_log(c.master, r"minion m1 at 127\.0\.0\.1:\d+.*(disconnected|connection closed)", 5,
                 since)
        rc, out, err = c.brine("cmd", "-t", "3", "--out", "json", "m1", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertEqual(json.loads(out), {})
        self.assertRegex(err, r"m1: Minion did not return")
        rc, out, err = c.brine("cmd", "-t", "3", "m1", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("m1:\n    Minion did not return. [Not connected]", out)
        # A minion that stops is a disconnect, not a protocol violation.
        log = c.master.log_since(since)
        self.assertRegex(log, r"\[info\] minion m1 at 127\.0\.0\.1:\d+ disconnected")
        self.assertNotIn("protocol violation", log)

    def test_minion_killed_mid_job(self):
        c = self.cluster()
        for mid in MINIONS:
            c.add_accepted_minion(mid)
        secs = unique_seconds(3)
        command = "sleep " + secs
        since = c.master.mark()
        p = subprocess.Popen([BRINE_BIN, "cmd", "-c", c.config, "-t", "6", "--out", "json",
                              "*", "cmd.run", command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: all(children_matching(c.minions[mid].pid, command_regex(command))
                                 for mid in MINIONS), 5, "the command to run on all three minions")
            c.minions["m3"].kill()
            out, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 2, "stdout %r stderr %r" % (out, err))
        self.assertEqual(json.loads(out), {"m1": "", "m2": ""})
        self.assertIn("m3: Minion did not return", err)
        self.assertNotIn("m1: Minion", err)
        # The master goes on serving the others.
        self.assertTrue(c.master.alive())
        rc, out, err = c.brine("cmd", "--out", "json", "*", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertEqual(json.loads(out), {"m1": True, "m2": True})
        rc, out, err = c.brine("cmd", "-L", "m1,m2", "test.ping")
        self.assertEqual(rc, 0, err)
        # The master notices the lost connection once, and as a disconnect:
        # a killed minion's connection ends with a TCP FIN and no TLS
        # close_notify, which is not a protocol violation.
        closed = r"minion m3 at 127\.0\.0\.1:\d+.*(disconnected|connection closed)"
        wait_log(c.master, closed, 5, since)
        log = c.master.log_since(since)
        self.assertEqual(len(re.findall(r"minion m3 .*(?:disconnect|closed)", log)), 1, tail(log))
        self.assertRegex(log, r"minion m3 at 127\.0\.0\.1:\d+ disconnected", tail(log))

    def test_return_survives_master_restart(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        secs = unique_seconds(2)
        command = "sleep %s; echo done" % secs
        rc, out, err = c.brine("cmd", "--async", "m1", "cmd.run", command)
        self.assertEqual(rc, 0, err)
        jid = async_jid(out)
        # The minion has the job once its command runs.
        wait_for(lambda: procs_matching(command_regex(command)), 3, "the job to start on m1")
        msince = m.mark()
        self.assertEqual(c.master.terminate(), 0, tail(c.master.log()))
        # The command finishes while there is no master: the minion keeps it.
        wait_for(lambda: not procs_matching(command_regex(command)), 10,
                 "the job's command to finish")
        try:
            wait_log(m, r"connection to master .* lost", 5, msince)
        except AssertionError:
            raise AssertionError("minion log:\n" + m.log_since(0) + "\nmaster log:\n" +
                                 c.master.log_since(0)[-3000:])
        c.start_master()

        def returned():
            return c.job(jid)["returns"].get("m1") == "done"

        wait_for(returned, 20, "m1's return of job %s in the job cache after the restart" % jid)
        job = c.job(jid)
        self.assertEqual(job["undelivered"], {})
        self.assertEqual(job["running"], [])
        wait_log(m, r"re-sending 1 unacknowledged returns", 1, msince)


if __name__ == "__main__":
    unittest.main()
