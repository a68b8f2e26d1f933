#!/usr/bin/env python3
"""The postgres states through the real binary: `brine call --local
state.apply` of a small tree (a role, a database it owns, a schema in it, an
extension) against a throwaway PostgreSQL server on loopback (pgserver.py),
with the connection in the minion config (postgres.host, postgres.port,
postgres.user, postgres.pass, as Salt's config.option finds them): created,
a second run that changes nothing, a password change that is reported and
never printed, test=True, then the absent states, each run's JSON compared with Salt 3006.23's recorded
output (tests/fixtures/postgres_states). Skipped when PostgreSQL
is not installed (unless BRINE_REQUIRE_POSTGRES=1)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import BRINE_BIN, SLACK, write_config
from pgserver import PostgresServer, require_postgres

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                       "postgres_states")


def salt_output(case):
    """Salt 3006.23's recorded --out json output of one case (see the fixture's README)."""
    with open(os.path.join(FIXTURE, "salt", case + ".json")) as f:
        return f.read()


def normalised(text):
    text = re.sub(r'"start_time": "[^"]*"', '"start_time": "00:00:00.000000"', text)
    return re.sub(r'"duration": -?[0-9][0-9.eE+-]*', '"duration": 0.0', text)


class PostgresStatesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        require_postgres()
        cls.pg = PostgresServer()
        cls.pg.start()
        # Salt's postgres states are usually run as the server's superuser.
        cls.pg.psql("ALTER ROLE brine SUPERUSER")

    @classmethod
    def tearDownClass(cls):
        cls.pg.cleanup()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="brine-pg-states-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        roots = os.path.join(self.dir, "srv")
        os.makedirs(roots)
        for name in ("present.sls", "absent.sls"):
            shutil.copy(os.path.join(FIXTURE, name), roots)
        self.roots = roots
        self.config = os.path.join(self.dir, "minion")
        self.write_minion("first-Secret")
        self.addCleanup(self.pg.psql, "DROP ROLE IF EXISTS app")
        self.addCleanup(self.pg.psql, "DROP DATABASE IF EXISTS appdb")

    def write_minion(self, app_password):
        write_config(self.config, {
            "id": "pg-minion",
            "file_client": "local",
            "file_roots": {"base": [self.roots]},
            "pki_dir": os.path.join(self.dir, "pki"),
            "cachedir": os.path.join(self.dir, "cache"),
            "grains": {"app_password": app_password},
            "postgres.host": "127.0.0.1",
            "postgres.port": self.pg.port,
            "postgres.user": "brine",
            "postgres.pass": self.pg.password,
        })

    def apply(self, *args, salt=None):
        p = subprocess.run([BRINE_BIN, "call", "--local", "-c", self.config, "state.sls"]
                           + list(args) + ["--out", "json"],
                           capture_output=True, text=True, timeout=120 * SLACK)
        for secret in (self.pg.password, "first-Secret", "second-Secret"):
            self.assertNotIn(secret, p.stdout + p.stderr)
        if salt is not None:
            self.assertEqual(normalised(p.stdout), salt_output(salt),
                             "brine's output differs from Salt's (case %s)" % salt)
        try:
            ret = json.loads(p.stdout)["local"]
        except ValueError:
            self.fail("not JSON:\n" + p.stdout + p.stderr)
        return p.returncode, {r["__id__"]: r for r in ret.values()}

    def test_present_twice_password_change_test_mode_then_absent(self):
        rc, ret = self.apply("present", salt="1_present")
        self.assertEqual(rc, 0, ret)
        self.assertEqual(ret["app_role"]["comment"], "The user app has been created")
        self.assertEqual(ret["app_role"]["changes"], {"app": "Present"})
        self.assertEqual(ret["app_db"]["comment"], "The database appdb has been created")
        self.assertEqual(ret["app_schema"]["comment"],
                         "Schema reports has been created in database appdb")
        self.assertEqual(ret["app_ext"]["comment"], "Extension plpgsql is already present")
        self.assertEqual(self.pg.psql(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'appdb'"), "app")
        self.assertEqual(self.pg.psql(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'reports'",
            db="appdb"), "app")
        self.assertTrue(self.pg.psql(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'app'").startswith(
                "SCRAM-SHA-256$4096:"))

        rc, ret = self.apply("present", salt="2_present_again")
        self.assertEqual(rc, 0, ret)
        for sid, r in ret.items():
            self.assertEqual(r["changes"], {}, sid)
            self.assertIs(r["result"], True, sid)
        self.assertEqual(ret["app_role"]["comment"], "User app is already present")
        self.assertEqual(ret["app_db"]["comment"], "Database appdb is already present")
        self.assertEqual(ret["app_schema"]["comment"],
                         "Schema reports already exists in database appdb")

        self.write_minion("second-Secret")
        rc, ret = self.apply("present", "test=True", salt="3_password_changed_test")
        self.assertEqual(rc, 0, ret)
        self.assertIsNone(ret["app_role"]["result"])
        self.assertEqual(ret["app_role"]["comment"], "User app is set to be updated")
        self.assertEqual(ret["app_role"]["changes"], {"app": {"password": True}})
        rc, ret = self.apply("present", salt="4_password_changed")
        self.assertEqual(rc, 0, ret)
        self.assertEqual(ret["app_role"]["comment"], "The user app has been updated")
        self.assertEqual(ret["app_role"]["changes"], {"app": {"password": True}})

        rc, ret = self.apply("absent", "test=True", salt="5_absent_test")
        self.assertEqual(rc, 0, ret)
        self.assertEqual(ret["no_db"]["comment"], "Database appdb is set to be removed")
        self.assertEqual(self.pg.psql("SELECT count(*) FROM pg_database WHERE datname = 'appdb'"),
                         "1")
        rc, ret = self.apply("absent", salt="6_absent")
        self.assertEqual(rc, 0, ret)
        self.assertEqual(ret["no_db"]["changes"], {"appdb": "Absent"})
        self.assertEqual(ret["no_role"]["comment"], "User app has been removed")
        self.assertEqual(self.pg.psql("SELECT count(*) FROM pg_roles WHERE rolname = 'app'"), "0")
        rc, ret = self.apply("absent", salt="7_absent_again")
        self.assertEqual(rc, 0, ret)

    def test_an_unreachable_server_fails_the_state_with_the_fix(self):
        self.pg.stop()
        self.addCleanup(self.pg.start)
        rc, ret = self.apply("present")
        self.assertEqual(rc, 2, ret)
        r = ret["app_role"]
        self.assertIs(r["result"], False)
        self.assertIn("127.0.0.1:%d" % self.pg.port, r["comment"])
        self.assertIn("check postgres.host and postgres.port", r["comment"])


if __name__ == "__main__":
    unittest.main()
