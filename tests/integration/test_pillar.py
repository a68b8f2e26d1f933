#!/usr/bin/env python3
"""Pillar and the minion-side modules: pillar compiled on the master per
minion from pillar_roots and its top file, sent to that minion alone (never
logged), refreshed on request; pillar targets; grains.setval and
saltutil.refresh_grains reaching the master's targeting; saltutil.running
and kill_job on a real job."""

import json
import os
import re
import shutil
import subprocess
import textwrap
import unittest

from harness import BRINE_BIN, Cluster, ClusterCase, MasterSet, wait_for, write_config

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


class Pillar(ClusterCase):

    # auth_timeout: brine call's bound, generous for loaded test machines.
    MINIONS = {"web1": {"grains": {"roles": ["web"]}, "auth_timeout": 20},
               "db1": {"grains": {"roles": ["db"]}, "auth_timeout": 20}}

    @classmethod
    def before_start(cls):
        cls.root = cls.c.path("pillar")
        write_tree(cls.root, TREE)
        cls.c.configure(pillar_roots={"base": [cls.root]})

    @classmethod
    def after_start(cls):
        for mid in cls.MINIONS:
            wait_for(lambda: "common" in cls.call(mid, "pillar.ls"), 15,
                     "the pillar of %s" % mid)

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
        # A template renders for the minion, with its grains.
        # `salt` is the master's execution functions, as Salt's Pillar has.
        write_tree(self.root, {"web.sls": "web:\n  port: {{ 8000 + 81 }}\n"
                                          "  host: {{ grains['id'] }}\n"
                                          "  echo: {{ salt['test.echo']('hi') }}\n"
                                          "  role: {{ salt['grains.get']('roles:0') }}\n"})
        try:
            self.assertIs(self.call("web1", "saltutil.refresh_pillar"), True)
            wait_for(lambda: self.call("web1", "pillar.get", "web") ==
                     {"port": 8081, "host": "web1", "echo": "hi", "role": "web"}, 10,
                     "web1's templated pillar")
            # A broken one: an error naming the file, line and column, in _errors.
            write_tree(self.root, {"web.sls": "web:\n  port: {{ grains.nosuch }}\n"})
            self.call("web1", "saltutil.refresh_pillar")
            wait_for(lambda: "_errors" in self.call("web1", "pillar.raw"), 10,
                     "_errors in web1's pillar")
            errors = self.call("web1", "pillar.get", "_errors")
            self.assertTrue(any("web.sls" in e and "line 2 column" in e and "nosuch" in e
                                for e in errors), errors)
        finally:
            write_tree(self.root, {"web.sls": TREE["web.sls"]})
            self.call("web1", "saltutil.refresh_pillar")
            wait_for(lambda: self.call("web1", "pillar.get", "web:port") == 80, 10,
                     "web1's pillar restored")


    def test_pillar_items_asks_the_master_raw_and_get_read_what_the_minion_holds(self):
        # Changed on the master, no refresh: pillar.items compiles it now (as
        # Salt's does), the pillar the minion holds stays as it was.
        write_tree(self.root, {"web.sls": TREE["web.sls"].replace("port: 80", "port: 7070")})
        try:
            self.assertEqual(self.call("web1", "pillar.items")["web"], {"port": 7070})
            self.assertEqual(self.call("web1", "pillar.raw", "key=web"), {"port": 80})
            self.assertEqual(self.call("web1", "pillar.get", "web:port"), 80)
            self.assertNotIn("web", self.call("db1", "pillar.items"))
        finally:
            write_tree(self.root, {"web.sls": TREE["web.sls"]})

    def brine_call(self, mid, *args):
        return brine_call(os.path.join(self.c.minion_dir(mid), "minion.conf"), *args)

    def test_brine_call_gets_a_fresh_pillar_from_the_master_beside_the_daemon(self):
        master_mark = self.c.master.mark()
        minion_mark = self.c.minions["web1"].mark()
        # A job in flight on the daemon's session while brine call runs.
        rc, out, err = self.c.brine("cmd", "--async", "web1", "test.sleep", "2")
        self.assertEqual(rc, 0, err)
        jid = re.search(r"job ID: (\d+)", out).group(1)
        # Changed on the master, and no refresh: only the master has it.
        write_tree(self.root, {"web.sls": TREE["web.sls"].replace("port: 80", "port: 9090")})
        try:
            rc, out, err = self.brine_call("web1", "--out", "json", "pillar.items")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out), {"local": {
                "common": {"ntp": "pool.ntp.org"},
                "users": {"alice": {"uid": 1000}, "bob": {"uid": 1001}},
                "web": {"port": 9090}}})
            # The daemon still has the pillar it was given, and its session
            # carries on: the job in flight returns, new jobs run.
            self.assertEqual(self.call("web1", "pillar.get", "web:port"), 80)
            wait_for(lambda: "web1" in self.c.job(jid).get("returns", {}), 15,
                     "the return of the job in flight")
            self.assertIs(self.c.job(jid)["returns"]["web1"], True)
            self.assertIs(self.call("web1", "test.ping"), True)
            # Targeting still sees the daemon's pillar (the call left the
            # master's data cache alone).
            rc, out, err = self.c.brine("cmd", "--out", "json", "-t", "10", "-I", "web:port:80",
                                        "test.ping")
            self.assertEqual((rc, json.loads(out)), (0, {"web1": True}), err)
            log = self.c.master.log_since(master_mark)
            self.assertIn("brine call from minion web1", log)
            self.assertNotIn("minion web1 connected from", log)
            self.assertNotIn("minion web1 reconnected", log)
            self.assertNotRegex(log, r"minion web1 at \S+ disconnected")
            self.assertNotIn("connection to master", self.c.minions["web1"].log_since(minion_mark))
            # Another minion gets its own pillar, and the secret reaches no log.
            rc, out, err = self.brine_call("db1", "--out", "json", "pillar.get", "db:password")
            self.assertEqual((rc, json.loads(out)), (0, {"local": SECRET}), err)
            self.assertNotIn(SECRET, err)
            for d in [self.c.master] + list(self.c.minions.values()):
                self.assertNotIn(SECRET, d.log(), "the pillar secret is in the log of %r" % d)
        finally:
            write_tree(self.root, {"web.sls": TREE["web.sls"]})
            # brine call reads the tree again: the master's pillar is the
            # original one for the tests that follow.
            rc, out, err = self.brine_call("web1", "--out", "json", "pillar.get", "web:port")
            self.assertEqual((rc, out.strip()), (0, '{\n    "local": 80\n}'), err)
        self.assertFalse(os.path.exists(os.path.join(self.c.minion_dir("web1"), "cache",
                                                     "pillar.json")))


def brine_call(conf, *args):
    p = subprocess.run([BRINE_BIN, "call", "-c", conf] + list(args), capture_output=True,
                       text=True, timeout=60, cwd=os.path.dirname(conf))
    return p.returncode, p.stdout, p.stderr


class CallWithoutAMaster(unittest.TestCase):

    def test_key_not_accepted_then_master_down_then_local(self):
        c = Cluster(start=False)
        try:
            root = c.path("pillar")
            write_tree(root, TREE)
            c.master_options["pillar_roots"] = {"base": [root]}
            write_config(c.config, c.master_options)
            c.start_master()
            c.add_accepted_minion("web1", grains={"roles": ["web"]}, auth_timeout=20,
                                  pillar_roots={"base": [root]})
            conf = os.path.join(c.minion_dir("web1"), "minion.conf")
            rc, out, err = brine_call(conf, "--out", "json", "pillar.get", "web:port")
            self.assertEqual((rc, out.strip()), (0, '{\n    "local": 80\n}'), err)

            # A key the master has not accepted: said so, with the command
            # that accepts it; the key is pending on the master now.
            c.add_minion("stranger", start=False, auth_timeout=20)
            rc, out, err = brine_call(os.path.join(c.minion_dir("stranger"), "minion.conf"),
                                      "pillar.items")
            self.assertEqual(rc, 2, err)
            self.assertEqual(out, "")
            self.assertIn("minion key not accepted", err)
            self.assertIn("master 127.0.0.1:%d: the key is pending: accept it on the master "
                          "with 'brine key accept stranger'" % c.port, err)
            self.assertIn("stranger", c.keys()["pending"])

            # The master is down: a clear failure naming it, at once (a
            # refused connection is not waited for), not an old pillar.
            self.assertEqual(c.master.terminate(), 0)
            rc, out, err = brine_call(conf, "pillar.items")
            self.assertEqual(rc, 2, err)
            self.assertEqual(out, "")
            self.assertIn("no master answered the pillar request of minion web1 within "
                          "auth_timeout (20 s)", err)
            self.assertIn("master 127.0.0.1:%d: cannot connect" % c.port, err)
            self.assertIn("--local", err)

            # Masterless still works.
            rc, out, err = brine_call(conf, "--local", "--out", "json", "pillar.get", "web:port")
            self.assertEqual((rc, out.strip()), (0, '{\n    "local": 80\n}'), err)
        finally:
            c.stop()


class CallWithSeveralMasters(unittest.TestCase):

    def test_a_master_that_is_down_is_skipped(self):
        ms = MasterSet(2, start=False)
        try:
            root = os.path.join(ms.dir, "pillar")
            write_tree(root, TREE)
            for m in ms.masters:
                m.options["pillar_roots"] = {"base": [root]}
                write_config(m.config, m.options)
                m.start()
            ms.masters[0].kill()  # the first of the minion's list
            ms.add_minion("web1", start=False, grains={"roles": ["web"]}, auth_timeout=20)
            conf = os.path.join(ms.minion_dir("web1"), "minion.conf")
            rc, out, err = brine_call(conf, "--out", "json", "pillar.get", "web:port")
            self.assertEqual((rc, out.strip()), (0, '{\n    "local": 80\n}'), err)
            self.assertIn("brine call from minion web1",
                          ms.masters[1].daemon.log())
        finally:
            ms.stop()


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


GPG_SECRET = "gpg-Pillar-s3cret"


def gpg_keys(keydir):
    """A key pair in keydir (Salt's setup: gpg --homedir KEYDIR --gen-key,
    no passphrase) and GPG_SECRET encrypted to it, armored."""
    os.makedirs(keydir, mode=0o700)
    gpg = ["gpg", "--batch", "--homedir", keydir]
    subprocess.run(gpg + ["--passphrase", "", "--quick-gen-key", "brine test <t@brine>",
                          "future-default", "default", "never"],
                   check=True, capture_output=True, timeout=60)
    p = subprocess.run(gpg + ["--trust-model", "always", "--armor", "-r", "t@brine", "--encrypt"],
                       input=GPG_SECRET, check=True, capture_output=True, text=True, timeout=60)
    return p.stdout


def stop_gpg_agent(keydir):
    if os.path.isdir(keydir):
        subprocess.run(["gpgconf", "--homedir", keydir, "--kill", "all"], capture_output=True,
                       timeout=30)


def gpg_tree(cipher):
    block = "\n".join("    " + line for line in cipher.strip().splitlines())
    return {"top.sls": "base:\n  '*':\n    - secrets\n",
            "secrets.sls": "#!yaml|gpg\ndb:\n  user: app\n  password: |\n%s\n" % block}


@unittest.skipUnless(shutil.which("gpg"), "needs gpg (scripts/deps.sh installs gnupg)")
class GpgPillar(unittest.TestCase):
    """#!yaml|gpg pillar: decrypted by the master with the keys in gpgkeys
    beside its config (Salt's CONFIG_DIR/gpgkeys), sent to the minion in
    clear, never logged; and masterless with the minion's gpg_keydir."""

    def test_the_master_decrypts_with_the_keys_beside_its_config(self):
        c = Cluster(start=False)
        keydir = os.path.join(os.path.dirname(c.config), "gpgkeys")
        try:
            cipher = gpg_keys(keydir)
            root = c.path("pillar")
            write_tree(root, gpg_tree(cipher))
            c.configure(pillar_roots={"base": [root]})
            c.start_master()
            c.add_accepted_minion("m1")
            c.wait_connected("m1")
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "20", "m1", "pillar.get",
                                   "db:password")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out), {"m1": GPG_SECRET})
            for d in [c.master] + list(c.minions.values()):
                self.assertNotIn(GPG_SECRET, d.log())
        finally:
            c.abort()
            stop_gpg_agent(keydir)

    def test_masterless_decrypts_with_the_minions_gpg_keydir_and_can_insist(self):
        c = Cluster(start=False)
        keydir = c.path("keys")
        try:
            cipher = gpg_keys(keydir)
            root = c.path("pillar")
            write_tree(root, gpg_tree(cipher))
            d = c.minion_dir("solo")
            os.makedirs(d)
            conf = os.path.join(d, "minion.conf")
            options = {"id": "solo", "pki_dir": "pki", "cachedir": "cache",
                       "pillar_roots": {"base": [root]}, "gpg_keydir": keydir}
            write_config(conf, options)

            def call(*args):
                p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--local", "--out", "json"] +
                                   list(args), capture_output=True, text=True, timeout=60)
                return p.returncode, p.stdout, p.stderr
            rc, out, err = call("pillar.get", "db")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out), {"local": {"user": "app", "password": GPG_SECRET}})
            # Keys elsewhere: Salt keeps the block as it is, with a warning;
            # gpg_decrypt_must_succeed makes the file an error instead.
            options["gpg_keydir"] = c.path("nokeys")
            write_config(conf, options)
            rc, out, err = call("pillar.get", "db:password")
            self.assertEqual(rc, 0, err)
            self.assertTrue(json.loads(out)["local"].startswith("-----BEGIN PGP MESSAGE-----"), out)
            self.assertIn("Could not decrypt cipher", err)
            options["gpg_decrypt_must_succeed"] = True
            write_config(conf, options)
            rc, out, err = call("pillar.items")
            self.assertIn("secrets.sls: Could not decrypt cipher", out + err)
            self.assertIn("gpg_decrypt_must_succeed is on", out + err)
            self.assertNotIn(GPG_SECRET, out + err)
        finally:
            c.abort()
            stop_gpg_agent(keydir)


class ExtPillar(unittest.TestCase):
    """Salt's ext_pillar on the master: an outside classifier's node data
    (cmd_json with the minion id, file_tree's hosts/ID), merged over the
    top file's pillar in the option's order; and masterless from the
    minion's config."""

    def test_the_master_merges_classifier_data_for_each_minion(self):
        c = Cluster(start=False)
        try:
            root = c.path("pillar")
            write_tree(root, {"top.sls": "base:\n  '*':\n    - common\n",
                              "common.sls": "role: none\nsite: {dc: ams}\n"})
            tree = c.path("tree")
            os.makedirs(os.path.join(tree, "hosts", "m1", "app"))
            with open(os.path.join(tree, "hosts", "m1", "app", "version"), "w") as f:
                f.write("1.2.3\n")
            classifier = c.path("classify")
            with open(classifier, "w") as f:
                f.write("#!/bin/sh\nprintf '{\"role\": \"web-%s\", \"site\": {\"rack\": 7}}' \"$1\"\n")
            os.chmod(classifier, 0o755)
            c.configure(pillar_roots={"base": [root]},
                        ext_pillar=[{"cmd_json": classifier + " %s"},
                                    {"file_tree": {"root_dir": tree}}])
            c.start_master()
            c.add_accepted_minion("m1")
            c.wait_connected("m1")
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "20", "m1", "pillar.items")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["m1"],
                             {"role": "web-m1", "site": {"dc": "ams", "rack": 7},
                              "app": {"version": "1.2.3"}})
        finally:
            c.abort()

    def test_compiles_that_wait_on_a_classifier_run_side_by_side(self):
        # Each minion's classifier call marks its start, then waits (up to
        # 20 s) for the other minion's mark: run one after the other, the
        # first would give up and say so.
        c = Cluster(start=False)
        try:
            marks = c.path("marks")
            os.makedirs(marks)
            classifier = c.path("classify")
            with open(classifier, "w") as f:
                f.write(textwrap.dedent("""\
                    #!/bin/sh
                    touch "%s/$1"
                    other=m1; [ "$1" = m1 ] && other=m2
                    i=0
                    while [ ! -e "%s/$other" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
                    if [ -e "%s/$other" ]; then echo '{"overlap": true}'; else echo '{"overlap": false}'; fi
                    """ % (marks, marks, marks)))
            os.chmod(classifier, 0o755)
            c.configure(ext_pillar=[{"cmd_json": classifier + " %s"}])
            c.start_master()
            c.add_accepted_minions(["m1", "m2"])

            def both_classified():
                rc, out, err = c.brine("cmd", "--out", "json", "-t", "20", "m*", "pillar.get",
                                       "overlap")
                got = json.loads(out) if rc == 0 else {}
                return got if len(got) == 2 and "" not in got.values() else None
            self.assertEqual(wait_for(both_classified, 60, "both minions' classified pillar"),
                             {"m1": True, "m2": True})
        finally:
            c.abort()

    def test_an_unknown_interface_stops_the_master_with_the_fix(self):
        c = Cluster(start=False)
        try:
            c.configure(ext_pillar=[{"vault": {"path": "secret/x"}}])
            p = subprocess.run([BRINE_BIN, "master", "-c", c.config], capture_output=True,
                               text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("interface 'vault' is unavailable in brine; use one of cmd_json, "
                          "cmd_yaml, file_tree, http_json, http_yaml, postgres", p.stderr)
        finally:
            c.abort()

    def test_masterless_with_ext_pillar_first(self):
        c = Cluster(start=False)
        try:
            root = c.path("pillar")
            write_tree(root, {"top.sls": "base:\n  'I@tier:gold':\n    - gold\n",
                              "gold.sls": "support: 24x7\ntier: {{ pillar.tier }}-plus\n"})
            d = c.minion_dir("solo")
            os.makedirs(d)
            conf = os.path.join(d, "minion.conf")
            write_config(conf, {"id": "solo", "pki_dir": "pki", "cachedir": "cache",
                                "pillar_roots": {"base": [root]},
                                "ext_pillar": [{"cmd_yaml": "echo 'tier: gold'"}],
                                "ext_pillar_first": True})
            p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--local", "--out", "json",
                                "pillar.items"], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout), {"local": {"tier": "gold-plus",
                                                              "support": "24x7"}})
        finally:
            c.abort()


class MasterTops(unittest.TestCase):
    """Salt's master_tops ext_nodes: the master runs the classifier for each
    minion and sends its classes with the pillar; the highstate takes the
    top file's names, then the classifier's others (master_tops_first: the
    other way round), and a refresh brings a changed classification."""

    def test_the_classifier_adds_to_the_top_file(self):
        c = Cluster(start=False)
        try:
            states = c.path("states")
            write_tree(states, {"top.sls": "base:\n  '*':\n    - common\n",
                                "common.sls": "common: {test.nop: []}\n",
                                "web.sls": "web: {test.nop: []}\n"})
            classifier = c.path("classify")
            with open(classifier, "w") as f:
                f.write("#!/bin/sh\necho \"classes: [web, common]\"\n")
            os.chmod(classifier, 0o755)
            c.configure(file_roots={"base": [states]}, master_tops={"ext_nodes": classifier})
            c.start_master()
            c.add_accepted_minion("m1")
            c.add_accepted_minion("m2", master_tops_first=True)

            def top(mid):
                rc, out, err = c.brine("cmd", "--out", "json", "-t", "30", mid, "state.show_top")
                self.assertEqual(rc, 0, err)
                return json.loads(out)[mid]
            self.assertEqual(top("m1"), {"base": ["common", "web"]})
            self.assertEqual(top("m2"), {"base": ["web", "common"]})
            rc, out, err = c.brine("cmd", "--out", "json", "-t", "60", "m1", "state.apply")
            self.assertEqual(rc, 0, err)
            self.assertEqual(sorted(k.split("_|-")[1] for k in json.loads(out)["m1"]),
                             ["common", "web"])
            # A new classification reaches the minion with its next pillar.
            with open(classifier, "w") as f:
                f.write("#!/bin/sh\necho 'environment: base'\necho 'classes: {}'\n")
            rc, out, err = c.brine("cmd", "-t", "30", "m1", "saltutil.refresh_pillar")
            self.assertEqual(rc, 0, err)
            wait_for(lambda: top("m1") == {"base": ["common"]}, 30, "the new classification")
        finally:
            c.abort()

    def test_an_unknown_module_stops_the_master_with_the_fix(self):
        c = Cluster(start=False)
        try:
            c.configure(master_tops={"reclass": {"inventory_base_uri": "/srv"}})
            p = subprocess.run([BRINE_BIN, "master", "-c", c.config], capture_output=True,
                               text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("master_tops: module 'reclass' is unavailable in brine; use ext_nodes",
                          p.stderr)
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
