#!/usr/bin/env python3
"""Applying states: `brine call --local state.apply` and `brine cmd ...
state.apply` through a master, on a small tree in a sandbox directory: the
highstate output and its summary, --out json, exit codes, a second run that
changes nothing, test=True that changes nothing, and a broken sls."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import BRINE_BIN, SLACK, ClusterTestCase, write_config

TREE = {
    "top.sls": "base:\n  '*':\n    - web\n",
    "web.sls": """\
make_dir:
  cmd.run:
    - name: mkdir -p {{ grains['sandbox'] }}/www
    - creates: {{ grains['sandbox'] }}/www

index:
  cmd.run:
    - name: echo hello > {{ grains['sandbox'] }}/www/index.html
    - creates: {{ grains['sandbox'] }}/www/index.html
    - require:
      - cmd: make_dir

announce:
  cmd.run:
    - name: echo "index written"
    - onchanges:
      - cmd: index

checked:
  test.succeed_without_changes:
    - require:
      - cmd: index
""",
    "broken.sls": "this: is: not: yaml:\n  - [\n",
    "failing.sls": """\
bad:
  test.fail_without_changes

after_bad:
  test.nop:
    - require:
      - test: bad
""",
}


def write_tree(root):
    for name, text in TREE.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)


class LocalApplyTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="brine-apply-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sandbox = os.path.join(self.dir, "sandbox")
        os.makedirs(self.sandbox)
        roots = os.path.join(self.dir, "srv")
        os.makedirs(roots)
        write_tree(roots)
        self.config = os.path.join(self.dir, "minion")
        write_config(self.config, {
            "id": "local-minion",
            "file_client": "local",
            "file_roots": {"base": [roots]},
            "pki_dir": os.path.join(self.dir, "pki"),
            "cachedir": os.path.join(self.dir, "cache"),
            "grains": {"sandbox": self.sandbox},
        })

    def call(self, *args):
        p = subprocess.run([BRINE_BIN, "call", "--local", "-c", self.config] + list(args),
                           capture_output=True, text=True, timeout=120 * SLACK)
        return p.returncode, p.stdout, p.stderr

    def test_apply_twice_then_test_mode(self):
        rc, out, err = self.call("state.apply")
        self.assertEqual(rc, 0, out + err)
        self.assertTrue(out.startswith("local:\n----------\n          ID: make_dir\n"), out)
        self.assertIn("     Comment: Command \"echo \"index written\"\" run\n", out)
        self.assertRegex(out, r"\nSummary for local\n-+\nSucceeded: 4 \(changed=3\)\nFailed:    0\n"
                              r"-+\nTotal states run:     4\nTotal run time: +[\d.]+ m?s\n$")
        with open(os.path.join(self.sandbox, "www", "index.html")) as f:
            self.assertEqual(f.read(), "hello\n")

        # Second run: nothing to do, and the onchanges state is not run.
        rc, out, err = self.call("state.apply", "--out", "json")
        self.assertEqual(rc, 0, out + err)
        ret = json.loads(out)["local"]
        self.assertEqual(len(ret), 4)
        for tag, r in ret.items():
            self.assertEqual(r["changes"], {}, tag)
            self.assertIs(r["result"], True, tag)
        self.assertEqual(ret["cmd_|-index_|-echo hello > %s/www/index.html_|-run" % self.sandbox]
                         ["comment"], "%s/www/index.html exists" % self.sandbox)
        self.assertEqual(ret['cmd_|-announce_|-echo "index written"_|-run']["comment"],
                         "State was not run because none of the onchanges reqs changed")
        self.assertEqual(sorted(r["__run_num__"] for r in ret.values()), [0, 1, 2, 3])

        # test=True from scratch: None where it would change, nothing made.
        shutil.rmtree(os.path.join(self.sandbox, "www"))
        rc, out, err = self.call("state.apply", "web", "test=True", "--out", "json")
        self.assertEqual(rc, 0, out + err)
        ret = json.loads(out)["local"]
        self.assertIsNone(ret["cmd_|-make_dir_|-mkdir -p %s/www_|-run" % self.sandbox]["result"])
        self.assertFalse(os.path.exists(os.path.join(self.sandbox, "www")))

    def test_a_failed_state_exits_2_and_a_broken_sls_exits_1(self):
        rc, out, err = self.call("state.sls", "failing")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("     Comment: One or more requisite failed: failing.bad\n", out)
        self.assertIn("Failed:    2\n", out)
        rc, out, err = self.call("state.sls", "broken")
        self.assertEqual(rc, 1, out + err)
        self.assertTrue(out.startswith("local:\n    Data failed to compile:\n----------\n"), out)
        self.assertIn("Rendering SLS 'base:broken' failed", out)
        rc, out, err = self.call("state.sls", "nosuch")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("No matching sls found for 'nosuch' in env 'base'", out)

    def test_single_and_sls_id(self):
        rc, out, err = self.call("state.single", "test.succeed_with_changes", "name=one",
                                 "--out", "json")
        self.assertEqual(rc, 0, out + err)
        ret = json.loads(out)["local"]["test_|-one_|-one_|-succeed_with_changes"]
        self.assertEqual(ret["__id__"], "one")
        self.assertIsNone(ret["__sls__"])
        rc, out, err = self.call("state.sls_id", "index", "web", "--out", "json")
        self.assertEqual(rc, 0, out + err)
        ret = json.loads(out)["local"]
        # index and what it requires; not the others.
        self.assertEqual(sorted(r["__id__"] for r in ret.values()), ["index", "make_dir"])


class MasterApplyTest(ClusterTestCase):

    def test_apply_through_a_master(self):
        # The tree is the master's (its file server); the minion has none.
        c = self.cluster(master_opts={"file_roots": {"base": ["srv"]}})
        roots = c.path("srv")
        os.makedirs(roots)
        write_tree(roots)
        sandbox = c.path("sandbox")
        os.makedirs(sandbox)
        c.add_accepted_minion("m1", grains={"sandbox": sandbox})
        rc, out, err = c.brine("cmd", "-t", "60", "m1", "state.apply", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertTrue(out.startswith("m1:\n----------\n          ID: make_dir\n"), out)
        self.assertIn("\nSummary for m1\n", out)
        self.assertIn("Succeeded: 4 (changed=3)\n", out)
        rc, out, err = c.brine("cmd", "-t", "60", "--out", "json", "m1", "state.apply", "failing",
                               timeout=120)
        self.assertNotEqual(rc, 0, out + err)
        ret = json.loads(out)["m1"]
        self.assertIs(ret["test_|-bad_|-bad_|-fail_without_changes"]["result"], False)


if __name__ == "__main__":
    unittest.main()
