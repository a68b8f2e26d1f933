#!/usr/bin/env python3
"""publisher_acl: a local user other than root and the master's own user
publishes only the functions (and to the minions) the master config grants,
and nothing else of the local API; refusals are clear and logged."""

import os
import pwd
import shutil
import subprocess
import unittest

from harness import BRINE_BIN, ClusterCase, wait_log

USER = "nobody"  # Debian's unprivileged user; the test runs as root


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("runuser"),
                     "needs root and runuser to act as another user")
class PublisherAcl(ClusterCase):

    MINIONS = ["m1", "m2"]
    master_opts = {"publisher_acl": {
        USER: ["test.ping", "test.echo", {"m1": ["cmd.run"]}],
    }}

    @classmethod
    def before_start(cls):
        pwd.getpwnam(USER)

    @classmethod
    def after_start(cls):
        # The user reads the master config (for sock_dir) and reaches the
        # socket; mkdtemp made the directory 0700.
        os.chmod(cls.c.dir, 0o755)
        os.chmod(cls.c.config, 0o644)

    def as_user(self, *args):
        p = subprocess.run(["runuser", "-u", USER, "--", BRINE_BIN, args[0], "-c", self.c.config]
                           + list(args[1:]), capture_output=True, text=True, timeout=30,
                           cwd="/")
        return p.returncode, p.stdout, p.stderr

    def test_granted_functions_run(self):
        rc, out, err = self.as_user("cmd", "-t", "10", "*", "test.ping")
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"(?m)^m1:\n    True$")
        self.assertRegex(out, r"(?m)^m2:\n    True$")
        rc, out, err = self.as_user("cmd", "-t", "10", "m1", "cmd.run", "echo hi")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("hi", out)

    def test_other_functions_and_minions_are_refused(self):
        since = self.c.master.mark()
        rc, out, err = self.as_user("cmd", "-t", "10", "*", "cmd.run", "id")
        self.assertNotEqual(rc, 0)
        self.assertIn("publisher_acl does not allow user nobody to run cmd.run on minion m2", err)
        rc, out, err = self.as_user("cmd", "-t", "10", "*", "grains.items")
        self.assertNotEqual(rc, 0)
        self.assertIn("does not allow user nobody to run grains.items", err)
        wait_log(self.c.master, r"publish refused: publisher_acl does not allow user nobody", 5,
                 since)
        # The job cache never saw them.
        rc, out, err = self.c.brine("job", "list")
        self.assertNotIn("grains.items", out)

    def test_batch_resolves_only_what_the_acl_grants(self):
        rc, out, err = self.as_user("cmd", "--batch", "1", "-t", "10", "*", "test.ping")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out.count("True"), 2, out)
        rc, out, err = self.as_user("cmd", "--batch", "1", "-t", "10", "*", "cmd.run", "id")
        self.assertNotEqual(rc, 0)
        self.assertIn("publisher_acl does not allow user nobody to run cmd.run on minion m2", err)
        self.assertNotIn("Executing run", err)

    def test_only_publishing(self):
        rc, out, err = self.as_user("key", "list")
        self.assertNotEqual(rc, 0)
        self.assertIn("may only publish jobs", err)
        rc, out, err = self.as_user("key", "accept", "--all")
        self.assertNotEqual(rc, 0)

    def test_root_is_unrestricted(self):
        rc, out, err = self.c.brine("cmd", "-t", "10", "*", "cmd.run", "echo root")
        self.assertEqual(rc, 0, out + err)


if __name__ == "__main__":
    unittest.main()
