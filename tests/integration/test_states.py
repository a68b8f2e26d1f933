#!/usr/bin/env python3
"""The state compiler driven as a user drives it: `brine call --local` on a
minion config that names a state tree (file_roots, pillar_roots, grains with
grains_blacklist ['*'], as the fixtures were recorded with Salt 3006.26)
prints the bytes Salt printed; and `brine cmd ... state.show_lowstate`
through a master returns the same chunks."""

import collections
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BRINE_BIN, Cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = os.path.join(ROOT, "tests", "fixtures", "states")
GRAINS = os.path.join(ROOT, "src", "grains", "tests", "fixtures", "expected")
PLATFORM = "debian-12"


def grains_block(platform):
    """The fixture grains as the `grains:` option, indented under it."""
    lines = ["grains:"]
    with open(os.path.join(GRAINS, platform + ".yaml")) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#") or line.startswith("---"):
                continue
            lines.append("  " + line)
    return "\n".join(lines) + "\n"


def expected(tree, name):
    with open(os.path.join(TREES, tree, "expected", PLATFORM, name + ".json")) as f:
        return f.read()


def exit_code(tree, name):
    with open(os.path.join(TREES, tree, "expected", PLATFORM, "exit_codes.json")) as f:
        return json.load(f)[name]


class Masterless(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="brine-states-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def config(self, tree):
        tree_dir = os.path.join(TREES, tree)
        path = os.path.join(self.dir, tree + ".conf")
        roots = {"base": [os.path.join(tree_dir, "salt")]}
        if os.path.isdir(os.path.join(tree_dir, "salt-dev")):
            roots["dev"] = [os.path.join(tree_dir, "salt-dev")]
        with open(path, "w") as f:
            f.write("id: minion1\n")
            f.write("pki_dir: %s\n" % json.dumps(os.path.join(self.dir, "pki")))
            f.write("cachedir: %s\n" % json.dumps(os.path.join(self.dir, "cache")))
            f.write("file_roots: %s\n" % json.dumps(roots))
            f.write("pillar_roots: %s\n" %
                    json.dumps({"base": [os.path.join(tree_dir, "pillar")]}))
            f.write("grains_blacklist: ['*']\n")
            f.write(grains_block(PLATFORM))
        return path

    def call(self, tree, *args):
        r = subprocess.run([BRINE_BIN, "call", "--local", "-c", self.config(tree)] + list(args) +
                           ["--out", "json"], capture_output=True, text=True, timeout=120,
                           cwd="/")
        return r.returncode, r.stdout, r.stderr

    def test_lowstate_is_salts_byte_for_byte(self):
        for tree in ("requisites", "formula", "order", "includes", "top_targets", "bench"):
            with self.subTest(tree=tree):
                rc, out, err = self.call(tree, "state.show_lowstate")
                self.assertEqual(rc, exit_code(tree, "state.show_lowstate"), err)
                self.assertEqual(out, expected(tree, "state.show_lowstate"))

    def test_highstate_top_and_one_sls(self):
        for name, args in (("state.show_top", ["state.show_top"]),
                           ("state.show_highstate", ["state.show_highstate"]),
                           ("state.show_sls__nginx", ["state.show_sls", "nginx"]),
                           ("state.show_low_sls__nginx", ["state.show_low_sls", "nginx"])):
            with self.subTest(call=name):
                rc, out, err = self.call("formula", *args)
                self.assertEqual(rc, exit_code("formula", name), err)
                self.assertEqual(out, expected("formula", name))

    def test_errors_are_salts_list_and_exit_code(self):
        for name, args in (("state.show_sls__app.missing_include",
                            ["state.show_sls", "app.missing_include"]),
                           ("state.show_sls__app.not_there", ["state.show_sls", "app.not_there"]),
                           ("state.show_sls__app.bad_requisite",
                            ["state.show_sls", "app.bad_requisite"])):
            with self.subTest(call=name):
                rc, out, err = self.call("errors", *args)
                self.assertEqual(rc, exit_code("errors", name), err)
                self.assertEqual(out, expected("errors", name))


class ThroughAMaster(unittest.TestCase):
    """The master serves the formula tree (its file_roots, through its file
    server) and the tree's pillar. The pillar reaches the minion, and the return the
    CLI, in Salt's key order: the output is compared with Salt's, order
    and all."""

    def test_show_lowstate_through_the_master(self):
        tree_dir = os.path.join(TREES, "formula")
        c = Cluster(master_opts={"auto_accept": True,
                                 "file_roots": {"base": [os.path.join(tree_dir, "salt")]},
                                 "pillar_roots": {"base": [os.path.join(tree_dir, "pillar")]}})
        try:
            c.add_minion("minion1", start=False, grains_blacklist=["*"])
            with open(os.path.join(c.minion_dir("minion1"), "minion.conf"), "a") as f:
                f.write(grains_block(PLATFORM))
            c.minions["minion1"].start()
            c.wait_connected("minion1")
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "60", "minion1",
                                   "state.show_lowstate")
            self.assertEqual(rc, 0, err)
            # OrderedDicts: equal only with their keys in the same order.
            want = json.loads(expected("formula", "state.show_lowstate"),
                              object_pairs_hook=collections.OrderedDict)["local"]
            got = json.loads(out, object_pairs_hook=collections.OrderedDict)["minion1"]
            self.assertEqual(got, want)
            self.assertEqual(list(got[0].keys()), list(want[0].keys()))
        finally:
            c.stop()


if __name__ == "__main__":
    unittest.main()
