#!/usr/bin/env python3
"""Minion keys: pending, accept, reject, delete, denied, fingerprints, offline
key management and automatic acceptance, through `brine key` and the daemons'
logs."""

import json
import os
import re
import time
import unittest

from harness import (FINGERPRINT_RE, ClusterTestCase, tail, wait_for, wait_log)

EMPTY = {"accepted": [], "pending": [], "rejected": [], "denied": []}


def keys_with(**states):
    out = dict(EMPTY)
    out.update(states)
    return out


class KeyTest(ClusterTestCase):

    def test_pending_then_accept_pushes_acceptance(self):
        c = self.cluster()
        # A long acceptance_wait_time: the minion would only ask again after
        # 10 s, so answering sooner proves the master pushed the acceptance.
        c.add_minion("zeta", acceptance_wait_time=10, acceptance_wait_time_max=20)
        c.add_minion("alpha", acceptance_wait_time=10, acceptance_wait_time_max=20)
        wait_for(lambda: len(c.keys()["pending"]) == 2, 15, "two pending keys")

        rc, out, err = c.brine("key", "list", "--json")
        self.assertEqual(rc, 0, err)
        # The whole stdout is the object, with exactly these four lists, sorted.
        self.assertEqual(json.loads(out), keys_with(pending=["alpha", "zeta"]))
        wait_log(c.minions["zeta"], r"key pending", 5)

        # Not accepted yet: a job cannot target it.
        rc, out, err = c.brine("cmd", "zeta", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("No minions matched", err)

        since = c.master.mark()
        rc, out, err = c.brine("key", "accept", "zeta")
        self.assertEqual(rc, 0, err)
        self.assertIn("Key for minion zeta accepted.", out)

        def pinged():
            rc, out, _ = c.brine("cmd", "-t", "5", "zeta", "test.ping")
            return rc == 0 and re.search(r"^zeta:\n\s+True$", out, re.M)

        wait_for(pinged, 20, "the first successful test.ping of zeta after accept")
        # Acceptance was pushed to the connected minion on its open
        # connection, not left for its next ask (acceptance_wait_time 10 s).
        pushed = wait_log(c.master, r"minion zeta at (\S+): key accepted; telling the waiting "
                          r"minion", 5, since)
        served = wait_log(c.master, r"minion zeta connected from (\S+)", 5, since)
        self.assertEqual(pushed.group(1), served.group(1), "zeta reconnected instead")
        wait_log(c.minions["zeta"], r"authenticated with master", 2)
        self.assertEqual(c.keys(), keys_with(accepted=["zeta"], pending=["alpha"]))

    def test_accept_all(self):
        c = self.cluster()
        for mid in ("m1", "m2", "m3"):
            c.add_minion(mid)
        wait_for(lambda: c.keys()["pending"] == ["m1", "m2", "m3"], 15, "three pending keys")
        since = c.master.mark()
        rc, out, err = c.brine("key", "accept", "--all")
        self.assertEqual(rc, 0, err)
        for mid in ("m1", "m2", "m3"):
            self.assertIn("Key for minion %s accepted." % mid, out)
            c.wait_connected(mid, 5, since)
        self.assertEqual(c.keys(), keys_with(accepted=["m1", "m2", "m3"]))
        rc, out, err = c.brine("cmd", "--out", "json", "*", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"m1": True, "m2": True, "m3": True})
        # Nothing left to accept: --all is not an error, a named id is.
        rc, out, err = c.brine("key", "accept", "--all")
        self.assertEqual(rc, 0, err)
        rc, out, err = c.brine("key", "accept", "nosuch")
        self.assertNotEqual(rc, 0)
        self.assertIn("does not match", err)

    def test_reject_connected_accepted_minion(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        # With --all (and no --include-accepted) an accepted key is left alone.
        rc, out, err = c.brine("key", "reject", "--all")
        self.assertEqual(rc, 0, err)
        self.assertIn("--include-accepted", err)
        self.assertEqual(c.keys(), keys_with(accepted=["m1"]))

        # Named, it is rejected whether pending or accepted.
        since = m.mark()
        rc, out, err = c.brine("key", "reject", "m1")
        self.assertEqual(rc, 0, err)
        self.assertIn("Key for minion m1 rejected.", out)
        wait_log(m, r"refused this minion \(rejected\)", 1.0, since)
        self.assertEqual(c.keys(), keys_with(rejected=["m1"]))
        rc, out, err = c.brine("cmd", "-t", "3", "m1", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("No minions matched", err)
        self.assertNotIn("True", out)

    def test_delete_connected_minion_comes_back_pending(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        since = m.mark()
        msince = c.master.mark()
        rc, out, err = c.brine("key", "delete", "m1")
        self.assertEqual(rc, 0, err)
        self.assertIn("Key for minion m1 deleted.", out)
        # The master closes the connection at once and the minion says so.
        wait_log(m, r"refused this minion \(deleted\)", 1.0, since)
        wait_log(c.master, r"minion m1 at 127\.0\.0\.1:\d+: key deleted on the master; closing",
                 1.0, msince)
        # It asks again and is a new, pending key.
        c.wait_pending("m1", 15)
        self.assertEqual(c.keys(), keys_with(pending=["m1"]))
        rc, out, err = c.brine("cmd", "-t", "3", "m1", "test.ping")
        self.assertNotEqual(rc, 0)

    def test_new_key_for_accepted_id_is_denied(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        old_fp = c.minion_fingerprint("m1")
        self.assertEqual(m.terminate(), 0)
        pki = os.path.join(c.minion_dir("m1"), "pki")
        os.remove(os.path.join(pki, "minion.pem"))
        os.remove(os.path.join(pki, "minion.pub"))
        since = m.mark()
        m.start()
        wait_log(m, r"refused this minion \(denied\): key denied", 10, since)
        new_fp = re.search(r"starting \(fingerprint (%s)\)" % FINGERPRINT_RE,
                           m.log_since(since)).group(1)
        self.assertNotEqual(new_fp, old_fp)
        self.assertEqual(c.keys(), keys_with(accepted=["m1"], denied=["m1"]))
        rc, out, err = c.brine("key", "finger", "--json")
        self.assertEqual(rc, 0, err)
        fingers = json.loads(out)
        self.assertEqual(fingers["accepted"], {"m1": old_fp})
        self.assertEqual(fingers["denied"], {"m1": new_fp})
        # The impostor gets no jobs.
        rc, out, err = c.brine("cmd", "-t", "3", "m1", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertNotIn("True", out)

        # The operator confirms the reinstall: the new key replaces the old.
        since = c.master.mark()
        rc, out, err = c.brine("key", "accept", "m1")
        self.assertNotEqual(rc, 0, "a denied key was accepted without --include-denied")
        rc, out, err = c.brine("key", "accept", "m1", "--include-denied")
        self.assertEqual(rc, 0, err)
        self.assertEqual(c.keys(), keys_with(accepted=["m1"]))
        c.wait_connected("m1", 15, since)
        rc, out, err = c.ping("m1")
        self.assertEqual(rc, 0, err)
        rc, out, err = c.brine("key", "finger", "--json")
        self.assertEqual(json.loads(out)["accepted"], {"m1": new_fp})

    def test_rejected_key_never_returns_to_pending(self):
        c = self.cluster()
        m = c.add_minion("m1")
        c.wait_pending("m1")
        since = m.mark()
        rc, out, err = c.brine("key", "reject", "m1")
        self.assertEqual(rc, 0, err)
        self.assertIn("Key for minion m1 rejected.", out)
        wait_log(m, r"refused this minion \(rejected\)", 2, since)
        # The minion retries (acceptance_wait_time 1 s) and is refused again.
        wait_for(lambda: m.count(r"refused this minion \(rejected\)", since) >= 2, 10,
                 "the minion to retry and be refused a second time")
        self.assertEqual(c.keys(), keys_with(rejected=["m1"]))
        self.assertTrue(m.alive())

    def test_finger(self):
        c = self.cluster()
        c.add_accepted_minion("m1")
        c.add_minion("m2")
        c.wait_pending("m2")
        master_fp = c.master_fingerprint()
        fp1, fp2 = c.minion_fingerprint("m1"), c.minion_fingerprint("m2")
        self.assertEqual(len({master_fp, fp1, fp2}), 3)
        # The minion pinned the same key the master printed.
        wait_log(c.minions["m1"], r"trusting master at \S+ on first use: fingerprint " + master_fp, 1)

        rc, out, err = c.brine("key", "finger")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^Local Keys:\nmaster\.pub:\s+%s$" % master_fp)
        self.assertRegex(out, r"(?m)^Accepted Keys:\nm1:\s+%s$" % fp1)
        self.assertRegex(out, r"(?m)^Unaccepted Keys:\nm2:\s+%s$" % fp2)
        for fp in re.findall(r":\s+(\S+)$", out, re.M):
            self.assertRegex(fp, "^" + FINGERPRINT_RE + "$")

        rc, out, err = c.brine("key", "finger", "m2")
        self.assertEqual(rc, 0, err)
        self.assertIn(fp2, out)
        self.assertNotIn(fp1, out)

    def test_key_management_while_master_is_stopped(self):
        c = self.cluster()
        m = c.add_minion("m1")
        c.wait_pending("m1")
        c.add_minion("m2")
        c.wait_pending("m2")
        master_fp = c.master_fingerprint()
        self.assertEqual(c.master.terminate(), 0)
        self.assertFalse(os.path.exists(c.sock_path), "the local API socket outlived the master")

        self.assertEqual(c.keys(), keys_with(pending=["m1", "m2"]))
        rc, out, err = c.brine("key", "accept", "m1")
        self.assertEqual(rc, 0, err)
        self.assertIn("Key for minion m1 accepted.", out)
        rc, out, err = c.brine("key", "reject", "m2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(c.keys(), keys_with(accepted=["m1"], rejected=["m2"]))
        rc, out, err = c.brine("key", "finger")
        self.assertEqual(rc, 0, err)
        self.assertIn(master_fp, out)
        # Job commands need the master and say so.
        rc, out, err = c.brine("cmd", "m1", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("no master is running", err)

        since = c.master.mark()
        c.start_master()
        c.wait_connected("m1", 20, since)
        rc, out, err = c.ping("m1")
        self.assertEqual(rc, 0, err + tail(m.log()))
        self.assertRegex(out, r"^m1:\n\s+True\n$")
        self.assertEqual(c.keys(), keys_with(accepted=["m1"], rejected=["m2"]))

    def test_auto_accept(self):
        c = self.cluster(master_opts={"auto_accept": True})
        m = c.add_minion("m1")
        c.wait_connected("m1")
        self.assertEqual(c.keys(), keys_with(accepted=["m1"]))
        self.assertEqual(m.count(r"key pending"), 0)
        rc, out, err = c.ping("m1")
        self.assertEqual(rc, 0, err)

    def test_autosign_and_autoreject_files(self):
        c = self.cluster(master_opts={"autosign_file": "autosign.conf",
                                      "autoreject_file": "autoreject.conf"}, start=False)
        with open(c.path("autosign.conf"), "w") as f:
            f.write("web-*\nexact-one\n")
        with open(c.path("autoreject.conf"), "w") as f:
            f.write("bad-*\n")
        c.start_master()
        for mid in ("web-1", "exact-one", "bad-1", "db-1"):
            c.add_minion(mid)
        c.wait_connected("web-1")
        c.wait_connected("exact-one")
        wait_log(c.minions["bad-1"], r"refused this minion \(rejected\)", 10)
        c.wait_pending("db-1")
        self.assertEqual(c.keys(), keys_with(accepted=["exact-one", "web-1"], pending=["db-1"],
                                             rejected=["bad-1"]))
        rc, out, err = c.brine("cmd", "--out", "json", "*", "test.ping")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"exact-one": True, "web-1": True})


if __name__ == "__main__":
    unittest.main()
