#!/usr/bin/env python3
"""pkg and pkgrepo states as a user applies them: `brine call --local
state.apply` on an SLS that installs a package from a local apt repository
(tests/support/apt_repo.sh, seen alone through APT_CONFIG, no network),
manages and removes a source line, then re-applies (nothing changes) and
purges. Changes the machine's dpkg database, so it runs as root only and
purges its package before and after.

Salt's oracle cannot record these (docs/states.md says why), so the
comments asserted here are Salt's, transcribed from salt/states/pkg.py and
salt/states/pkgrepo.py."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BRINE_BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = "brine-test-integpkg"


def purge():
    subprocess.run(["dpkg", "--purge", PKG], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def installed_version():
    p = subprocess.run(["dpkg-query", "-W", "-f", "${Status}\t${Version}", PKG],
                       capture_output=True, text=True)
    if p.returncode != 0 or "ok installed\t" not in p.stdout:
        return ""
    return p.stdout.split("\t", 1)[1]


@unittest.skipUnless(os.geteuid() == 0, "needs root: installs and removes a package")
@unittest.skipUnless(shutil.which("apt-ftparchive"), "needs apt-ftparchive (apt-utils)")
class PkgStates(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="brine-pkg-")
        subprocess.run(["bash", os.path.join(ROOT, "tests", "support", "apt_repo.sh"),
                        self.dir, PKG + "=1.0", PKG + "=2.0"],
                       check=True, stdout=subprocess.DEVNULL)
        purge()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(purge)
        self.env = dict(os.environ, APT_CONFIG=os.path.join(self.dir, "apt.conf"))
        tree = os.path.join(self.dir, "tree")
        os.makedirs(tree)
        self.extra = os.path.join(self.dir, "sources.list.d", "extra.list")
        self.source = "deb [trusted=yes] file:%s/repo ./" % self.dir
        self.extra_line = "deb [arch=amd64] http://deb.brine.invalid/debian bookworm main"
        with open(os.path.join(tree, "pkgs.sls"), "w") as f:
            f.write("""
local_repo:
  pkgrepo.managed:
    - name: %s
extra_repo:
  pkgrepo.managed:
    - name: %s
    - file: %s
    - comments: managed by brine
    - refresh: False
hello:
  pkg.installed:
    - name: %s
    - version: '1.0'
    - hold: True
    - require:
      - pkgrepo: local_repo
""" % (json.dumps(self.source), json.dumps(self.extra_line), self.extra, PKG))
        with open(os.path.join(tree, "gone.sls"), "w") as f:
            f.write("""
hello_unheld:
  pkg.unheld:
    - name: %s
hello:
  pkg.purged:
    - name: %s
    - require:
      - pkg: hello_unheld
extra_repo:
  pkgrepo.absent:
    - name: %s
""" % (PKG, PKG, json.dumps(self.extra_line)))
        self.conf = os.path.join(self.dir, "minion")
        with open(self.conf, "w") as f:
            f.write("id: pkgminion\n")
            f.write("pki_dir: %s\n" % json.dumps(os.path.join(self.dir, "pki")))
            f.write("cachedir: %s\n" % json.dumps(os.path.join(self.dir, "cache")))
            f.write("file_roots: %s\n" % json.dumps({"base": [tree]}))
            f.write("pillar_roots: %s\n" % json.dumps({"base": [os.path.join(self.dir, "p")]}))

    def apply(self, sls, *extra):
        p = subprocess.run([BRINE_BIN, "call", "--local", "-c", self.conf, "--out", "json",
                            "state.apply", sls] + list(extra),
                           capture_output=True, text=True, timeout=600, env=self.env, cwd="/")
        try:
            out = json.loads(p.stdout)["local"]
        except (ValueError, KeyError):
            self.fail("brine call printed no returns (exit %d): %s %s" %
                      (p.returncode, p.stdout, p.stderr))
        return p.returncode, {v["__id__"]: v for v in out.values()}

    def test_install_reapply_and_remove(self):
        rc, test = self.apply("pkgs", "test=True")
        self.assertEqual(rc, 0)
        self.assertIsNone(test["hello"]["result"])
        self.assertEqual(test["hello"]["comment"],
                         "The following packages would be installed/updated: " + PKG)
        self.assertEqual(test["local_repo"]["comment"],
                         "Package repo '%s' already configured" % self.source)
        self.assertEqual(installed_version(), "")

        rc, first = self.apply("pkgs")
        self.assertEqual(rc, 0, first)
        self.assertEqual(first["hello"]["comment"],
                         "1 targeted package was installed/updated.\n"
                         "Package %s is now being held." % PKG)
        self.assertEqual(first["hello"]["changes"],
                         {PKG: {"old": "install", "new": "1.0\nhold"}})
        self.assertEqual(first["extra_repo"]["changes"], {"repo": self.extra_line})
        self.assertEqual(installed_version(), "1.0")
        with open(self.extra) as f:
            self.assertEqual(f.read(), self.extra_line + " #managed by brine\n")

        rc, again = self.apply("pkgs")
        self.assertEqual(rc, 0)
        for state in again.values():
            self.assertEqual(state["changes"], {}, state)
            self.assertTrue(state["result"], state)
        self.assertEqual(again["hello"]["comment"],
                         "All specified packages are already installed and are at the desired "
                         "version.\nPackage %s is already set to be held." % PKG)

        rc, gone = self.apply("gone")
        self.assertEqual(rc, 0, gone)
        self.assertEqual(gone["hello"]["comment"], "All targeted packages were purged.")
        self.assertEqual(gone["extra_repo"]["comment"], "Removed repo " + self.extra_line)
        self.assertEqual(installed_version(), "")
        self.assertFalse(os.path.exists(self.extra))

        rc, gone_again = self.apply("gone")
        self.assertEqual(gone_again["hello"]["comment"],
                         "None of the targeted packages are installed or partially installed")
        self.assertEqual(gone_again["extra_repo"]["comment"],
                         "Package repo %s is absent" % self.extra_line)


if __name__ == "__main__":
    unittest.main()
