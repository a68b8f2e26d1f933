#!/usr/bin/env python3
"""A shared PostgreSQL store: two masters on one database share key
decisions, jobs and returns; a database restart loses nothing; bad store
settings get one clear line. A real PostgreSQL (Debian's) is started by the
tests on a loopback port (pgserver.py)."""

import json
import os
import re
import subprocess
import time
import unittest

from harness import BRINE_BIN, MasterSet, tail, wait_for, wait_log, write_config
from netfault import Proxy
from pgserver import PostgresServer, postgres_available

PG = None


def setUpModule():
    global PG
    if not postgres_available():
        if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
            raise AssertionError("PostgreSQL (initdb, pg_ctl) is not installed; "
                                 "apt-get install postgresql")
        raise unittest.SkipTest("PostgreSQL is not installed (apt-get install postgresql)")
    PG = PostgresServer()
    PG.start()


def tearDownModule():
    if PG is not None:
        PG.cleanup()


class SharedStoreTestCase(unittest.TestCase):
    databases = 0

    def shared_masters(self, n=2, **opts):
        """`n` masters on one fresh database, and the options they use."""
        SharedStoreTestCase.databases += 1
        db = "brine_%d_%d" % (os.getpid(), SharedStoreTestCase.databases)
        PG.create_database(db)
        pw = os.path.join(PG.dir, db + ".pw")
        PG.password_file(pw)
        store = {"store": PG.url(db), "store_password_file": pw}
        master_opts = dict(store)
        master_opts.update(opts)
        ms = MasterSet(n, master_opts=master_opts)
        self.addCleanup(ms.stop)
        return ms, store, db

    def answered(self, master, ids, timeout=20):
        def ok():
            rc, got, _ = master.ping_json(timeout=2)
            return all(got.get(i) is True for i in ids)
        wait_for(ok, timeout, "%s to be answered by %s" % (master.name, ", ".join(ids)))


class KeysAndJobsTest(SharedStoreTestCase):

    def test_a_key_decision_on_one_master_holds_on_every_master(self):
        ms, _, _ = self.shared_masters(auto_accept=False)
        a, b = ms.masters
        ms.add_minion("m1")
        wait_for(lambda: "m1" in a.keys()["pending"] and "m1" in b.keys()["pending"], 15,
                 "m1 pending on both masters")
        # Accepted on A: served by B too, without a word to B.
        rc, out, err = a.brine("key", "accept", "m1")
        self.assertEqual(rc, 0, err)
        self.answered(b, ["m1"])
        self.assertIn("m1", b.keys()["accepted"])
        # Rejected on B: A cuts its connection within a second.
        since = a.daemon.mark()
        rc, out, err = b.brine("key", "reject", "--include-accepted", "m1")
        self.assertEqual(rc, 0, err)
        # A learns it from the store's change feed (LISTEN/NOTIFY), and cuts
        # the connection on that news: no poll, no reconnect of the minion.
        feed = wait_log(a.daemon, r"minion m1: key rejected on master \S+", 5, since)
        cut = wait_log(a.daemon, r"minion m1 at \S+: key rejected; closing its connection", 5,
                       since)
        self.assertLess(feed.start(), cut.start())
        self.assertIn("m1", a.keys()["rejected"])
        rc, out, err = a.brine("cmd", "m1", "test.ping")
        self.assertNotEqual(rc, 0)
        self.assertIn("No minions matched", err)

    def test_brine_key_with_every_master_down_reaches_them_all(self):
        ms, _, _ = self.shared_masters(auto_accept=False)
        a, b = ms.masters
        ms.add_minion("m1")
        wait_for(lambda: "m1" in b.keys()["pending"], 15, "m1 pending")
        a.daemon.terminate()
        b.daemon.terminate()
        rc, out, err = a.brine("key", "accept", "m1")  # no master runs: the store itself
        self.assertEqual(rc, 0, err)
        since = b.daemon.mark()
        b.start()
        ms.wait_served("m1", b, timeout=15, since=since)
        self.answered(b, ["m1"])
        # Deleted through A's config while B runs: B forgets it at once.
        since = b.daemon.mark()
        rc, out, err = a.brine("key", "delete", "m1")
        self.assertEqual(rc, 0, err)
        wait_log(b.daemon, r"minion m1 at \S+: key deleted on the master; closing", 5, since)

    def test_jobs_are_the_same_on_every_master_and_jids_never_collide(self):
        ms, _, _ = self.shared_masters()
        a, b = ms.masters
        ms.add_minion("m1")
        ms.add_minion("m2")
        self.answered(a, ["m1", "m2"])
        self.answered(b, ["m1", "m2"])
        rc, out, err = a.brine("cmd", "--show-jid", "--out", "json", "*", "test.ping")
        self.assertEqual(rc, 0, err)
        jid_a = re.search(r"(\d{20})", out + err).group(1)
        shown = b.job(jid_a)
        self.assertEqual(shown["returns"], {"m1": True, "m2": True})
        rc, out, err = b.brine("cmd", "--show-jid", "--out", "json", "*", "test.ping")
        self.assertEqual(rc, 0, err)
        jid_b = re.search(r"(\d{20})", out + err).group(1)
        self.assertNotEqual(jid_a[-2:], jid_b[-2:], "each master ends its jids with its slot")
        self.assertEqual(a.job(jid_b)["returns"], {"m1": True, "m2": True})
        rc_a, list_a, err_a = a.brine("job", "list")
        rc_b, list_b, err_b = b.brine("job", "list")
        self.assertEqual((rc_a, rc_b), (0, 0), err_a + err_b)
        self.assertEqual(list_a, list_b)
        self.assertIn(jid_a, list_a)
        self.assertIn(jid_b, list_a)


class ReturnsThroughAnyMasterTest(SharedStoreTestCase):

    def test_returns_delivered_to_the_survivor_complete_a_killed_masters_job(self):
        ms, _, _ = self.shared_masters()
        a, b = ms.masters
        m = ms.add_minion("m1", master_return_strategy="any", log_level="debug")
        self.answered(a, ["m1"])
        self.answered(b, ["m1"])
        rc, out, err = a.brine("cmd", "--async", "m1", "cmd.run", "sleep 2; echo done")
        self.assertEqual(rc, 0, err)
        jid = re.search(r"job ID: (\d+)", out).group(1)
        wait_log(m, r"job %s from 127\.0\.0\.1:%d: cmd\.run" % (jid, a.port), 5)
        a.kill()
        wait_for(lambda: b.job(jid)["returns"].get("m1") == "done", 20,
                 "the return of job %s stored through master-1" % jid)

    def test_the_origin_cli_receives_returns_delivered_to_another_master(self):
        ms, _, _ = self.shared_masters()
        a, b = ms.masters
        proxy = Proxy(a.port)  # the minion reaches A only through this path
        self.addCleanup(proxy.stop)
        m = ms.add_minion("m1", master=["127.0.0.1:%d" % proxy.port, b.address],
                          master_return_strategy="any", log_level="debug")
        self.answered(a, ["m1"])
        self.answered(b, ["m1"])
        since_a = a.daemon.mark()
        cli = subprocess.Popen(
            [BRINE_BIN, "cmd", "-c", a.config, "-t", "30", "--out", "json", "m1", "cmd.run",
             "sleep 2; echo done"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=a.dir)
        try:
            wait_log(m, r"job \d{20} from 127\.0\.0\.1:%d: cmd\.run" % proxy.port, 10)
            proxy.stop()  # the minion's link to A is gone and cannot come back
            # Gone before the job (2 s) ends: its return can only take B.
            wait_log(a.daemon, r"minion m1 at \S+ disconnected", 1.5, since_a)
            out, err = cli.communicate(timeout=40)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.communicate()
        self.assertEqual(cli.returncode, 0, err.decode())
        self.assertEqual(json.loads(out), {"m1": "done"})


class DatabaseFailureTest(SharedStoreTestCase):

    def test_a_database_restart_during_200_jobs_loses_nothing(self):
        # Each publish waits store_failover_wait (2 s here) for a database
        # that does not answer, then is told so.
        ms, _, db = self.shared_masters(n=1, store_failover_wait=2)
        (a,) = ms.masters
        ids = ["m1", "m2"]
        for i in ids:
            ms.add_minion(i)
        self.answered(a, ids)
        jids = []
        refused = []

        def publish():
            rc, out, err = a.brine("cmd", "--async", "*", "test.ping")
            found = re.search(r"job ID: (\d+)", out)
            if rc == 0 and found:
                jids.append(found.group(1))
                return True
            # Not answered within the wait, or cut off mid-INSERT and not
            # answered since: either way said so, never refused at once.
            self.assertRegex(out + err, r"could not be recorded(, so it was not sent: the store "
                             r"did not answer within store_failover_wait \(2 s\)| for certain)")
            refused.append(len(jids))
            return False

        for n in range(200):
            if n == 60:
                PG.stop()
            if n == 65:
                PG.start_again()
                # However long the master takes to see its store again, it
                # takes publishes once it has.
                wait_for(publish, 60, "a publish recorded after the database is back")
                continue
            publish()
        self.assertGreater(len(refused), 0, "the database was down for 5 publishes")
        # Before the stop and after the first recorded publish once it was
        # back, every publish was recorded.
        self.assertGreaterEqual(len(jids), 60 + 135)

        def settled():
            rows = PG.psql("SELECT count(*) FROM returns WHERE jid = ANY(ARRAY[%s]) "
                           % ",".join("'%s'" % j for j in jids), db)
            undelivered = PG.psql("SELECT count(*) FROM undelivered WHERE jid = ANY(ARRAY[%s])"
                                  % ",".join("'%s'" % j for j in jids), db)
            return int(rows) + int(undelivered) == 2 * len(jids)
        wait_for(settled, 60, "every (jid, minion) in returns or undelivered")
        both = PG.psql("SELECT count(*) FROM returns r JOIN undelivered u USING (jid, minion)", db)
        self.assertEqual(int(both), 0, "a (jid, minion) both returned and undelivered")

    def test_a_key_decision_made_while_the_database_is_down_reaches_it_later(self):
        ms, _, db = self.shared_masters(n=1, auto_accept=False)
        (a,) = ms.masters
        ms.add_minion("m1")
        wait_for(lambda: "m1" in a.keys()["pending"], 15, "m1 pending")
        PG.stop()
        try:
            rc, out, err = a.brine("key", "accept", "m1")
            self.assertEqual(rc, 0, err)
            self.assertIn("m1", a.keys()["accepted"])  # the master holds it meanwhile
        finally:
            PG.start_again()
        wait_for(lambda: PG.psql("SELECT state FROM keys WHERE id = 'm1'", db) == "accepted", 20,
                 "the accept written once the database is back")

    def test_a_master_started_while_the_database_is_down_waits_and_says_so(self):
        ms, store, _ = self.shared_masters(n=1)
        (a,) = ms.masters
        a.daemon.terminate()
        PG.stop()
        try:
            since = a.daemon.mark()
            a.start(wait_ready=False)
            wait_log(a.daemon, r"the master waits for it", 15, since)
            self.assertTrue(a.daemon.alive())
        finally:
            PG.start_again()
        wait_log(a.daemon, r"master listening on", 30, since)


class StoreSettingsTest(SharedStoreTestCase):

    def master_fails(self, ms, options):
        """Starts master-0 with `options` changed; returns its one error line."""
        (a,) = ms.masters
        a.daemon.terminate()
        conf = dict(a.options)
        conf.update(options)
        write_config(a.config, conf)
        p = subprocess.run([BRINE_BIN, "master", "-c", a.config], capture_output=True,
                           timeout=30, cwd=a.dir)
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        lines = [l for l in p.stderr.decode().splitlines() if l.strip()]
        return lines[-1]

    def test_store_check_and_migrate(self):
        ms, store, db = self.shared_masters(n=1)
        (a,) = ms.masters
        rc, out, err = a.brine("store", "check")
        self.assertEqual(rc, 0, err)
        self.assertIn("store: postgresql %s" % store["store"], out)
        self.assertRegex(out, r"schema version: (\d+) \(this brine: \1\)")
        self.assertIn("masters 1", out)
        rc, out, err = a.brine("store", "migrate")
        self.assertEqual(rc, 0, err)
        self.assertIn("is current; nothing to do", out)
        rc, out, err = a.brine("store", "check", "--json")
        self.assertEqual(rc, 0, err)
        status = json.loads(out)
        self.assertEqual(status["backend"], "postgresql")
        self.assertEqual(status["schema_version"], status["code_version"])

    def test_bad_settings_get_one_clear_line(self):
        ms, store, db = self.shared_masters(n=1)
        (a,) = ms.masters
        port = PG.port
        # A broken URL.
        line = self.master_fails(ms, {"store": "postgresql://brine@127.0.0.1:notaport/%s" % db})
        self.assertIn("notaport", line)
        # A wrong password: the line names the user and the database, never the password.
        wrong = os.path.join(a.dir, "wrong.pw")
        with open(wrong, "w") as f:
            f.write("not-the-password\n")
        os.chmod(wrong, 0o600)
        line = self.master_fails(ms, {"store_password_file": wrong})
        self.assertIn("password authentication failed", line)
        self.assertIn(store["store"], line)
        self.assertNotIn("not-the-password", line)
        # A password file others can read.
        os.chmod(wrong, 0o644)
        line = self.master_fails(ms, {"store_password_file": wrong})
        self.assertIn("chmod 600", line)
        # A database written by a newer brine.
        PG.psql("UPDATE brine_schema SET version = version + 5", db)
        line = self.master_fails(ms, {})
        self.assertIn("newer than this brine supports", line)
        self.assertIn(store["store"], line)


if __name__ == "__main__":
    unittest.main()
