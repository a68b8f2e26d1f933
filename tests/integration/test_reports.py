#!/usr/bin/env python3
"""State-run reports: every state run that minions return through a master is
kept as a report; `brine report list` filters them (minion, status, since,
last per minion) and `brine report show` prints one run's states with Salt's
highstate outputter. Both stores: SQLite (the default) and PostgreSQL (a
real server on a loopback port, pgserver.py). Retention (keep_reports) is
checked on a master restart, which purges at start."""

import json
import os
import re
import sqlite3
import unittest

from harness import ClusterTestCase, wait_for
from pgserver import PostgresServer, require_postgres

TREE = {
    "top.sls": "base:\n  '*':\n    - mixed\n",
    "mixed.sls": """\
changed:
  test.succeed_with_changes

same:
  test.succeed_without_changes

ran:
  cmd.run:
    - name: echo hello
""",
    "quiet.sls": """\
one:
  test.succeed_without_changes

two:
  test.succeed_without_changes
""",
    "failing.sls": """\
fine:
  test.succeed_with_changes

bad:
  test.fail_without_changes
""",
    "broken.sls": "this: is: not: yaml:\n  - [\n",
}


def write_tree(root):
    os.makedirs(root)
    for name, text in TREE.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)


class ReportsTestCase(ClusterTestCase):

    def setup_master(self, minions, **master_opts):
        # The tree is the master's: its file server gives it to the minions.
        master_opts.setdefault("file_roots", {"base": ["srv"]})
        c = self.cluster(master_opts=master_opts)
        roots = c.path("srv")
        write_tree(roots)
        for mid in minions:
            c.add_accepted_minion(mid)
        return c

    def run_states(self, c, target, *args, ok=True):
        """Runs a state function through the master; returns its jid."""
        rc, out, err = c.brine("cmd", "-t", "60", "--show-jid", target, *args, timeout=120)
        if ok:
            self.assertEqual(rc, 0, out + err)
        else:
            self.assertNotEqual(rc, 0, out + err)
        m = re.search(r"^jid: (\d+)$", out, re.M)
        self.assertIsNotNone(m, out + err)
        return m.group(1)

    def reports(self, c, *args):
        rc, out, err = c.brine("report", "list", "--out", "json", *args)
        self.assertEqual(rc, 0, out + err)
        return json.loads(out)

    def wait_reports(self, c, n):
        """Reports are written right after their returns commit, so a CLI
        that has printed the returns may look a moment before they are."""
        wait_for(lambda: len(self.reports(c)) >= n, 20, "%d reports in 'brine report list'" % n)
        return self.reports(c)

    def by_key(self, reports):
        return {(r["jid"], r["minion"]): r for r in reports}


class SqliteReportsTest(ReportsTestCase):

    def test_runs_are_reported_listed_filtered_and_shown(self):
        c = self.setup_master(["m1", "m2"])
        highstate = self.run_states(c, "*", "state.apply")
        quiet = self.run_states(c, "m1", "state.sls", "quiet")
        failing = self.run_states(c, "m2", "state.sls", "failing", ok=False)
        broken = self.run_states(c, "m1", "state.sls", "broken", ok=False)
        dry = self.run_states(c, "m1", "state.apply", "test=True")
        rc, out, err = c.brine("cmd", "-t", "30", "m1", "test.ping")
        self.assertEqual(rc, 0, out + err)

        reports = self.by_key(self.wait_reports(c, 6))
        # Not a state run: no report.
        self.assertEqual(len(reports), 6, sorted(reports))

        r = reports[(highstate, "m1")]
        self.assertEqual(r["fun"], "state.apply")
        self.assertEqual(r["status"], "changed")
        self.assertIs(r["test"], False)
        self.assertEqual(r["counts"], {"succeeded": 3, "failed": 0, "changed": 2, "pending": 0,
                                       "total": 3})
        self.assertEqual(r["timings"]["test"]["states"], 2)
        self.assertEqual(r["timings"]["cmd"]["states"], 1)
        self.assertGreater(r["timings"]["cmd"]["ms"], 0)
        self.assertGreaterEqual(r["duration_ms"], r["timings"]["cmd"]["ms"])
        self.assertNotIn("return", r)  # a list has no returns
        self.assertEqual(reports[(highstate, "m2")]["status"], "changed")

        self.assertEqual(reports[(quiet, "m1")]["status"], "unchanged")
        self.assertEqual(reports[(quiet, "m1")]["counts"]["changed"], 0)

        r = reports[(failing, "m2")]
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["retcode"], 2)
        self.assertEqual(r["counts"], {"succeeded": 1, "failed": 1, "changed": 1, "pending": 0,
                                       "total": 2})

        r = reports[(broken, "m1")]
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["counts"]["total"], 0)
        self.assertTrue(any("Rendering SLS 'base:broken' failed" in e for e in r["errors"]),
                        r["errors"])

        r = reports[(dry, "m1")]
        self.assertIs(r["test"], True)
        self.assertEqual(r["status"], "changed")
        self.assertGreaterEqual(r["counts"]["pending"], 1)

        # Newest first: the test run was the last.
        listed = self.reports(c)
        self.assertEqual((listed[0]["jid"], listed[0]["minion"]), (dry, "m1"))
        starts = [r["started_ms"] for r in listed]
        self.assertEqual(starts, sorted(starts, reverse=True))

        # Filters.
        failed = self.reports(c, "--status", "failed")
        self.assertEqual(sorted((r["jid"], r["minion"]) for r in failed),
                         sorted([(failing, "m2"), (broken, "m1")]))
        self.assertEqual({r["minion"] for r in self.reports(c, "--minion", "m2")}, {"m2"})
        self.assertEqual(len(self.reports(c, "--minion", "m2")), 2)
        self.assertEqual(len(self.reports(c, "--minion", "m*")), 6)
        self.assertEqual(len(self.reports(c, "--minion", "x*")), 0)
        self.assertEqual(len(self.reports(c, "--status", "unchanged", "--minion", "m1")), 1)
        self.assertEqual(len(self.reports(c, "--since", "1h")), 6)
        self.assertEqual(self.reports(c, "--since", "2099-01-01"), [])
        self.assertEqual([(r["jid"], r["minion"]) for r in self.reports(c, "--limit", "1")],
                         [(dry, "m1")])
        # The last run of each minion; with --status, minions whose last run failed.
        last = self.by_key(self.reports(c, "--last"))
        self.assertEqual(sorted(last), sorted([(dry, "m1"), (failing, "m2")]))
        self.assertEqual([(r["jid"], r["minion"]) for r in
                          self.reports(c, "--last", "--status", "failed")], [(failing, "m2")])

        # The table.
        rc, out, err = c.brine("report", "list", "--status", "failed")
        self.assertEqual(rc, 0, out + err)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("JID"), out)
        self.assertIn("STATUS", lines[0])
        self.assertEqual(len(lines), 3, out)
        self.assertTrue(any(l.startswith(failing) and " m2 " in l and " failed " in l
                            for l in lines), out)
        rc, out, err = c.brine("report", "list", "--minion", "nobody")
        self.assertEqual((rc, out), (0, "no reports match\n"), err)

        # One run's states, as the highstate outputter prints them.
        rc, out, err = c.brine("report", "show", failing, "m2", "--no-color")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("status: failed\n", out)
        self.assertIn("\nm2:\n----------\n", out)
        self.assertIn("          ID: bad\n    Function: test.fail_without_changes\n", out)
        self.assertIn("      Result: False\n", out)
        self.assertIn("\nSummary for m2\n", out)
        self.assertIn("Succeeded: 1 (changed=1)\nFailed:    1\n", out)
        rc, out, err = c.brine("report", "show", broken, "m1", "--no-color")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("Data failed to compile:", out)
        rc, out, err = c.brine("report", "show", highstate, "m1", "--out", "json")
        self.assertEqual(rc, 0, out + err)
        shown = json.loads(out)
        self.assertEqual(shown["status"], "changed")
        self.assertEqual(sorted(v["__id__"] for v in shown["return"].values()),
                         ["changed", "ran", "same"])
        self.assertIs(shown["return"]["cmd_|-ran_|-echo hello_|-run"]["result"], True)

        # Mistakes get one clear line.
        rc, out, err = c.brine("report", "show", highstate, "m3")
        self.assertEqual(rc, 1)
        self.assertIn("no report of minion m3 for job %s" % highstate, err)
        rc, out, err = c.brine("report", "list", "--since", "yesterday")
        self.assertEqual(rc, 1)
        self.assertIn("--since takes a duration back from now", err)
        rc, out, err = c.brine("report", "list", "--status", "broken")
        self.assertNotEqual(rc, 0)
        self.assertIn("--status", err)

    def test_old_reports_are_purged_but_each_minions_last_stays(self):
        c = self.setup_master(["m1"], keep_reports=1)
        first = self.run_states(c, "m1", "state.sls", "quiet")
        second = self.run_states(c, "m1", "state.sls", "quiet")
        self.wait_reports(c, 2)
        # Age both by two hours, as if the master had been down meanwhile
        # (the store is the master's SQLite file: nothing else writes it).
        db = sqlite3.connect(c.path("master-cache", "jobs.db"), timeout=10)
        with db:
            db.execute("UPDATE reports SET started = started - 7200000")
        db.close()
        # A master purges at start, then every 10 minutes.
        c.restart_master()
        wait_for(lambda: len(self.reports(c)) == 1, 20, "the older report to be purged")
        left = self.reports(c)
        self.assertEqual((left[0]["jid"], left[0]["minion"]), (second, "m1"))
        rc, out, err = c.brine("report", "show", first, "m1")
        self.assertEqual(rc, 1, out + err)


class PostgresReportsTest(ReportsTestCase):

    @classmethod
    def setUpClass(cls):
        require_postgres()
        cls.pg = PostgresServer()
        cls.pg.start()

    @classmethod
    def tearDownClass(cls):
        cls.pg.cleanup()

    def test_reports_in_a_shared_store(self):
        db = "brine_reports_%d" % os.getpid()
        self.pg.create_database(db)
        pw = os.path.join(self.pg.dir, db + ".pw")
        self.pg.password_file(pw)
        c = self.setup_master(["m1", "m2"], store=self.pg.url(db), store_password_file=pw)
        quiet = self.run_states(c, "*", "state.sls", "quiet")
        failing = self.run_states(c, "m1", "state.sls", "failing", ok=False)
        reports = self.by_key(self.wait_reports(c, 3))
        self.assertEqual(sorted(reports), sorted([(quiet, "m1"), (quiet, "m2"), (failing, "m1")]))
        self.assertEqual(reports[(quiet, "m2")]["status"], "unchanged")
        self.assertEqual(reports[(failing, "m1")]["status"], "failed")
        self.assertEqual([(r["jid"], r["minion"]) for r in self.reports(c, "--status", "failed")],
                         [(failing, "m1")])
        self.assertEqual(len(self.reports(c, "--minion", "m[2-9]")), 1)
        last = self.by_key(self.reports(c, "--last"))
        self.assertEqual(sorted(last), sorted([(failing, "m1"), (quiet, "m2")]))
        rc, out, err = c.brine("report", "show", failing, "m1", "--no-color")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("          ID: bad\n", out)
        self.assertIn("Failed:    1\n", out)
        # The rows are in PostgreSQL, not in a SQLite file.
        self.assertEqual(self.pg.psql("SELECT count(*) FROM reports", db=db).strip(), "3")
        self.assertFalse(os.path.exists(c.path("master-cache", "jobs.db")))


if __name__ == "__main__":
    unittest.main()
