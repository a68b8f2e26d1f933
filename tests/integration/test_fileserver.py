#!/usr/bin/env python3
"""The master's salt:// file server: a minion with no state tree of its own
applies the master's, fetches files with cp.*, asks again only for what
changed (the master's log counts the requests), and is refused paths that
leave the roots; a masterless minion (master_type: disable) reads its own
file_roots."""

import json
import os
import re
import subprocess
import tempfile
import shutil
import unittest

from harness import BRINE_BIN, SLACK, ClusterTestCase, write_config

TREE = {
    "top.sls": "base:\n  '*':\n    - web\n",
    "web/init.sls": """\
site:
  cmd.run:
    - name: cp {{ salt['cp.cache_file']('salt://web/files/index.html') }} {{ grains['sandbox'] }}/index.html
    - unless: cmp -s {{ salt['cp.cache_file']('salt://web/files/index.html') }} {{ grains['sandbox'] }}/index.html
""",
    "web/files/index.html": "<h1>hello from the master</h1>\n",
    "web/files/css/site.css": "body { color: black }\n",
    "other.sls": "nothing:\n  test.nop\n",
}


def write_tree(root, tree):
    for name, text in tree.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


class FileServerTest(ClusterTestCase):

    def setUp(self):
        self.c = self.cluster(master_opts={"file_roots": {"base": ["srv", "srv2"]},
                                           "log_level": "debug"})
        self.roots = self.c.path("srv")
        write_tree(self.roots, TREE)
        # A second root: layered under the first (top.sls there is hidden).
        write_tree(self.c.path("srv2"), {"top.sls": "this is never read\n",
                                         "extra.txt": "from the second root\n"})
        # A file outside the roots and a symlink to it inside them.
        with open(self.c.path("secret.txt"), "w") as f:
            f.write("not for minions\n")
        os.symlink(self.c.path("secret.txt"), os.path.join(self.roots, "leak.txt"))
        self.sandbox = self.c.path("sandbox")
        os.makedirs(self.sandbox)
        # The minion has no file_roots of its own that hold anything.
        self.c.add_accepted_minion("m1", grains={"sandbox": self.sandbox},
                                   file_roots={"base": [self.c.path("empty")]})

    def cmd(self, *args):
        rc, out, err = self.c.brine("cmd", "-t", "60", "--out", "json", "m1", *args, timeout=120)
        self.assertEqual(rc, 0, out + err)
        return json.loads(out)["m1"]

    def test_state_tree_and_files_come_from_the_master(self):
        rc, out, err = self.c.brine("cmd", "-t", "60", "m1", "state.apply", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("Succeeded: 1 (changed=1)", out)
        with open(os.path.join(self.sandbox, "index.html")) as f:
            self.assertEqual(f.read(), TREE["web/files/index.html"])
        cache = self.c.path("minions", "m1", "cache", "files", "base")
        self.assertTrue(os.path.isfile(os.path.join(cache, "web", "init.sls")))

        # Second run: no change, and nothing fetched again (a fetched file
        # lands by rename, as a new inode; the cached copies keep theirs).
        before = {p: os.stat(os.path.join(cache, p)).st_ino
                  for p in ("web/init.sls", "top.sls", "web/files/index.html")}
        rc, out, err = self.c.brine("cmd", "-t", "60", "m1", "state.apply", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("Succeeded: 1\n", out)
        after = {p: os.stat(os.path.join(cache, p)).st_ino for p in before}
        self.assertEqual(before, after)

        # An edit on the master reaches the minion's next run.
        write_tree(self.roots, {"web/files/index.html": "<h1>edited</h1>\n"})
        rc, out, err = self.c.brine("cmd", "-t", "60", "m1", "state.apply", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("Succeeded: 1 (changed=1)", out)
        with open(os.path.join(self.sandbox, "index.html")) as f:
            self.assertEqual(f.read(), "<h1>edited</h1>\n")

        # A removed sls is gone from the minion's copy of the tree too.
        os.remove(os.path.join(self.roots, "other.sls"))
        rc, out, err = self.c.brine("cmd", "-t", "60", "--out", "json", "m1", "state.sls", "other",
                                    timeout=120)
        self.assertNotEqual(rc, 0, out + err)
        self.assertIn("No matching sls found for 'other' in env 'base'", out)

    def test_recurse_fetches_only_what_differs(self):
        # A directory on the master with a small file and one larger than
        # the prefetch limit (the state tree's mirror does not bring it; only
        # file.recurse asks for it).
        big = "x" * (1024 * 1024 + 10) + "\n"
        write_tree(self.roots, {
            "conf/app.conf": "setting = 1\n",
            "conf/data/big.bin": big,
            "recurse.sls": "conf:\n  file.recurse:\n    - name: {{ grains['sandbox'] }}/conf\n"
                           "    - source: salt://conf\n",
        })
        dest = os.path.join(self.sandbox, "conf")
        cache = self.c.path("minions", "m1", "cache", "files", "base")
        ret = self.cmd("state.sls", "recurse")
        state = next(iter(ret.values()))
        self.assertTrue(state["result"], state)
        self.assertEqual(state["comment"], "Recursively updated " + dest)
        self.assertEqual(sorted(state["changes"]),
                         sorted([dest + "/app.conf", dest + "/data", dest + "/data/big.bin"]))
        with open(os.path.join(dest, "data", "big.bin")) as f:
            self.assertEqual(f.read(), big)

        # Second run: the destination holds the master's bytes, so nothing is
        # fetched: the cached copy of the big file, removed here, stays away.
        os.remove(os.path.join(cache, "conf", "data", "big.bin"))
        dest_ino = os.stat(os.path.join(dest, "data", "big.bin")).st_ino
        ret = self.cmd("state.sls", "recurse")
        state = next(iter(ret.values()))
        self.assertTrue(state["result"], state)
        self.assertEqual(state["changes"], {})
        self.assertEqual(state["comment"], "The directory " + dest + " is in the correct state")
        self.assertFalse(os.path.exists(os.path.join(cache, "conf", "data", "big.bin")))
        self.assertEqual(os.stat(os.path.join(dest, "data", "big.bin")).st_ino, dest_ino)

        # A change on the master: that file (and only it) comes again.
        write_tree(self.roots, {"conf/data/big.bin": big + "more\n"})
        ret = self.cmd("state.sls", "recurse")
        state = next(iter(ret.values()))
        self.assertEqual(sorted(state["changes"]), [dest + "/data/big.bin"])
        self.assertTrue(os.path.exists(os.path.join(cache, "conf", "data", "big.bin")))
        with open(os.path.join(dest, "data", "big.bin")) as f:
            self.assertEqual(f.read(), big + "more\n")

    def test_cp_functions(self):
        self.assertEqual(self.cmd("cp.list_master"),
                         ["extra.txt", "other.sls", "top.sls", "web/files/css/site.css",
                          "web/files/index.html", "web/init.sls"])
        self.assertEqual(self.cmd("cp.list_master_dirs"), ["web", "web/files", "web/files/css"])
        self.assertEqual(self.cmd("cp.list_states"), ["other", "top", "web"])
        self.assertEqual(self.cmd("cp.envs"), ["base"])
        h = self.cmd("cp.hash_file", "salt://web/files/index.html")
        self.assertEqual(h["hash_type"], "sha256")
        self.assertRegex(h["hsum"], r"^[0-9a-f]{64}$")
        self.assertEqual(self.cmd("cp.hash_file", "salt://nope"), {})
        self.assertEqual(self.cmd("cp.get_file_str", "salt://extra.txt"), "from the second root\n")

        dest = os.path.join(self.sandbox, "got", "index.html")
        self.assertEqual(self.cmd("cp.get_file", "salt://web/files/index.html", dest), "")
        self.assertEqual(self.cmd("cp.get_file", "salt://web/files/index.html", dest,
                                  "makedirs=True"), dest)
        with open(dest) as f:
            self.assertEqual(f.read(), TREE["web/files/index.html"])
        got = self.cmd("cp.get_dir", "salt://web/files", os.path.join(self.sandbox, "dir"))
        self.assertEqual(got, [os.path.join(self.sandbox, "dir", "files", "css", "site.css"),
                               os.path.join(self.sandbox, "dir", "files", "index.html")])
        cached = self.cmd("cp.cache_file", "salt://web/files/css/site.css")
        self.assertTrue(cached.endswith("/files/base/web/files/css/site.css"), cached)
        self.assertIs(self.cmd("cp.cache_file", "salt://missing.txt"), False)

    def test_brine_call_uses_the_masters_file_server(self):
        # salt-call without --local: the state tree and salt:// files come
        # from the master, over the call's own connection, while the
        # daemon with the same key keeps its session.
        conf = os.path.join(self.c.minion_dir("m1"), "minion.conf")

        def call(*args):
            p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--out", "json"] + list(args),
                               capture_output=True, text=True, timeout=120 * SLACK,
                               cwd=self.c.minion_dir("m1"))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            return json.loads(p.stdout)["local"]

        ret = call("state.apply")
        (key, site), = ret.items()
        self.assertTrue(key.startswith("cmd_|-site_|-"), key)
        self.assertIs(site["result"], True, site)
        with open(os.path.join(self.sandbox, "index.html")) as f:
            self.assertEqual(f.read(), TREE["web/files/index.html"])
        self.assertEqual(call("cp.get_file_str", "salt://extra.txt"), "from the second root\n")
        self.assertEqual(call("cp.list_states"), ["other", "top", "web"])
        # The daemon's session is still there: a job reaches it.
        self.assertEqual(self.cmd("test.ping"), True)

    def test_paths_that_leave_the_roots_are_refused(self):
        self.assertNotIn("leak.txt", self.cmd("cp.list_master"))
        self.assertIs(self.cmd("cp.cache_file", "salt://leak.txt"), False)
        rc, out, err = self.c.brine("cmd", "-t", "60", "m1", "cp.cache_file", "salt://../secret.txt",
                                    timeout=120)
        self.assertNotEqual(rc, 0, out + err)
        self.assertIn("'..' in path", out + err)
        self.assertFalse(os.path.exists(os.path.join(self.sandbox, "secret.txt")))


class MasterlessTest(unittest.TestCase):

    def test_master_type_disable_reads_file_roots(self):
        d = tempfile.mkdtemp(prefix="brine-masterless-")
        self.addCleanup(shutil.rmtree, d, True)
        roots = os.path.join(d, "srv")
        write_tree(roots, {"top.sls": "base:\n  '*':\n    - a\n", "a.sls": "hi:\n  test.nop\n",
                           "f.txt": "local file\n"})
        config = os.path.join(d, "minion")
        # A Salt user's masterless minion config, unchanged.
        write_config(config, {"id": "solo", "master_type": "disable", "file_client": "local",
                              "file_roots": {"base": [roots]},
                              "pillar_roots": {"base": [os.path.join(d, "pillar")]},
                              "pki_dir": os.path.join(d, "pki"),
                              "cachedir": os.path.join(d, "cache")})
        p = subprocess.run([BRINE_BIN, "call", "-c", config, "--out", "json", "state.apply"],
                           capture_output=True, text=True, timeout=120 * SLACK)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("test_|-hi_|-hi_|-nop", json.loads(p.stdout)["local"])
        p = subprocess.run([BRINE_BIN, "call", "-c", config, "--out", "json", "cp.get_file_str",
                            "salt://f.txt"], capture_output=True, text=True, timeout=120 * SLACK)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(json.loads(p.stdout)["local"], "local file\n")


if __name__ == "__main__":
    unittest.main()
