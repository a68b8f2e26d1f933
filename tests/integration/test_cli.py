#!/usr/bin/env python3
"""The cmd CLI's outputters (nested, json, yaml, raw, txt), --static,
--hide-timeout, --show-jid, --batch with --batch-wait, the job cache's list
filters and kill, the live event stream with --tag and --json, and
`brine master|minion --check-config`."""

import json
import os
import re
import select
import subprocess
import tempfile
import time
import unittest

from harness import BRINE_BIN, ClusterCase, jid_time, wait_for

MINIONS = ["m1", "m2", "m3", "m4"]


class Cli(ClusterCase):

    MINIONS = MINIONS

    @classmethod
    def after_start(cls):
        # m4 is accepted but stopped: a down minion. Its grains must be in
        # the master's cache first, or a grain target includes it (greedy).
        def cached():
            rc, out, _ = cls.c.brine("inventory", "-G", "id:m4", "--fields", "id",
                                     "--out", "json")
            return rc == 0 and "m4" in out
        wait_for(cached, 20, "m4's grains in the master's cache")
        assert cls.c.minions["m4"].terminate() == 0

    def cmd(self, *args):
        return self.c.brine("cmd", "--no-progress", *args, timeout=60)

    def test_outputters(self):
        rc, out, err = self.cmd("--out", "yaml", "-L", "m1,m2", "cmd.run",
                                "printf 'hello:\\040world'")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["m1: 'hello: world'", "m2: 'hello: world'"])
        rc, out, err = self.cmd("--out", "yaml", "m1", "test.arg", "1", "x=yes")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "m1:\n  args:\n  - 1\n  kwargs:\n    x: true\n")
        rc, out, err = self.cmd("--out", "raw", "m1", "test.arg", "a", "k=null")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "{'m1': {'args': ['a'], 'kwargs': {'k': None}}}\n")
        rc, out, err = self.cmd("--out", "txt", "m1", "cmd.run", "printf 'a\\nb\\n'")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "m1: a\nm1: b\n")
        rc, out, err = self.cmd("--out", "txt", "m1", "test.ping")
        self.assertEqual(out, "m1: True\n")

    def test_static_hide_timeout_and_show_jid(self):
        rc, out, err = self.cmd("--static", "-t", "3", "*", "test.ping")
        self.assertEqual(rc, 2, err)
        self.assertEqual(out, "m1:\n    True\nm2:\n    True\nm3:\n    True\n"
                              "m4:\n    Minion did not return. [Not connected]\n")
        rc, out, err = self.cmd("--hide-timeout", "-t", "3", "--show-jid", "*", "test.ping")
        self.assertEqual(rc, 2, err)
        self.assertRegex(out, r"^jid: \d{20}\n")
        self.assertNotIn("m4", out)
        self.assertEqual(out.count("True"), 3)

    def test_batch_is_a_sliding_window_and_reports_down_minions(self):
        # Each sleep is 1 s; a window of 2 over 3 connected minions takes two
        # rounds; m4 (down) is reported at once, not waited for.
        rc, out, err = self.cmd("--batch", "2", "-t", "60", "*", "cmd.run",
                                "sleep 1; echo done")
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(out.count("done"), 3, out)
        self.assertIn("m4:\n    Minion did not return. [Not connected]", out)
        runs = re.findall(r"Executing run on \[(.*)\]", err)
        self.assertEqual(len(runs), 2, err)
        self.assertEqual(sorted(sum([r.replace("'", "").split(", ") for r in runs], [])),
                         ["m1", "m2", "m3"])
        # Jobs in the cache: one per window fill, list targets.
        rc, out, err = self.c.brine("job", "list", "--function", "cmd.*")
        self.assertGreaterEqual(len(out.splitlines()), 2, out)
        for line in out.splitlines():
            self.assertIn("cmd.run", line)

    def test_batch_percent_and_wait(self):
        rc, out, err = self.cmd("--batch", "34%", "--batch-wait", "0.5", "--out", "json",
                                "-L", "m1,m2,m3", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"m1": True, "m2": True, "m3": True})
        # 34% of 3 is 2 at a time (rounded up); the third waits for a slot and
        # then half a second. The jobs' own records show it: a jid is the
        # master's clock at publish (YYYYmmddHHMMSS and microseconds), and the
        # last window's job was published at least 0.5 s after the first's.
        jobs = self.c.jobs(function="test.ping", limit=2)
        self.assertEqual(sorted(len(j["minions"]) for j in jobs), [1, 2], jobs)
        first, last = sorted(j["jid"] for j in jobs)
        self.assertGreaterEqual(jid_time(last) - jid_time(first), 0.5, (first, last))
        # A grain target: each window is published as its list and the
        # expression, which every minion checks against its own grains too.
        rc, out, err = self.cmd("--batch", "1", "--out", "json", "-G", "id:m[12]", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"m1": True, "m2": True})
        rc, out, err = self.c.brine("job", "list", "--limit", "1")
        self.assertIn("compound:L@m2 and G@id:m[12]", out)
        rc, out, err = self.cmd("--batch", "0", "*", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("--batch must be", err)

    def test_job_list_filters_and_kill(self):
        rc, out, err = self.cmd("--async", "m2", "test.sleep", "120")
        self.assertEqual(rc, 0, err)
        jid = re.search(r"job ID: (\d+)", out).group(1)
        rc, out, err = self.c.brine("job", "list", "--function", "test.sl*", "--limit", "1")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out.splitlines()), 1)
        self.assertTrue(out.startswith(jid), out)
        rc, out, err = self.c.brine("job", "list", "--target", "m2")
        self.assertIn(jid, out)
        rc, out, err = self.c.brine("job", "list", "--target", "nothing-like-it")
        self.assertEqual(out, "")

        def killed():
            rc, out, _ = self.c.brine("job", "kill", jid)
            return rc == 0 and ("Signal 9 sent to job " + jid) in out
        wait_for(killed, 10, "job kill to find the running sleep")
        wait_for(lambda: "m2" in self.c.job(jid)["returns"], 10, "the killed job's return")
        self.assertIn("cancelled", self.c.job(jid)["returns"]["m2"])

    def test_events_tag_and_json(self):
        p = subprocess.Popen([BRINE_BIN, "events", "-c", self.c.config, "--tag", "brine/job/",
                              "--json", "--seconds", "120"], stdout=subprocess.PIPE, text=True,
                             cwd=self.c.dir)
        try:
            # No readiness signal from a tail: a job published before it
            # subscribed is missed, so jobs are published until a line comes
            # (waited for with a deadline, never a blocking read that only
            # the tail's end would wake).
            line = ""
            for _ in range(30):
                rc, out, err = self.cmd("--show-jid", "m1", "test.ping")
                self.assertIsNotNone(re.search(r"jid: (\d+)", out), out + err)
                ready, _, _ = select.select([p.stdout], [], [], 2)
                if ready:
                    line = p.stdout.readline()
                    if line:
                        break
            self.assertTrue(line, "no event line from brine events after 30 jobs")
            ev = json.loads(line)
            self.assertTrue(ev["tag"].startswith("brine/job/"), ev)
            self.assertIn("data", ev)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()


class CheckConfig(unittest.TestCase):
    """--check-config reads a config as the daemon would, starts nothing and
    creates none of its directories."""

    def check(self, role, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, role)
            with open(path, "w") as f:
                f.write(text)
            p = subprocess.run([BRINE_BIN, role, "--check-config", "-c", path],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(os.listdir(d), [role], "--check-config created files")
            return p, path

    def test_a_valid_config_passes_and_starts_nothing(self):
        for role, text in (
                ("master", "interface: 127.0.0.1\npki_dir: pki\ncachedir: cache\nsock_dir: run\n"),
                ("minion", "id: m1\nmaster: 127.0.0.1\npki_dir: pki\ncachedir: cache\n")):
            p, path = self.check(role, text)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, "config %s: valid\n" % path)
            self.assertEqual(p.stderr, "")

    def test_a_bad_value_fails_naming_file_line_and_option(self):
        p, path = self.check("minion", "id: m1\nmaster_port: 70000\n")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        self.assertIn("config %s: line 2: master_port must be an integer 1..65535, got 70000"
                      % path, p.stderr)

    def test_an_unknown_option_is_a_warning(self):
        p, path = self.check("master", "interface: 127.0.0.1\nmaster_port: 4506\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("line 2: unknown option 'master_port' ignored", p.stderr)


if __name__ == "__main__":
    unittest.main()
