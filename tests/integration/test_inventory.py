#!/usr/bin/env python3
"""`brine inventory` and `brine report states` against a real master and real
minions with Salt's own grain sets (Debian 12, Ubuntu 22.04, Rocky 9): what
the CLI prints equals what the store holds (read here with sqlite3); targets
are answered from the cache; bad fields and targets get one clear line and
exit 3; pillar is printed only when named and allowed by
inventory_pillar_keys."""

import csv
import io
import json
import os
import sqlite3
import tempfile
import textwrap
import time
import unittest

from harness import Cluster, MasterSet, wait_for, write_config
from pgserver import PostgresServer, postgres_available

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRAINS = os.path.join(ROOT, "src", "grains", "tests", "fixtures", "expected")
MINIONS = {"deb1": "debian-12", "ubu1": "ubuntu-22", "rocky1": "rocky-9"}
SECRET = "s3cr3t-inventory-pillar"

TREE = {
    "salt/top.sls": "base:\n  '*':\n    - web\n",
    "salt/web.sls": """\
        nginx:
          test.succeed_with_changes
        motd:
          test.succeed_without_changes
        """,
    "salt/bad.sls": """\
        nginx:
          test.fail_without_changes
        """,
    "pillar/top.sls": "base:\n  '*':\n    - common\n",
    "pillar/common.sls": """\
        role: web
        db:
          host: db.example
          password: %s
        """ % SECRET,
}


def grains_block(platform):
    lines = ["grains:"]
    with open(os.path.join(GRAINS, platform + ".yaml")) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#") or line.startswith("---"):
                continue
            lines.append("  " + line)
    return "\n".join(lines) + "\n"


class Inventory(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = c = Cluster(start=False)
        try:
            for name, text in TREE.items():
                path = c.path(name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(textwrap.dedent(text))
            c.master_options.update({"file_roots": {"base": [c.path("salt")]},
                                     "pillar_roots": {"base": [c.path("pillar")]},
                                     "inventory_pillar_keys": ["role", "db.host"]})
            write_config(c.config, c.master_options)
            c.start_master()
            for mid, platform in MINIONS.items():
                c.add_minion(mid, start=False, grains_blacklist=["*"])
                with open(os.path.join(c.minion_dir(mid), "minion.conf"), "a") as f:
                    f.write(grains_block(platform))
                c.minions[mid].start()
                c.wait_pending(mid)
                rc, out, err = c.brine("key", "accept", mid)
                assert rc == 0, out + err
            for mid in MINIONS:
                c.wait_connected(mid)
            # A state run for everyone, then a failing one for rocky1: the
            # last runs differ.
            rc, out, err = c.brine("cmd", "-t", "60", "*", "state.apply", timeout=120)
            assert rc == 0, out + err
            rc, out, err = c.brine("cmd", "-t", "60", "rocky1", "state.sls", "bad", timeout=120)
            assert rc != 0, out + err
            wait_for(lambda: cls.store_settled(), 30, "grains, pillar and 4 reports in the store")
        except BaseException:
            c.abort()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()

    @classmethod
    def db(cls):
        return sqlite3.connect(cls.c.path("master-cache", "jobs.db"))

    @classmethod
    def store_settled(cls):
        with cls.db() as db:
            rows = db.execute("SELECT count(*) FROM minion_data WHERE grains IS NOT NULL AND "
                              "pillar IS NOT NULL AND master <> ''").fetchone()[0]
            reports = db.execute("SELECT count(*) FROM reports").fetchone()[0]
        return rows == 3 and reports == 4

    def inventory(self, *args, rc=0):
        code, out, err = self.c.brine("inventory", *args)
        self.assertEqual(code, rc, out + err)
        return out, err

    def inventory_json(self, *args):
        return json.loads(self.inventory("--out", "json", *args)[0])

    def test_default_fields_equal_the_store(self):
        got = self.inventory_json()
        with self.db() as db:
            data = {r[0]: r[1:] for r in db.execute(
                "SELECT id, grains, last_seen, master FROM minion_data")}
            last = {r[0]: r[1:] for r in db.execute(
                "SELECT l.minion, r.status, r.started FROM last_reports l JOIN reports r "
                "ON r.jid = l.jid AND r.minion = l.minion")}
        self.assertEqual([m["id"] for m in got], sorted(MINIONS))
        for m in got:
            grains_text, last_seen, master = data[m["id"]]
            grains = json.loads(grains_text)
            self.assertEqual(list(m), ["id", "os", "osrelease", "master", "last_seen",
                                       "last_run.status", "last_run.started"])
            self.assertEqual(m["os"], grains["os"])
            self.assertEqual(m["osrelease"], grains["osrelease"])
            self.assertEqual(m["master"], master)
            self.assertNotEqual(m["master"], "")
            self.assertEqual(m["last_seen"], last_seen)
            self.assertEqual((m["last_run.status"], m["last_run.started"]), last[m["id"]])
        self.assertEqual({m["id"]: m["last_run.status"] for m in got},
                         {"deb1": "changed", "ubu1": "changed", "rocky1": "failed"})
        self.assertEqual({m["id"]: m["os"] for m in got},
                         {"deb1": "Debian", "ubu1": "Ubuntu", "rocky1": "Rocky"})

    def test_targets_answered_from_the_cache(self):
        def ids(*args):
            return [m["id"] for m in self.inventory_json("--fields", "id", *args)]
        self.assertEqual(ids("-G", "os:Debian"), ["deb1"])
        self.assertEqual(ids("-C", "G@os_family:Debian and not G@os:Ubuntu"), ["deb1"])
        self.assertEqual(ids("-C", "G@os:Rocky or ubu*"), ["rocky1", "ubu1"])
        self.assertEqual(ids("-C", "G@osmajorrelease:9 and G@os:Rocky"), ["rocky1"])
        self.assertEqual(ids("-L", "deb1,nobody"), ["deb1"])
        self.assertEqual(ids("-E", "^(deb|ubu)"), ["deb1", "ubu1"])
        self.assertEqual(ids("-I", "role:web"), sorted(MINIONS))
        self.assertEqual(ids("*1"), sorted(MINIONS))
        self.assertEqual(ids("-G", "os:Windows"), [])
        out, _ = self.inventory("-G", "os:Windows")
        self.assertEqual(out, "no minions match\n")

    def test_chosen_fields_table_and_csv(self):
        with self.db() as db:
            grains = {r[0]: json.loads(r[1]) for r in db.execute(
                "SELECT id, grains FROM minion_data")}
            keys = {r[0]: r[1] for r in db.execute(
                "SELECT id, fingerprint FROM keys WHERE state = 'accepted'")}
        fields = "id,ip4_interfaces.eth0,ip4_interfaces:eth0:0,num_cpus,key,key.fingerprint,connected"
        got = {m["id"]: m for m in self.inventory_json("--fields", fields)}
        for mid, m in got.items():
            self.assertEqual(m["ip4_interfaces.eth0"], grains[mid]["ip4_interfaces"]["eth0"])
            self.assertEqual(m["ip4_interfaces:eth0:0"], grains[mid]["ip4_interfaces"]["eth0"][0])
            self.assertEqual(m["num_cpus"], grains[mid]["num_cpus"])
            self.assertEqual((m["key"], m["key.fingerprint"]), ("accepted", keys[mid]))
            self.assertIs(m["connected"], True)
        # CSV: the same values, a list as JSON in one quoted cell.
        out, _ = self.inventory("--out", "csv", "--fields", fields)
        self.assertTrue(out.endswith("\r\n"))
        rows = list(csv.reader(io.StringIO(out, newline="")))
        self.assertEqual(rows[0], fields.split(","))
        self.assertEqual(len(rows), 4)
        for row in rows[1:]:
            self.assertEqual(json.loads(row[1]), got[row[0]]["ip4_interfaces.eth0"])
            self.assertEqual(row[3], str(got[row[0]]["num_cpus"]))
        # The table: a header of the field names, a line per minion.
        out, _ = self.inventory("--fields", "id,os,last_run.status")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["id", "os", "last_run.status"])
        self.assertEqual([l.split() for l in lines[1:]],
                         [["deb1", "Debian", "changed"], ["rocky1", "Rocky", "failed"],
                          ["ubu1", "Ubuntu", "changed"]])
        # A grain path no minion has is an empty cell, not an error (the
        # README says so; a bad built-in is one, above).
        out, _ = self.inventory("--out", "csv", "--fields", "id,nosuch.field")
        rows = list(csv.reader(io.StringIO(out, newline="")))
        self.assertEqual(rows, [["id", "nosuch.field"], ["deb1", ""], ["rocky1", ""], ["ubu1", ""]])
        # YAML parses as the same list (a line per field).
        out, _ = self.inventory("--out", "yaml", "--fields", "id,os", "deb1")
        self.assertEqual(out, "minions:\n- id: deb1\n  os: Debian\n")

    def test_bad_fields_and_targets_say_what_and_how(self):
        cases = [
            (["--fields", "id,last_run.bogus"], "unknown field 'last_run.bogus'"),
            (["--fields", "os..release"], "field 'os..release' has an empty key"),
            (["--fields", "id,,os"], "--fields has an empty field"),
            (["--fields", "pillar"], "field 'pillar' needs a key: pillar.KEY"),
            (["-C", "G@os:Debian and and deb1"], "target 'G@os:Debian and and deb1'"),
            (["-E", "(unclosed"], "target '(unclosed' (pcre)"),
            (["-G", "nodelimiter"], "target 'nodelimiter' (grain)"),
        ]
        for args, message in cases:
            out, err = self.inventory(*args, rc=3)
            self.assertEqual(out, "")
            self.assertTrue(err.startswith("brine inventory: "), err)
            self.assertIn(message, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_pillar_only_when_named_and_allowed(self):
        # Not by default, in no format.
        for fmt in ("table", "json", "yaml", "csv"):
            out, _ = self.inventory("--out", fmt, "--fields",
                                    "id,os,master,last_seen,last_run.status")
            self.assertNotIn(SECRET, out)
            self.assertNotIn("db.example", out)
        # Allowed keys print; the store holds them.
        got = self.inventory_json("--fields", "id,pillar.role,pillar.db.host")
        self.assertEqual({m["id"]: (m["pillar.role"], m["pillar.db.host"]) for m in got},
                         {mid: ("web", "db.example") for mid in MINIONS})
        # A key not allowed, or a parent of one that is, is refused with the fix.
        for field in ("pillar.db.password", "pillar.db", "pillar:db:password"):
            out, err = self.inventory("--out", "json", "--fields", "id," + field, rc=3)
            self.assertEqual(out, "")
            self.assertIn("is not in inventory_pillar_keys of " + self.c.config, err)
            self.assertNotIn(SECRET, err)

    def test_report_states_by_id(self):
        def states(*args):
            code, out, err = self.c.brine("report", "states", "--out", "json", *args)
            self.assertEqual(code, 0, out + err)
            return json.loads(out)
        got = states("--id", "nginx")
        # Every run of nginx: the highstate on all three, the failing sls on rocky1.
        with self.db() as db:
            reports = {(r[0], r[1]): json.loads(r[2]) for r in db.execute(
                "SELECT jid, minion, ret FROM reports")}
        want = set()
        for (jid, minion), ret in reports.items():
            for tag, state in ret.items():
                if state["__id__"] == "nginx":
                    want.add((jid, minion, tag.split("_|-")[0] + "." + tag.split("_|-")[-1],
                              state["result"], bool(state["changes"])))
        self.assertEqual({(r["jid"], r["minion"], r["function"], r["result"], r["changes"])
                          for r in got}, want)
        self.assertEqual(len(got), 4)
        starts = [r["started_ms"] for r in got]
        self.assertEqual(starts, sorted(starts, reverse=True))
        self.assertEqual(got[0]["minion"], "rocky1")
        self.assertIs(got[0]["result"], False)
        # Filters: a minion, the last run only.
        self.assertEqual([r["minion"] for r in states("--id", "nginx", "--minion", "deb*")],
                         ["deb1"])
        last = states("--id", "nginx", "--last")
        self.assertEqual(sorted((r["minion"], r["result"]) for r in last),
                         [("deb1", True), ("rocky1", False), ("ubu1", True)])
        self.assertEqual(len(states("--id", "motd")), 3)
        code, out, err = self.c.brine("report", "states", "--id", "nope")
        self.assertEqual(code, 0, err)
        self.assertTrue(out.startswith("no run of state nope in "), out)
        code, out, err = self.c.brine("report", "states", "--id", "nginx", "--minion", "rocky1")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split()[:4], ["JID", "MINION", "STARTED", "(UTC)"])
        self.assertEqual(len(lines), 3, out)
        self.assertIn(" False ", lines[1])

    def test_with_the_master_down_the_store_answers_alike(self):
        # Last in the class (by name): it stops the master. While it runs,
        # the master answers from memory, the last runs included; the proof:
        # a config whose cachedir holds no store at all still lists every
        # minion and its last run.
        fields = ("id,os,osrelease,key,key.fingerprint,pillar.role,pillar.db.host,"
                  "ip4_interfaces.eth0,last_run.status,last_run.started,last_run.jid,"
                  "last_run.function,last_run.test")
        queries = [["--out", "json", "--fields", fields],
                   ["--out", "csv", "--fields", fields],
                   ["--out", "yaml", "-G", "os:Debian", "--fields", fields],
                   ["--out", "json", "-C", "G@os:Rocky or ubu*", "--fields", "id,osfinger"],
                   ["--out", "json", "-I", "role:web", "--fields", "id,kernel"],
                   ["--fields", "id,os,last_run.status"]]
        up = [self.inventory(*q)[0] for q in queries]
        self.assertEqual([m["id"] for m in json.loads(up[0])], sorted(MINIONS))
        elsewhere = self.c.path("no-store.conf")
        write_config(elsewhere, dict(self.c.master_options, cachedir=self.c.path("empty-cache")))
        runs = {"deb1": "changed", "ubu1": "changed", "rocky1": "failed"}

        def from_memory():
            code, out, err = self.c.brine("inventory", "-c", elsewhere, "--out", "json",
                                          "--fields", "id,os,master,last_run.status",
                                          config=False)
            self.assertEqual(code, 0, out + err)
            got = json.loads(out)
            self.assertEqual({m["id"]: m["os"] for m in got},
                             {"deb1": "Debian", "ubu1": "Ubuntu", "rocky1": "Rocky"})
            return {m["id"]: m["last_run.status"] for m in got}

        self.assertEqual(from_memory(), runs)
        # The master gone, the CLI reads the store itself: the same answers
        # (master, connected and last_seen change as the minions leave it:
        # test_default_fields_equal_the_store compares those with the store).
        self.assertEqual(self.c.master.terminate(), 0)
        down = [self.inventory(*q)[0] for q in queries]
        for q, a, b in zip(queries, up, down):
            self.assertEqual(a, b, q)
        code, out, err = self.c.brine("inventory", "-c", elsewhere, "--fields", "id",
                                      config=False)
        self.assertNotEqual(code, 0, out)
        # Started again, the master reads the last runs from the store.
        self.c.start_master()
        self.assertEqual(from_memory(), runs)


class SharedStoreInventory(unittest.TestCase):
    """Two masters on one PostgreSQL store: a master hears of the runs its
    peers' minions report (the store's brine_reports notifications), so
    every master's inventory gives the last runs from memory, whichever
    master the minion returned to."""

    def setUp(self):
        if not postgres_available():
            if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
                raise AssertionError("PostgreSQL (initdb, pg_ctl) is not installed")
            raise unittest.SkipTest("PostgreSQL is not installed (apt-get install postgresql)")
        self.pg = PostgresServer()
        self.pg.start()
        self.addCleanup(self.pg.stop)
        db = "brine_inventory_%d_%d" % (os.getpid(), int(time.monotonic() * 1000))
        self.pg.create_database(db)
        pw = os.path.join(self.pg.dir, db + ".pw")
        self.pg.password_file(pw)
        self.ms = MasterSet(2, master_opts={"store": self.pg.url(db), "store_password_file": pw})
        self.addCleanup(self.ms.stop)

    def test_every_master_gives_the_last_run_a_peer_received(self):
        a, b = self.ms.masters
        self.ms.add_minion("m0", masters=[a.address])
        self.ms.wait_served("m0", a, timeout=30)
        rc, out, err = a.brine("cmd", "-t", "60", "m0", "state.single",
                               "test.succeed_with_changes", "name=x", timeout=120)
        self.assertEqual(rc, 0, out + err)

        def last_run(master):
            code, out, err = master.brine("inventory", "--out", "json", "--fields",
                                          "id,master,last_run.status,last_run.function")
            self.assertEqual(code, 0, out + err)
            return json.loads(out)

        # The run and m0's presence on a reach b by the change feed, each
        # in its own notification: b's row is whole once both came.
        wait_for(lambda: last_run(b)[0]["last_run.status"] == "changed"
                 and last_run(b)[0]["master"], 30,
                 "master b's inventory to give m0's run and master through a")
        got = [last_run(m) for m in (a, b)]
        self.assertEqual(got[0], got[1])
        self.assertEqual(got[0][0]["last_run.status"], "changed")
        self.assertEqual(got[0][0]["last_run.function"], "state.single")
        self.assertTrue(got[0][0]["master"].endswith(":%d" % a.port), got)
        # From b's memory, not from the store: with the store down, b's
        # inventory still gives the run a received (the CLI reads the store
        # only when no master answers, and it is not there to read).
        self.pg.stop()
        self.assertEqual(last_run(b), got[1])
        self.pg.start_again()


if __name__ == "__main__":
    unittest.main()
