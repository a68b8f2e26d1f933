#!/usr/bin/env python3
"""Pillar and the minion-side modules: pillar compiled on the master per
minion from pillar_roots and its top file, sent to that minion alone (never
logged), refreshed on request; pillar targets; grains.setval and
saltutil.refresh_grains reaching the master's targeting; saltutil.running
and kill_job on a real job."""

import json
import os
import re
import subprocess
import textwrap
import unittest

from harness import BRINE_BIN, Cluster, wait_for

SECRET = "s3cret-Pillar-Value"

TREE = {
    "top.sls": """
        base:
          '*':
            - common
          'G@roles:web':
            - match: compound
            - web
          'db1':
            - db
        """,
    "common.sls": """
        common:
          ntp: pool.ntp.org
        users:
          alice:
            uid: 1000
        """,
    "web.sls": """
        users:
          bob:
            uid: 1001
        web:
          port: 80
        """,
    "db.sls": """
        db:
          password: %s
        """ % SECRET,
}


def write_tree(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip())


class Pillar(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(start=False)
        try:
            cls.root = cls.c.path("pillar")
            write_tree(cls.root, TREE)
            cls.c.master_options["pillar_roots"] = {"base": [cls.root]}
            from harness import write_config
            write_config(cls.c.config, cls.c.master_options)
            cls.c.start_master()
            cls.c.add_accepted_minion("web1", grains={"roles": ["web"]})
            cls.c.add_accepted_minion("db1", grains={"roles": ["db"]})
            for mid in ("web1", "db1"):
                wait_for(lambda: "common" in cls.call(mid, "pillar.ls"), 15,
                         "the pillar of %s" % mid)
        except BaseException:
            cls.c.abort()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()

    @classmethod
    def call(cls, mid, *fun_args, rc=0):
        code, out, err = cls.c.brine("cmd", "--out", "json", "-t", "10", mid, *fun_args)
        assert code == rc, "%s %s: rc %d out %r err %r" % (mid, fun_args, code, out, err)
        return json.loads(out)[mid]

    def test_each_minion_gets_its_own_merged_pillar(self):
        web = self.call("web1", "pillar.items")
        self.assertEqual(web, {"common": {"ntp": "pool.ntp.org"},
                               "users": {"alice": {"uid": 1000}, "bob": {"uid": 1001}},
                               "web": {"port": 80}})
        db = self.call("db1", "pillar.items")
        self.assertEqual(db["db"], {"password": SECRET})
        self.assertNotIn("web", db)
        self.assertEqual(self.call("web1", "pillar.get", "users:bob:uid"), 1001)
        self.assertEqual(self.call("web1", "pillar.get", "db:password", "default=none"), "none")
        self.assertEqual(self.call("web1", "pillar.item", "web"), {"web": {"port": 80}})

    def test_pillar_is_never_logged(self):
        self.call("db1", "pillar.items")
        for d in [self.c.master] + list(self.c.minions.values()):
            self.assertNotIn(SECRET, d.log(), "the pillar secret is in the log of %r" % d)

    def test_pillar_targets(self):
        rc, out, err = self.c.brine("cmd", "--out", "json", "-t", "10", "-I", "web:port:80",
                                    "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"web1": True})
        rc, out, err = self.c.brine("cmd", "--out", "json", "-t", "10", "-C",
                                    "J@users:alice:uid:10+ and not I@web:port:80", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"db1": True})

    def test_refresh_reads_the_tree_again_and_errors_reach_the_minion(self):
        write_tree(self.root, {"web.sls": TREE["web.sls"].replace("port: 80", "port: 8080")})
        self.assertIs(self.call("web1", "saltutil.refresh_pillar"), True)
        wait_for(lambda: self.call("web1", "pillar.get", "web:port") == 8080, 10,
                 "the refreshed pillar on web1")
        # A Jinja file is refused with a message that names it, in _errors.
        write_tree(self.root, {"web.sls": "web:\n  port: {{ 8081 }}\n"})
        try:
            self.call("web1", "saltutil.refresh_pillar")
            wait_for(lambda: "_errors" in self.call("web1", "pillar.items"), 10,
                     "_errors in web1's pillar")
            errors = self.call("web1", "pillar.get", "_errors")
            self.assertTrue(any("web.sls" in e and "Jinja" in e for e in errors), errors)
        finally:
            write_tree(self.root, {"web.sls": TREE["web.sls"]})
            self.call("web1", "saltutil.refresh_pillar")
            wait_for(lambda: self.call("web1", "pillar.get", "web:port") == 80, 10,
                     "web1's pillar restored")


    def test_brine_call_uses_the_pillar_the_master_compiled(self):
        conf = os.path.join(self.c.minion_dir("web1"), "minion.conf")
        cache = os.path.join(self.c.minion_dir("web1"), "cache", "pillar.json")
        wait_for(lambda: os.path.exists(cache), 10, "the pillar kept by web1")
        self.assertEqual(os.stat(cache).st_mode & 0o777, 0o600)
        p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--out", "json", "pillar.get",
                            "web:port"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), {"local": 80})


class Masterless(unittest.TestCase):

    def test_call_local_compiles_pillar_from_the_minion_config(self):
        c = Cluster(start=False)
        try:
            root = c.path("pillar")
            write_tree(root, TREE)
            d = c.minion_dir("solo")
            os.makedirs(d)
            conf = os.path.join(d, "minion.conf")
            from harness import write_config
            write_config(conf, {"id": "db1", "pki_dir": "pki", "cachedir": "cache",
                                "grains": {"roles": ["db"]}, "pillar_roots": {"base": [root]}})

            def call(*args):
                p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--local"] + list(args),
                                   capture_output=True, text=True, timeout=30)
                return p.returncode, p.stdout, p.stderr
            rc, out, err = call("--out", "json", "pillar.items")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out), {"local": {
                "common": {"ntp": "pool.ntp.org"}, "users": {"alice": {"uid": 1000}},
                "db": {"password": SECRET}}})
            rc, out, err = call("grains.get", "roles")
            self.assertEqual((rc, out), (0, "local:\n    - db\n"), err)
            rc, out, err = call("--out", "json", "grains.get", "id")
            self.assertEqual(json.loads(out), {"local": "db1"})
            # salt-call's exit status is the function's retcode.
            rc, out, err = call("test.retcode", "7")
            self.assertEqual(rc, 7)
            rc, out, err = call("no.such_function")
            self.assertEqual(rc, 254)
            self.assertIn("'no.such_function' is not available.", out)
        finally:
            c.abort()


class MinionModules(unittest.TestCase):

    def test_grains_setval_reaches_targeting_and_running_jobs_can_be_killed(self):
        c = Cluster()
        try:
            c.add_accepted_minion("m1")
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "10", "m1", "grains.setval",
                                   "deploy", "blue")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out), {"m1": {"deploy": "blue"}})
            with open(os.path.join(c.minion_dir("m1"), "grains")) as f:
                self.assertEqual(json.load(f), {"deploy": "blue"})

            def targeted():
                rc, out, _ = c.brine("cmd", "--out", "json", "-t", "5", "-G", "deploy:blue",
                                     "test.ping")
                return rc == 0 and json.loads(out) == {"m1": True}
            wait_for(targeted, 10, "the new grain in the master's cache")

            # A long job shows in saltutil.running and dies by kill_job.
            rc, out, err = c.brine("cmd", "--async", "m1", "test.sleep", "300")
            self.assertEqual(rc, 0, err)
            jid = re.search(r"job ID: (\d+)", out).group(1)
            running = []

            def listed():
                rc, out, _ = c.brine("cmd", "--out", "json", "-t", "5", "m1", "saltutil.running")
                running[:] = json.loads(out)["m1"] if rc == 0 else []
                return any(j["jid"] == jid for j in running)
            wait_for(listed, 10, "the sleep in saltutil.running")
            job = [j for j in running if j["jid"] == jid][0]
            self.assertEqual(job["fun"], "test.sleep")
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "5", "m1", "saltutil.kill_job",
                                   jid)
            self.assertEqual(json.loads(out), {"m1": "Signal 9 sent to job " + jid})
            wait_for(lambda: "m1" in c.job(jid).get("returns", {}), 10, "the killed job's return")
            ret = c.job(jid)["returns"]["m1"]
            self.assertIn("cancelled", ret)
        finally:
            c.stop()


if __name__ == "__main__":
    unittest.main()
