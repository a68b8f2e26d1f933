#!/usr/bin/env python3
"""`brine swarm`: simulated minions with their own keys and connections, the
real protocol and the real test.* functions, against a real master; with
--states, applying a state tree from the master's file server, each run
stored as a report."""

import json
import os
import re
import resource
import signal
import subprocess
import threading
import time
import unittest

from harness import BRINE_BIN, ClusterTestCase, MasterSet, wait_for, wait_log, write_config

COUNT = 40

# Five states into a sandbox per minion: a directory, a file from a
# template on the master's file server (with a grain and a value of the
# pillar the master compiles), a test state that runs only when
# that file changed, and two that never change anything.
STATE_TREE = {
    "top.sls": "base:\n  '*':\n    - sandbox\n",
    "sandbox/init.sls": """\
{% set dir = grains['sandbox'] ~ '/' ~ grains['id'] %}
box:
  file.directory:
    - name: {{ dir }}
    - makedirs: True

conf:
  file.managed:
    - name: {{ dir }}/app.conf
    - source: salt://sandbox/app.conf.jinja
    - template: jinja
    - require:
      - file: box

notify:
  test.succeed_with_changes:
    - onchanges:
      - file: conf

steady:
  test.succeed_without_changes

noop:
  test.nop
""",
    "sandbox/app.conf.jinja": "id={{ grains['id'] }}\nrole={{ pillar['role'] }}\n",
}
PILLAR_TREE = {"top.sls": "base:\n  '*':\n    - common\n", "common.sls": "role: web\n"}
# Salt's keys of every state's return.
STATE_KEYS = {"name", "changes", "result", "comment", "__sls__", "__run_num__", "__id__",
              "start_time", "duration"}


class Swarm:
    def __init__(self, cluster, count=COUNT, prefix="sw-", extra=(), masters=None, seconds=120):
        """Against `cluster`'s master, or `masters` (a MasterSet) when given."""
        if masters is not None:
            self.keys = os.path.join(masters.dir, "swarm-keys")
            master_arg = ",".join(m.address for m in masters.masters)
        else:
            self.keys = cluster.path("swarm-keys")
            master_arg = "127.0.0.1:%d" % cluster.port
        self.proc = subprocess.Popen(
            [BRINE_BIN, "swarm", "--master", master_arg, "--count", str(count),
             "--id-prefix", prefix, "--keys-dir", self.keys, "--acceptance-wait-time", "1",
             "--seconds", str(seconds), *extra],
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

        # A test.sleep on the simulated minions blocks none of them: while
        # every one of them sleeps an hour, each still answers test.ping.
        rc, out, err = c.brine("cmd", "--async", "sw-*", "test.sleep", "3600")
        self.assertEqual(rc, 0, err)
        rc, out, err = c.brine("cmd", "-t", "60", "--out", "json", "sw-*", "test.ping",
                               timeout=120)
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual(len(got), COUNT)
        self.assertTrue(all(v is True for v in got.values()))
        sleeping = c.jobs(function="test.sleep", limit=1)[0]
        self.assertEqual(len(sleeping["running"]), COUNT, sleeping)

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


class SwarmStatesTest(ClusterTestCase):

    def test_swarm_minions_apply_a_tree_from_the_master_and_are_reported(self):
        count = 20
        c = self.cluster(master_opts={"auto_accept": True, "file_roots": {"base": ["srv"]}},
                         start=False)
        c.master_options["pillar_roots"] = {"base": [c.path("pillar")]}
        write_config(c.config, c.master_options)
        for root, tree in (("srv", STATE_TREE), ("pillar", PILLAR_TREE)):
            for name, text in tree.items():
                path = c.path(root, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
        c.start_master()
        sandbox = c.path("sandbox")
        grains = c.path("swarm-grains.yaml")
        with open(grains, "w") as f:
            f.write("sandbox: %s\n" % sandbox)
        s = Swarm(c, count=count, prefix="st-", extra=("--states", "--grains", grains))
        self.addCleanup(s.stop, signal.SIGKILL)
        wait_for(lambda: s.saw(r"^all %d connected after" % count), 30, "all swarm minions connected")
        ids = ["st-%02d" % i for i in range(1, count + 1)]

        def pillars_arrived():
            # The master sends each minion its pillar after its grains.
            rc, out, _ = c.brine("cmd", "-t", "20", "--out", "json", "st-*", "pillar.get", "role")
            return rc == 0 and json.loads(out) == {mid: "web" for mid in ids}

        wait_for(pillars_arrived, 20, "every swarm minion's pillar from the master")

        def apply(*fun):
            rc, out, err = c.brine("cmd", "-t", "60", "--out", "json", "--show-jid", "st-*",
                                   *(fun or ("state.apply",)), timeout=120)
            self.assertEqual(rc, 0, out[-2000:] + err[-2000:])
            jid = re.search(r"^jid: (\d+)$", err, re.M).group(1)
            got = json.loads(out)
            self.assertEqual(sorted(got), ids)
            for mid, ret in got.items():
                self.assertEqual(len(ret), 5, (mid, ret))
                for key, state in ret.items():
                    self.assertEqual(set(state) - {"__state_ran__"}, STATE_KEYS, (mid, key, state))
                    self.assertIs(state["result"], True, (mid, key, state))
                    self.assertEqual(state["__sls__"], "sandbox")
            return jid, got

        def reports(jid):
            """The reports of `jid` by minion once there is one per minion."""
            rc, out, err = c.brine("report", "list", "--out", "json", "--minion", "st-*",
                                   "--limit", "1000")
            self.assertEqual(rc, 0, out + err)
            got = {r["minion"]: r for r in json.loads(out) if r["jid"] == jid}
            return got if len(got) == count else None

        jid, got = apply()
        for mid, ret in got.items():
            changed = sorted(st["__id__"] for st in ret.values() if st["changes"])
            self.assertEqual(changed, ["box", "conf", "notify"], (mid, ret))
            with open(os.path.join(sandbox, mid, "app.conf")) as f:
                self.assertEqual(f.read(), "id=%s\nrole=web\n" % mid)
        stored = wait_for(lambda: reports(jid), 20, "a report per swarm minion")
        for mid, r in stored.items():
            self.assertEqual((r["status"], r["fun"], r["counts"]["total"],
                              r["counts"]["changed"]), ("changed", "state.apply", 5, 3), r)

        # The second run changes nothing, and is reported so.
        jid, got = apply()
        for mid, ret in got.items():
            self.assertEqual([st for st in ret.values() if st["changes"]], [], (mid, ret))
            notify = next(st for st in ret.values() if st["__id__"] == "notify")
            self.assertEqual(notify["comment"],
                             "State was not run because none of the onchanges reqs changed")
        stored = wait_for(lambda: reports(jid), 20, "a second report per swarm minion")
        self.assertEqual({r["status"] for r in stored.values()}, {"unchanged"})

        # state.sls and state.highstate (here under test=True) run the same tree.
        for fun in (("state.sls", "sandbox", "test=True"), ("state.highstate", "test=True")):
            jid, got = apply(*fun)
            for mid, ret in got.items():
                self.assertEqual([st for st in ret.values() if st["changes"]], [], (fun, mid))
            stored = wait_for(lambda: reports(jid), 20, "a report per minion of %s" % fun[0])
            self.assertEqual({(r["fun"], r["test"]) for r in stored.values()}, {(fun[0], True)})
        self.assertEqual(s.stop(), 0)


class SwarmFailoverTest(unittest.TestCase):

    def test_random_master_spreads_failover_minions_and_they_fail_over(self):
        ms = MasterSet(2)
        self.addCleanup(ms.stop)
        a, b = ms.masters
        count = 200
        s = Swarm(None, count=count, prefix="fo-", masters=ms,
                  extra=("--master-type", "failover", "--random-master",
                         "--master-alive-interval", "2"))
        self.addCleanup(s.stop, signal.SIGKILL)
        wait_for(lambda: s.saw(r"^all %d connected after" % count), 60, "all connected")

        def spread():
            for line in reversed(list(s.out)):
                m = re.search(r"connected=%d .* masters 127\.0\.0\.1:%d=(\d+) "
                              r"127\.0\.0\.1:%d=(\d+)" % (count, a.port, b.port), line)
                if m:
                    return int(m.group(1)), int(m.group(2))
            return None

        on_a, on_b = wait_for(spread, 5, "a status line with both masters")
        print("\nrandom_master: %d failover minions on master-0, %d on master-1" % (on_a, on_b))
        self.assertEqual(on_a + on_b, count)
        # Binomial(200, 1/2): 100 +- 7; 50..150 is seven standard deviations.
        self.assertTrue(50 <= on_a <= 150, (on_a, on_b))

        a.kill()
        wait_for(lambda: s.saw(r"^all %d serving again [\d.]+ s after the first loss" % count), 30,
                 "the swarm to be served again after master-0 died")
        wait_for(lambda: s.saw(r"connected=%d .* 127\.0\.0\.1:%d=0 127\.0\.0\.1:%d=%d"
                               % (count, a.port, b.port, count)), 5, "every minion on master-1")
        rc, got, err = b.ping_json("fo-*", timeout=20)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(got), count)
        self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
