#!/usr/bin/env python3
"""`brine swarm`: simulated minions with their own keys and connections, the
real protocol and the real test.* functions, against a real master."""

import json
import os
import re
import resource
import signal
import subprocess
import threading
import time
import unittest

from harness import BRINE_BIN, ClusterTestCase, wait_for, wait_log

COUNT = 40


class Swarm:
    def __init__(self, cluster, count=COUNT, prefix="sw-", extra=()):
        self.keys = cluster.path("swarm-keys")
        self.proc = subprocess.Popen(
            [BRINE_BIN, "swarm", "--master", "127.0.0.1:%d" % cluster.port, "--count", str(count),
             "--id-prefix", prefix, "--keys-dir", self.keys, "--acceptance-wait-time", "1",
             "--seconds", "120", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out, self.err = [], []
        self.readers = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            t = threading.Thread(target=lambda s=stream, k=sink: [k.append(l) for l in s],
                                 daemon=True)
            t.start()
            self.readers.append(t)

    def saw(self, regex):
        return any(re.search(regex, line) for line in list(self.out))

    def stop(self, sig=signal.SIGINT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=20)
        for t in self.readers:
            t.join(timeout=5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc


class SwarmTest(ClusterTestCase):
    def test_swarm_minions_connect_answer_and_stop_cleanly(self):
        c = self.cluster(master_opts={"auto_accept": True})
        s = Swarm(c)
        self.addCleanup(s.stop, signal.SIGKILL)
        wait_for(lambda: s.saw(r"^all %d connected after [\d.]+ s" % COUNT), 30,
                 "all swarm minions connected")
        self.assertTrue(any("generated %d keys" % COUNT in l for l in s.err), s.err)
        # A periodic status line with the counts.
        wait_for(lambda: s.saw(r"^t=[\d.]+s connected=%d pending=0 refused=0" % COUNT), 5,
                 "a status line")

        rc, out, err = c.brine("cmd", "-t", "20", "--out", "json", "sw-*", "test.ping")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual(sorted(got), ["sw-%02d" % i for i in range(1, COUNT + 1)])
        self.assertTrue(all(v is True for v in got.values()))

        # test.sleep on one simulated minion does not block the others.
        t0 = time.monotonic()
        rc, out, err = c.brine("cmd", "-t", "20", "--out", "json", "sw-*", "test.sleep", "1")
        elapsed = time.monotonic() - t0
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(json.loads(out)), COUNT)
        self.assertLess(elapsed, 4.0, "40 concurrent test.sleep 1 took %.1f s" % elapsed)

        self.assertEqual(s.stop(), 0)
        self.assertTrue(s.saw(r"^final connected="), s.out[-3:])

    def test_pending_then_accepted_and_keys_reused(self):
        c = self.cluster()
        s = Swarm(c, count=5, prefix="p-")
        self.addCleanup(s.stop, signal.SIGKILL)
        wait_for(lambda: len(c.keys()["pending"]) == 5, 20, "5 pending swarm keys")
        wait_for(lambda: s.saw(r"pending=5"), 5, "the swarm reporting 5 pending")
        rc, _, err = c.brine("key", "accept", "--all")
        self.assertEqual(rc, 0, err)
        wait_for(lambda: s.saw(r"^all 5 connected"), 10, "accepted swarm minions connected")
        self.assertEqual(s.stop(), 0)

        # A second run reuses the cached keys: the master still knows them.
        again = Swarm(c, count=5, prefix="p-")
        self.addCleanup(again.stop, signal.SIGKILL)
        wait_for(lambda: again.saw(r"^all 5 connected"), 20, "second run connected")
        self.assertFalse(any("generated" in l for l in again.err), again.err)
        keys = c.keys()
        self.assertEqual(len(keys["accepted"]), 5)
        self.assertEqual(keys["denied"], [])
        self.assertEqual(again.stop(), 0)

    def test_wrong_master_finger_is_refused(self):
        c = self.cluster(master_opts={"auto_accept": True})
        s = Swarm(c, count=3, prefix="f-", extra=("--master-finger", ":".join(["00"] * 32)))
        self.addCleanup(s.stop, signal.SIGKILL)
        wait_for(lambda: any("refusing" in l for l in s.err), 15, "the swarm refusing the master")
        self.assertEqual(c.keys()["accepted"], [])
        self.assertEqual(s.stop(), 0)

    def test_master_at_its_descriptor_limit_refuses_once_and_serves_the_rest(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
        try:
            c = self.cluster(master_opts={"auto_accept": True})
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        # 128 descriptors, 64 kept back for the store, the local API and logs.
        wait_log(c.master, r"descriptor limit 128 allows 64 connected minions", 5)
        s = Swarm(c, count=100, prefix="lim-")
        self.addCleanup(s.stop, signal.SIGKILL)
        wait_for(lambda: s.saw(r" connected=64 "), 30, "64 swarm minions connected")
        wait_log(c.master, r"descriptor limit reached: 64 minions connected", 10)
        # The local API still works and every connected minion answers.
        rc, out, err = c.brine("cmd", "-t", "20", "--out", "json", "lim-*", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(json.loads(out)), 64)
        # Refused minions keep retrying; the master said so once, not per attempt.
        wait_for(lambda: s.saw(r"^t=[4-9]"), 15, "a few seconds of retries")
        self.assertEqual(c.master.count(r"descriptor limit reached"), 1)
        self.assertTrue(c.master.alive())
        self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
