#!/usr/bin/env python3
"""Bad input: garbage and hostile clients on the master's port, untrusted
masters, broken configurations, file modes and signals. After each bad
connection the master must have logged it once, naming the peer, and must go
on serving its minion."""

import os
import re
import socket
import ssl
import stat
import struct
import time
import unittest

from harness import (FINGERPRINT_RE, SLACK, ClusterTestCase, connect, frame, make_client_cert,
                     peer_name, read_frames, read_until_closed, tail, tls_context, wait_for,
                     wait_log)

MAX_FRAME = 65536


class HostileClientTest(ClusterTestCase):
    """A master (max_frame_bytes 65536) with one accepted minion, then a bad
    client on its port."""

    def setUp(self):
        self.c = self.cluster(master_opts={"max_frame_bytes": MAX_FRAME})
        self.minion = self.c.add_accepted_minion("m1")
        self.since = self.c.master.mark()

    def assert_logged_once(self, peer, regex, only=True, timeout=5):
        """The master logged exactly one line naming `peer` that matches
        `regex` (and, if `only`, no other line naming `peer`)."""
        peer_re = re.escape(peer) + r"\b"
        wait_log(self.c.master, r"(?m)^(?=.*%s)(?=.*%s).*$" % (peer_re, regex), timeout,
                 self.since)
        log = self.c.master.log_since(self.since)
        lines = [l for l in log.splitlines() if re.search(peer_re, l)]
        if not only:
            lines = [l for l in lines if re.search(regex, l)]
        self.assertEqual(len(lines), 1, "expected one log line about %s:\n%s" % (peer, tail(log)))
        return lines[0]

    def assert_still_serving(self):
        self.assertTrue(self.c.master.alive(), "the master died:\n" + tail(self.c.master.log()))
        rc, out, err = self.c.brine("cmd", "-t", "10", "*", "test.ping")
        self.assertEqual(rc, 0, "stdout %r stderr %r" % (out, err))
        self.assertEqual(out, "m1:\n    True\n")
        self.assertTrue(self.c.master.alive())

    def tls_client(self, cert=True):
        """A TLS 1.3 connection, with a valid self-signed Ed25519 certificate
        unless cert is False; returns (ssl socket, peer name)."""
        if cert:
            cert_path, key_path = make_client_cert(self.c.dir)
            ctx = tls_context(cert_path, key_path)
        else:
            ctx = tls_context()
        raw = connect(self.c.port)
        peer = peer_name(raw)
        s = ctx.wrap_socket(raw)
        self.addCleanup(s.close)
        return s, peer

    # -- before or during TLS

    def test_random_bytes_instead_of_tls(self):
        s = connect(self.c.port)
        self.addCleanup(s.close)
        peer = peer_name(s)
        # 0xff is no TLS record type, so this cannot pass for a handshake.
        s.sendall(b"\xff\xff" + os.urandom(254))
        _, closed = read_until_closed(s, 5)
        self.assertTrue(closed, "the master kept a connection that sent garbage")
        self.assert_logged_once(peer, r"TLS handshake failed")
        self.assert_still_serving()

    def test_tls12_client(self):
        raw = connect(self.c.port)
        self.addCleanup(raw.close)
        peer = peer_name(raw)
        ctx = tls_context(max_version=ssl.TLSVersion.TLSv1_2)
        with self.assertRaises((ssl.SSLError, ConnectionError)):
            s = ctx.wrap_socket(raw)
            s.recv(1)
        self.assert_logged_once(peer, r"TLS handshake failed: .*unsupported protocol")
        self.assert_still_serving()

    def test_tls13_client_without_certificate(self):
        raw = connect(self.c.port)
        self.addCleanup(raw.close)
        peer = peer_name(raw)
        # In TLS 1.3 the server checks the client's certificate after the
        # client has finished; the refusal may show only on the next read.
        try:
            s = tls_context().wrap_socket(raw)
            self.addCleanup(s.close)
            s.sendall(frame(2, 1, {"id": "nocert"}))
            data, closed = read_until_closed(s, 5)
            self.assertTrue(closed, "the master kept a connection without a certificate")
            self.assertEqual(read_frames(data), [])
        except (ssl.SSLError, ConnectionError):
            pass
        self.assert_logged_once(peer, r"TLS handshake failed: .*certificate")
        self.assertNotIn("nocert", str(self.c.keys()))
        self.assert_still_serving()

    # -- after TLS, with a valid Ed25519 certificate

    def test_oversized_frame_header(self):
        s, peer = self.tls_client()
        s.sendall(struct.pack(">I", MAX_FRAME + 1) + b"\x80")
        data, closed = read_until_closed(s, 5)
        self.assertTrue(closed, "the master kept a connection after an oversized frame header")
        # The master answers with an error frame before closing.
        frames = read_frames(data)
        self.assertEqual(len(frames), 1, frames)
        self.assertEqual(frames[0]["t"], 1, frames)
        self.assertIn("max_frame_bytes", frames[0]["b"]["message"])
        self.assert_logged_once(peer, r"frame of 65537 bytes exceeds max_frame_bytes 65536")
        self.assert_still_serving()

    def test_truncated_frame(self):
        s, peer = self.tls_client()
        s.sendall(struct.pack(">I", 100) + b"\x83" + b"\x00" * 9)
        time.sleep(0.2)
        s.close()
        self.assert_logged_once(peer, r"connection lost before authenticating")
        self.assert_still_serving()

    def test_unknown_message_type_first(self):
        s, peer = self.tls_client()
        s.sendall(frame(9999, 1, {}))
        data, closed = read_until_closed(s, 5)
        self.assertTrue(closed, "the master kept a connection after an unknown message type")
        frames = read_frames(data)
        self.assertEqual(len(frames), 1, frames)
        self.assertEqual(frames[0]["t"], 1, frames)
        self.assertIn("9999", frames[0]["b"]["message"])
        self.assert_logged_once(peer, r"message type 9999 is not known")
        self.assert_still_serving()

    def test_auth_then_unknown_message_type(self):
        s, peer = self.tls_client()
        s.sendall(frame(2, 1, {"id": "intruder"}))
        # The master answers the auth: the intruder is pending.
        s.settimeout(5 * SLACK)
        data = b""
        deadline = time.monotonic() + 5 * SLACK
        while not read_frames(data) and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        frames = read_frames(data)
        self.assertTrue(frames, "no answer to auth")
        self.assertEqual(frames[0]["t"], 3)
        self.assertEqual(frames[0]["b"]["status"], "pending")
        self.assertEqual(self.c.keys()["pending"], ["intruder"])

        s.sendall(frame(9999, 2, {}))
        data, closed = read_until_closed(s, 5)
        self.assertTrue(closed, "the master kept a connection after an unknown message type")
        self.assert_logged_once(peer, r"minion intruder at .*unknown message type.*9999",
                                only=False)
        self.assertEqual(self.c.keys()["pending"], ["intruder"])
        self.assertEqual(self.c.keys()["accepted"], ["m1"])
        self.assert_still_serving()


class UntrustedMasterTest(ClusterTestCase):

    def test_wrong_master_finger_is_refused(self):
        c = self.cluster()
        wrong = ":".join(["ab"] * 32)
        m = c.add_minion("m1", master_finger=wrong)
        line = wait_log(m, r"presented key fingerprint .*refusing to talk to it", 10).group(0)
        self.assertIn(c.master_fingerprint(), line)
        self.assertIn(wrong, line)
        # It tries again later, and is never known to the master.
        wait_for(lambda: m.count(r"refusing to talk to it") >= 2, 10, "a second refusal")
        self.assertTrue(m.alive())
        self.assertNotIn("m1", str(c.keys()))
        # With the right fingerprint the same minion is fine.
        good = c.add_minion("m2", master_finger=c.master_fingerprint())
        c.wait_pending("m2")
        self.assertEqual(good.count(r"refusing"), 0)
        self.assertNotIn("m1", str(c.keys()))

    def test_master_key_change_is_refused_after_first_use(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        old_fp = c.master_fingerprint()
        wait_log(m, r"trusting master at \S+ on first use: fingerprint " + old_fp, 1)
        self.assertEqual(c.master.terminate(), 0)
        os.remove(os.path.join(c.pki_dir, "master.pem"))
        os.remove(os.path.join(c.pki_dir, "master.pub"))
        since = c.master.mark()
        msince = m.mark()
        c.start_master()
        new_fp = re.search(r"fingerprint (%s)" % FINGERPRINT_RE, c.master.log_since(since)).group(1)
        self.assertNotEqual(new_fp, old_fp)
        line = wait_log(m, r"presented key fingerprint .*refusing to talk to it", 20,
                        msince).group(0)
        self.assertIn(new_fp, line)
        self.assertIn(old_fp, line)
        # A fresh minion trusts the new key on first use.
        fresh = c.add_minion("m2")
        c.wait_pending("m2")
        wait_log(fresh, r"trusting master at \S+ on first use: fingerprint " + new_fp, 1)
        # The old minion never reconnected.
        self.assertEqual(c.master.count(r"minion m1 connected", since), 0)
        rc, out, err = c.brine("cmd", "-t", "2", "m1", "test.ping")
        self.assertNotEqual(rc, 0)


class ConfigErrorTest(ClusterTestCase):
    """A master with a bad configuration exits at once with one line saying why."""

    def start_failing_master(self, c):
        c.master.start()
        rc = c.master.wait_exit(10)
        if rc is None:
            c.master.kill()
            self.fail("the master did not exit within 10 s:\n" + tail(c.master.log()))
        self.assertNotEqual(rc, 0)
        c.master.expect_clean_exit = False
        lines = c.master.log().strip().splitlines()
        self.assertEqual(len(lines), 1, "expected one line on stderr:\n" + "\n".join(lines))
        return lines[0]

    def config_cluster(self, **opts):
        c = self.cluster(master_opts=opts, start=False)
        return c

    def test_broken_yaml(self):
        c = self.config_cluster()
        with open(c.config, "a") as f:
            f.write("auto_accept: [true\nkeep_jobs: 3\n")
        line = self.start_failing_master(c)
        self.assertIn(c.config, line)
        self.assertRegex(line, r"line \d+")

    def test_port_out_of_range(self):
        c = self.config_cluster(port=70000)
        line = self.start_failing_master(c)
        self.assertIn(c.config, line)
        self.assertRegex(line, r"line 2: port must be an integer 1\.\.65535, got 70000")

    def test_pki_dir_without_parent(self):
        c = self.config_cluster(pki_dir="no/such/parent/pki")
        line = self.start_failing_master(c)
        self.assertIn("pki_dir", line)
        self.assertIn(c.path("no/such/parent/pki"), line)
        self.assertIn("parent directory does not exist", line)

    def test_port_in_use(self):
        c = self.config_cluster()
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(blocker.close)
        blocker.bind(("127.0.0.1", c.port))
        blocker.listen(1)
        line = self.start_failing_master(c)
        self.assertIn("127.0.0.1:%d" % c.port, line)
        self.assertRegex(line.lower(), r"address already in use")

    def test_private_key_readable_by_others(self):
        c = self.cluster()
        fp = c.master_fingerprint()
        self.assertEqual(c.master.terminate(), 0)
        key = os.path.join(c.pki_dir, "master.pem")
        self.assertEqual(stat.S_IMODE(os.stat(key).st_mode), 0o600)
        os.chmod(key, 0o644)
        since = c.master.mark()
        line = self.start_failing_master_since(c, since)
        self.assertIn(key, line)
        self.assertIn("chmod 600", line)
        # Fixed, it starts with the same key.
        os.chmod(key, 0o600)
        since = c.master.mark()
        c.start_master()
        self.assertIn(fp, c.master.log_since(since))

    def start_failing_master_since(self, c, since):
        c.master.start()
        rc = c.master.wait_exit(10)
        if rc is None:
            c.master.kill()
            self.fail("the master did not exit within 10 s")
        self.assertNotEqual(rc, 0)
        lines = c.master.log_since(since).strip().splitlines()
        self.assertEqual(len(lines), 1, "expected one line on stderr:\n" + "\n".join(lines))
        return lines[0]


class BadCallsTest(ClusterTestCase):
    """Bad calls fail the job with a message; the minion keeps serving."""

    def test_bad_calls_and_a_huge_return(self):
        import json
        limit = 1048576
        c = self.cluster(master_opts={"max_frame_bytes": limit})
        c.add_accepted_minion("m1", max_frame_bytes=limit)
        table = [
            (["no.such_function"], "'no.such_function' is not available."),
            (["test.sleep"], "test.sleep needs one argument"),
            (["test.sleep", "soon"], "length must be a number"),
            (["grains.get", "os", "colour=red"], "unknown keyword argument 'colour'"),
            (["cmd.run", "true", "colour=red"], "unknown keyword argument 'colour'"),
            (["cmd.run", "true", "runas=brine-no-such-user"],
             "User 'brine-no-such-user' is not available"),
            (["test.retcode", "1", "2"], "test.retcode takes one argument"),
        ]
        for args, message in table:
            with self.subTest(args=args):
                rc, out, err = c.brine("cmd", "--out", "json", "-t", "10", "m1", *args)
                self.assertEqual(rc, 1, out + err)
                self.assertIn(message, json.loads(out)["m1"])
        # Three times the frame limit: cut to fit with a note, the job failed,
        # and the minion answers the next job (no resend loop).
        rc, out, err = c.brine("cmd", "--out", "json", "-t", "30", "m1", "cmd.run",
                               "yes | head -c 3000000", timeout=60)
        self.assertEqual(rc, 1, err)
        ret = json.loads(out)["m1"]
        self.assertLess(len(ret), limit)
        self.assertGreater(len(ret), limit // 2)
        self.assertRegex(ret, r"\[brine: the return of \d+ bytes exceeds max_frame_bytes "
                              r"\(1048576\); truncated to its first \d+ bytes\]$")
        # A structured return that is too big is refused with an error.
        rc, out, err = c.brine("cmd", "--out", "json", "-t", "30", "m1", "cmd.run_all",
                               "yes | head -c 3000000", timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertIn("refused; return less, or raise max_frame_bytes", json.loads(out)["m1"])
        rc, out, err = c.brine("cmd", "--out", "json", "-t", "10", "m1", "test.ping")
        self.assertEqual((rc, json.loads(out)), (0, {"m1": True}), err)
        self.assertNotIn("exceeds max_frame_bytes", c.master.log())


class FilesAndSignalsTest(ClusterTestCase):

    def test_local_api_socket_is_private(self):
        c = self.cluster()
        st = os.stat(c.sock_path)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(c.sock_path)).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(c.pki_dir, "master.pem")).st_mode),
                         0o600)

    def test_sigterm_stops_master_and_minion_cleanly(self):
        c = self.cluster()
        m = c.add_accepted_minion("m1")
        # terminate() sends SIGTERM and bounds the wait: a daemon that ignored
        # it would be killed and the status would not be 0.
        self.assertEqual(m.terminate(), 0, tail(m.log()))
        wait_log(m, r"minion stopped", 5)
        self.assertEqual(c.master.terminate(), 0, tail(c.master.log()))
        wait_log(c.master, r"master stopped", 5)
        self.assertFalse(os.path.exists(c.sock_path), "the master left its socket behind")


if __name__ == "__main__":
    unittest.main()
