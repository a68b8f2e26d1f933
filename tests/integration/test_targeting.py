#!/usr/bin/env python3
"""Targeting: every Salt target type resolved on the master against the
grains its minions sent, nodegroups from the master config, malformed
expressions, the grains cache across a master restart, and a minion whose
grains the master has not cached yet (greedy: it gets the publish and
decides with its own grains, as Salt's minions do)."""

import json
import subprocess
import unittest

from harness import BRINE_BIN, Cluster, ClusterCase, tail, wait_for

# id -> custom grains (over the real core grains of this host)
GRAINS = {
    "web1": {"roles": ["web"], "env": "prod", "planets": {"mercury": "hot"}},
    "web2": {"roles": ["web", "cache"], "env": "staging", "planets": {"mars": "red"}},
    "db1": {"roles": ["db"], "env": "prod", "planets": {"mercury": "cold"}},
}

NODEGROUPS = {
    "webs": "G@roles:web",
    "prod_webs": "N@webs and G@env:prod",
    "listed": ["db1", "web2"],
}


def wait_cached(c, mid):
    """The grains reach the cache right after acceptance: a grain target
    naming the minion alone finds it once they are there."""
    def cached():
        rc, out, _ = c.brine("cmd", "--out", "json", "-t", "5", "-C",
                             "G@id:%s and L@%s" % (mid, mid), "test.ping")
        return rc == 0 and json.loads(out) == {mid: True}
    wait_for(cached, 15, "grains of %s in the master's cache" % mid)


def job_count(c):
    rc, out, err = c.brine("job", "list")
    assert rc == 0, err
    return len(out.splitlines())


class Targeting(ClusterCase):

    MINIONS = {mid: {"grains": grains} for mid, grains in GRAINS.items()}
    master_opts = {"nodegroups": NODEGROUPS}

    @classmethod
    def after_start(cls):
        for mid in GRAINS:
            wait_cached(cls.c, mid)


    def targets(self, *args):
        """The ids that returned, for `brine cmd ARGS test.ping`."""
        rc, out, err = self.c.brine("cmd", "--out", "json", "-t", "10", *args, "test.ping")
        self.assertEqual(rc, 0, "brine cmd %s: stdout %r stderr %r" % (args, out, err))
        ret = json.loads(out)
        self.assertTrue(all(v is True for v in ret.values()), ret)
        return sorted(ret)

    def test_every_type(self):
        table = [
            (["web*"], ["web1", "web2"]),
            (["-E", r"^(web1|db\d)$"], ["db1", "web1"]),
            (["-L", "web1,db1"], ["db1", "web1"]),
            (["-G", "roles:web"], ["web1", "web2"]),
            (["-G", "env:prod"], ["db1", "web1"]),
            (["-G", "planets:mercury:hot"], ["web1"]),
            (["-G", "planets:*:red"], ["web2"]),
            (["--delimiter", "%", "-G", "planets%mercury%co*"], ["db1"]),
            (["-P", "roles:^(db|cache)$"], ["db1", "web2"]),
            (["-S", "127.0.0.0/8"], ["db1", "web1", "web2"]),
            (["-N", "webs"], ["web1", "web2"]),
            (["-N", "prod_webs"], ["web1"]),
            (["-N", "listed"], ["db1", "web2"]),
            (["-C", "G@env:prod and not web*"], ["db1"]),
            (["-C", "not G@env:prod"], ["web2"]),
            (["-C", "( G@roles:db or G@roles:cache ) and E@.*1"], ["db1"]),
            (["-C", "web1 or G@roles:db"], ["db1", "web1"]),
            (["-C", "G%@planets%mars%red"], ["web2"]),
            (["-C", "N@webs and not G@roles:cache"], ["web1"]),
            (["-C", "S@127.0.0.1 and L@web2"], ["web2"]),
        ]
        for args, want in table:
            with self.subTest(args=args):
                self.assertEqual(self.targets(*args), want)

    def test_no_match_sends_nothing(self):
        rc, out, err = self.c.brine("cmd", "-G", "roles:nothing", "test.ping")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("No minions matched the target", err)

    def test_malformed_expressions_name_the_token(self):
        table = [
            (["-C", "G@env:prod and and web1"], "and"),
            (["-C", "( web1 or db1"], "("),
            (["-C", "X@foo"], "X@foo"),
            (["-E", "web(1"], "web(1"),
            (["-N", "nosuchgroup"], "nosuchgroup"),
            (["-S", "300.1.1.1/8"], "300.1.1.1/8"),
        ]
        for args, token in table:
            with self.subTest(args=args):
                rc, out, err = self.c.brine("cmd", *args, "test.ping")
                self.assertEqual(rc, 3, "rc %d out %r err %r" % (rc, out, err))
                self.assertIn(token, err)
                self.assertEqual(out, "")

    def test_list_names_a_minion_without_key(self):
        rc, out, err = self.c.brine("cmd", "-L", "web1,ghost", "test.ping")
        self.assertEqual(rc, 2, out + err)
        self.assertRegex(out, r"(?m)^web1:\n    True$")
        self.assertRegex(out, r"(?m)^ghost:\n    Minion did not return. \[No accepted key\]$")

    def test_job_records_the_target(self):
        rc, out, err = self.c.brine("cmd", "--async", "-G", "roles:db", "test.ping")
        self.assertEqual(rc, 0, err)
        jid = out.split()[-1]
        job = self.c.job(jid)
        self.assertEqual(job["tgt_type"], "grain", job)
        self.assertEqual(job["minions"], ["db1"], job)


class Cache(unittest.TestCase):

    def test_grains_cache_survives_restart_and_uncached_minions_are_greedy(self):
        c = Cluster()
        try:
            c.add_accepted_minion("a1", grains={"roles": ["web"]})
            c.add_accepted_minion("a2", grains={"roles": ["db"]})
            wait_cached(c, "a1")
            wait_cached(c, "a2")
            # a2 stops; the master restarts and still knows a2's grains: a
            # grain target names it (and it is reported as not connected).
            rc = c.minions["a2"].terminate()
            self.assertEqual(rc, 0)
            c.restart_master()
            c.wait_connected("a1", timeout=20)
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "2", "-G", "roles:db",
                                   "test.ping")
            self.assertEqual(rc, 2, out + err)
            self.assertIn("a2: Minion did not return. [Not connected]", err)

            # a3: accepted before it ever connected, so nothing is cached:
            # greedy, a grain target includes it and holds the publish; when
            # it connects, its own grains say no and it is left out quietly.
            c.add_minion("a3", start=False, grains={"roles": ["web"]})
            # Its key: start it once to make the key pending, accept, stop.
            m = c.minions["a3"]
            m.start()
            c.wait_pending("a3")
            m.terminate()
            rc, _, err = c.brine("key", "accept", "a3")
            self.assertEqual(rc, 0, err)
            jobs = job_count(c)
            p = subprocess.Popen([BRINE_BIN, "cmd", "-c", c.config, "--out", "json", "-t", "15",
                                  "-G", "roles:db", "test.ping"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=c.dir)
            try:
                # The job names a3 (not cached: greedy) and a2 (cached db).
                wait_for(lambda: job_count(c) > jobs, 10, "the job in the job cache")
                c.minions["a2"].start()
                m.start()
                out, err = p.communicate(timeout=40)
            finally:
                if p.poll() is None:
                    p.kill()
            out, err = out.decode(), err.decode()
            self.assertEqual(p.returncode, 0, "out %r err %r\nmaster:\n%s" %
                             (out, err, tail(c.master.log())))
            self.assertEqual(json.loads(out), {"a2": True})
            self.assertNotIn("a3", err)
            # The job cache leaves a3 out too: not a target after all.
            rc, out, _ = c.brine("job", "list", "--limit", "1")
            self.assertIn("  1/1 returned", out)
            job = c.job(out.split()[0])
            self.assertEqual((job["minions"], job["undelivered"]), (["a2"], {}), job)
        finally:
            c.stop()


if __name__ == "__main__":
    unittest.main()
