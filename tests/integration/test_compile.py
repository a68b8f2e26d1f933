#!/usr/bin/env python3
"""Compile masters (state_compile: master): one master that compiles the
state runs of the minions its state_compile_target names (c1) and not of
the others (m1, which compiles its own, as Salt's minions do). The same
tree applied on both gives the same results; an unchanged minion's second
run is a catalog cache hit, and a changed file, grain or pillar value a
miss (the master's own metrics count them); compile errors read as a
minion's own; a template that calls a function of the minion's machine is
compiled on the minion; a master-compiled run fetches only the files whose
hashes its minion lacks."""

import json
import os
import re
import shutil
import tempfile
import unittest

from harness import (SLACK, Cluster, ClusterCase, MasterSet, figure, free_port, scrape,
                     wait_for)

TREE = {
    "top.sls": "base:\n  '*':\n    - web\n",
    "web/init.sls": """\
include:
  - web.files

{% set port = pillar.get('web', {}).get('port', 80) %}
web_conf:
  file.managed:
    - name: {{ grains['sandbox'] }}/web.conf
    - source: salt://web/web.conf.jinja
    - template: jinja
    - context:
        port: {{ port }}
        os: {{ grains['os'] }}

announce:
  cmd.run:
    - name: echo "conf {{ port }} written"
    - onchanges:
      - file: web_conf

{% for name in salt['pillar.get']('web:sites', []) %}
site_{{ name }}:
  file.directory:
    - name: {{ grains['sandbox'] }}/sites/{{ name }}
    - makedirs: True
    - require:
      - file: web_conf
{% endfor %}

checked:
  test.succeed_without_changes:
    - require:
      - cmd: announce
""",
    "web/files.sls": """\
static_index:
  file.managed:
    - name: {{ grains['sandbox'] }}/index.html
    - source: salt://web/index.html

static_logo:
  file.managed:
    - name: {{ grains['sandbox'] }}/logo.txt
    - source: salt://web/logo.txt
""",
    "web/web.conf.jinja": "listen {{ port }} on {{ os }} for {{ grains['id'] }}\n",
    "web/index.html": "<h1>hello</h1>\n",
    "web/logo.txt": "LOGO\n",
    "plain.sls": """\
plain_index:
  file.managed:
    - name: {{ grains['sandbox'] }}/plain/index.html
    - source: salt://web/index.html
    - makedirs: True

plain_logo:
  file.managed:
    - name: {{ grains['sandbox'] }}/plain/logo.txt
    - source: salt://web/logo.txt
    - makedirs: True
""",
    "broken.sls": "this: is: not: yaml:\n  - [\n",
    "machine.sls": """\
{% if salt['file.file_exists']('/etc/hostname') or True %}
looked:
  test.succeed_without_changes:
    - name: looked at the minion's machine
{% endif %}
""",
}

PILLAR = {
    "top.sls": "base:\n  '*':\n    - web\n",
    "web.sls": "web:\n  port: 8080\n  sites: [alpha, beta]\n",
}


def write_tree(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


def normalized(ret, mid, sandbox):
    """A state return with what differs between two minions by nature (the
    id, its sandbox, times and pids) taken out."""
    text = json.dumps(ret, sort_keys=True)
    text = text.replace(sandbox, "SANDBOX").replace(mid, "MINION")
    out = json.loads(text)
    if isinstance(out, dict):
        for state in out.values():
            if isinstance(state, dict):
                for k in ("start_time", "duration"):
                    state.pop(k, None)
                changes = state.get("changes")
                if isinstance(changes, dict):
                    changes.pop("pid", None)
    return out


class CompileMaster(ClusterCase):
    """c1's runs compile on the master; m1's on m1 (state_compile_target)."""

    master_opts = {
        "state_compile": "master",
        "state_compile_target": "c*",
        "file_roots": {"base": ["srv"]},
        "pillar_roots": {"base": ["pillar"]},
    }

    @classmethod
    def before_start(cls):
        cls.metrics_port = free_port()
        cls.c.configure(metrics_port=cls.metrics_port)
        write_tree(cls.c.path("srv"), TREE)
        write_tree(cls.c.path("pillar"), PILLAR)
        cls.sandboxes = {}
        minions = {}
        for mid in ("c1", "m1"):
            sandbox = cls.c.path("sandbox-" + mid)
            os.makedirs(sandbox)
            cls.sandboxes[mid] = sandbox
            minions[mid] = {"grains": {"sandbox": sandbox}, "log_level": "debug"}
        cls.MINIONS = minions

    def figures(self):
        return scrape(self.metrics_port)

    def apply(self, mid, *args, rc=0):
        code, out, err = self.c.brine("cmd", "-t", "120", "--out", "json", mid, "state.apply",
                                      *args, timeout=180)
        if rc is None:
            self.assertNotEqual(code, 0, out + err)
        else:
            self.assertEqual(code, rc, out + err)
        return json.loads(out)[mid]

    def lookups(self):
        text = self.figures()
        return (figure(text, "brine_catalog_cache_lookups_total", '{result="hit"}'),
                figure(text, "brine_catalog_cache_lookups_total", '{result="miss"}'),
                figure(text, "brine_catalogs_compiled_on_minion_total"))

    def reset_sandboxes(self):
        for sandbox in self.sandboxes.values():
            shutil.rmtree(sandbox)
            os.makedirs(sandbox)

    def test_1_master_and_minion_compiles_give_the_same_results(self):
        self.reset_sandboxes()
        hits0, misses0, minion0 = self.lookups()
        on_master = self.apply("c1")
        hits1, misses1, minion1 = self.lookups()
        self.assertEqual((hits1, misses1), (hits0, misses0 + 1), "c1's run compiled on the master")
        on_minion = self.apply("m1")
        hits2, misses2, minion2 = self.lookups()
        self.assertEqual(minion2, minion1 + 1, "m1 is not named by state_compile_target")
        self.assertEqual((hits2, misses2), (hits1, misses1))
        self.assertEqual(len(on_master), 7, on_master)
        self.assertEqual(normalized(on_master, "c1", self.sandboxes["c1"]),
                         normalized(on_minion, "m1", self.sandboxes["m1"]))
        # The run did what the tree says, with the master's pillar and the
        # minion's grains.
        with open(os.path.join(self.sandboxes["c1"], "web.conf")) as f:
            self.assertEqual(f.read(), "listen 8080 on %s for c1\n" % self.os_grain())
        self.assertTrue(os.path.isdir(os.path.join(self.sandboxes["c1"], "sites", "beta")))
        text = self.figures()
        self.assertGreaterEqual(
            figure(text, "brine_compile_duration_seconds_count", '{kind="state"}'), 1)
        self.assertGreater(figure(text, "brine_catalog_cache_bytes"), 0)

    def os_grain(self):
        code, out, err = self.c.brine("cmd", "--out", "json", "c1", "grains.get", "os")
        self.assertEqual(code, 0, out + err)
        return json.loads(out)["c1"]

    def test_2_an_unchanged_minion_is_a_hit_and_changes_are_misses(self):
        self.apply("c1")
        hits0, misses0, _ = self.lookups()
        again = self.apply("c1")
        hits1, misses1, _ = self.lookups()
        self.assertEqual((hits1, misses1), (hits0 + 1, misses0), "an unchanged minion hits")
        for state in again.values():
            self.assertIs(state["result"], True, state)
            self.assertEqual(state["changes"], {}, state)

        # A file of the tree.
        path = self.c.path("srv", "web", "files.sls")
        with open(path) as f:
            original = f.read()
        self.addCleanup(write_file, path, original)
        with open(path, "a") as f:
            f.write("\nextra_state:\n  test.nop\n")
        ret = self.apply("c1")
        self.assertIn("test_|-extra_state_|-extra_state_|-nop", ret)
        hits2, misses2, _ = self.lookups()
        self.assertEqual((hits2, misses2), (hits1, misses1 + 1), "a changed file misses")

        # A grain (the minion's grains file, then a refresh: its next run
        # sends the new grains).
        code, out, err = self.c.brine("cmd", "c1", "grains.setval", "tier", "gold")
        self.assertEqual(code, 0, out + err)
        self.apply("c1")
        hits3, misses3, _ = self.lookups()
        self.assertEqual((hits3, misses3), (hits2, misses2 + 1), "a changed grain misses")

        # A pillar value.
        pillar = self.c.path("pillar", "web.sls")
        self.addCleanup(write_file, pillar, PILLAR["web.sls"])
        with open(pillar, "w") as f:
            f.write("web:\n  port: 9090\n  sites: [alpha, beta]\n")
        code, out, err = self.c.brine("cmd", "c1", "saltutil.refresh_pillar")
        self.assertEqual(code, 0, out + err)
        wait_for(lambda: self.pillar_port() == 9090, 20 * SLACK, "c1's pillar with port 9090")
        ret = self.apply("c1")
        hits4, misses4, _ = self.lookups()
        self.assertEqual((hits4, misses4), (hits3, misses3 + 1), "a changed pillar value misses")
        self.assertIn('cmd_|-announce_|-echo "conf 9090 written"_|-run', ret)

    def pillar_port(self):
        code, out, _ = self.c.brine("cmd", "--out", "json", "c1", "pillar.get", "web:port")
        return json.loads(out)["c1"] if code == 0 else None

    def test_3_compile_errors_read_as_the_minions_own(self):
        on_master = self.apply("c1", "broken", rc=None)
        on_minion = self.apply("m1", "broken", rc=None)
        self.assertIsInstance(on_master, list)
        self.assertEqual(on_master, on_minion)
        self.assertIn("broken", on_master[0])

    def test_4_a_template_that_needs_the_minion_compiles_there(self):
        _, _, minion0 = self.lookups()
        ret = self.apply("c1", "machine")
        _, _, minion1 = self.lookups()
        self.assertEqual(minion1, minion0 + 1, "file.file_exists runs on the minion")
        self.assertIn("test_|-looked_|-looked at the minion's machine_|-succeed_without_changes",
                      ret)
        self.assertIn("compiling here: a template calls file.file_exists, which runs on the "
                      "minion", self.c.minions["c1"].log())

    def test_5_a_master_compiled_run_fetches_only_missing_files(self):
        def requests():
            return figure(self.figures(), "brine_fileserver_requests_total")
        self.apply("c1", "plain")
        before = requests()
        ret = self.apply("c1", "plain")
        self.assertEqual(requests(), before,
                         "a second master-compiled run asks the file server for nothing")
        for state in ret.values():
            self.assertEqual(state["changes"], {}, state)
        # A file the minion lacks at the hash the catalog names: fetched,
        # and only it.
        path = self.c.path("srv", "web", "logo.txt")
        self.addCleanup(write_file, path, TREE["web/logo.txt"])
        with open(path, "w") as f:
            f.write("NEW LOGO\n")
        before = requests()
        ret = self.apply("c1", "plain")
        self.assertEqual(requests(), before + 1, "one get request for the changed file")
        self.assertIn("diff", ret["file_|-plain_logo_|-%s/plain/logo.txt_|-managed"
                                  % self.sandboxes["c1"]]["changes"])
        # Compiling on the minion, the same second run lists the saltenv.
        self.apply("m1", "plain")
        before = requests()
        self.apply("m1", "plain")
        self.assertGreater(requests(), before)


def fqdn_rand(mid, seed, n):
    """schedule::fqdn_rand (src/schedule/spread.cc): which of n masters a
    minion asks for its catalogs."""
    mask = (1 << 64) - 1
    h = 1469598103934665603
    for c in mid.encode() + b"\0" + seed.encode():
        h ^= c
        h = (h * 1099511628211) & mask
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & mask
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & mask
    h ^= h >> 31
    return h % n


class CompileSpread(unittest.TestCase):
    """Hot multi-master: two masters that compile; each minion asks the
    one its id hashes to, so the minions spread over both."""

    def test_each_minion_compiles_on_the_master_its_id_hashes_to(self):
        root = tempfile.mkdtemp(prefix="brine-compile-srv-")
        self.addCleanup(shutil.rmtree, root, True)
        write_tree(os.path.join(root, "srv"), TREE)
        ms = MasterSet(2, master_opts={"state_compile": "master",
                                       "file_roots": {"base": [os.path.join(root, "srv")]}})
        self.addCleanup(ms.stop)
        addresses = sorted(m.address for m in ms.masters)
        # Ids until both masters have a minion (the hash is fixed, so this
        # is the same set every run).
        ids, chosen = [], set()
        i = 0
        while len(ids) < 4 or len(chosen) < 2:
            mid = "s%d" % i
            ids.append(mid)
            chosen.add(fqdn_rand(mid, "compile", 2))
            i += 1
        for mid in ids:
            sandbox = os.path.join(root, "sandbox-" + mid)
            os.makedirs(sandbox)
            ms.add_minion(mid, grains={"sandbox": sandbox}, log_level="debug")
        for mid in ids:
            for m in ms.masters:
                ms.wait_served(mid, m, timeout=30)
        rc, out, err = ms.masters[0].brine("cmd", "-t", "120", "--out", "json", "*",
                                           "state.apply", "plain", timeout=180)
        self.assertEqual(rc, 0, out + err)
        got = json.loads(out)
        self.assertEqual(sorted(got), sorted(ids))
        for mid in ids:
            for state in got[mid].values():
                self.assertIs(state["result"], True, state)
            want = addresses[fqdn_rand(mid, "compile", 2)]
            log = ms.minions[mid].log()
            self.assertIn("master %s answered the compile request" % want, log)
            other = [a for a in addresses if a != want][0]
            self.assertNotIn("master %s answered the compile request" % other, log)


class CompileMasterConfig(unittest.TestCase):

    def test_a_bad_state_compile_target_stops_the_master_naming_it(self):
        c = Cluster(master_opts={"state_compile": "master",
                                 "state_compile_target": "G@os:Debian and and"},
                    start=False)
        try:
            code, out, err = c.brine("master", "--check-config")
            self.assertEqual(code, 1, out + err)
            self.assertIn("state_compile_target 'G@os:Debian and and': ", out + err)
            self.assertIn("(a compound target such as 'G@os:Debian and web*'", out + err)
            # The master itself refuses it the same way.
            c.master.start()
            self.assertNotEqual(c.master.wait_exit(30 * SLACK), 0)
            self.assertIn("state_compile_target 'G@os:Debian and and': ", c.master.log())
        finally:
            c.abort()

    def test_a_bad_state_compile_value_names_the_option(self):
        c = Cluster(master_opts={"state_compile": "everywhere"}, start=False)
        try:
            code, out, err = c.brine("master", "--check-config")
            self.assertEqual(code, 1, out + err)
            self.assertIn("state_compile must be minion or master", out + err)
        finally:
            c.abort()


if __name__ == "__main__":
    unittest.main()
