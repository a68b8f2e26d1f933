#!/usr/bin/env python3
"""DNS SRV discovery of masters (use_srv_records, srv_domain, srv_resolver)
against a real DNS server, dnsmasq, on a loopback port: RFC 2782 priority
and weight order (checked statistically), the next priority level only when
a whole level is down, records looked up again after a failure and after
their TTL, hot mode connecting every target, brine call finding its master
through the records, and clear errors for missing and "not available"
record sets."""

import json
import os
import time
import unittest

from dnsserver import Dnsmasq
from harness import BRINE_BIN, MasterSet, tail, wait_for, wait_log, write_config
import subprocess

DOMAIN = "brine.test"
SRV = "_brine._tcp." + DOMAIN


def target(i):
    return "m%d.%s" % (i, DOMAIN)


class SrvTestCase(unittest.TestCase):

    def master_set(self, n):
        ms = MasterSet(n)
        self.addCleanup(ms.stop)
        return ms

    def dns(self, ms, srv, ttl=5, domains=(DOMAIN,)):
        hosts = [(target(i), "127.0.0.1") for i in range(len(ms.masters))] if ms else []
        d = Dnsmasq(ms.dir if ms else self.tmp(), domains, srv, hosts, ttl)
        self.addCleanup(d.stop)
        return d

    def records(self, ms, spec):
        """spec: [(master index, priority, weight)] -> SRV tuples."""
        return [(SRV, target(i), ms.masters[i].port, prio, weight) for i, prio, weight in spec]

    def srv_minion(self, ms, dns, mid="m1", **opts):
        options = {"use_srv_records": True, "srv_domain": DOMAIN, "srv_resolver": dns.address,
                   "master_alive_interval": 2}
        options.update(opts)
        return ms.add_minion(mid, **options)

    def serving(self, ms, mid):
        """The masters that answer a test.ping of `mid` now."""
        return [m for m in ms.masters if ms.masters and m.ping_json(mid, timeout=2)[1] == {mid: True}]

    def brine_masters(self, config, *args):
        p = subprocess.run([BRINE_BIN, "masters", "-c", config, *args], capture_output=True,
                           text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr


class SrvOrderTest(SrvTestCase):

    def test_priority_first_then_weighted_choice(self):
        ms = self.master_set(4)
        dns = self.dns(ms, self.records(ms, [(0, 10, 60), (1, 10, 30), (2, 10, 10), (3, 20, 100)]))
        config = os.path.join(ms.dir, "minion.conf")
        write_config(config, {"id": "x", "use_srv_records": True, "srv_domain": DOMAIN,
                              "srv_resolver": dns.address, "master_type": "failover"})
        picks = 4000
        rc, out, err = self.brine_masters(config, "--picks", str(picks), "--json")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual(got["source"], SRV)
        self.assertEqual(got["ttl"], 5)
        order = [(m["master"], m["priority"]) for m in got["masters"]]
        self.assertEqual([p for _, p in order], [10, 10, 10, 20])
        self.assertEqual(order[-1][0], "%s:%d" % (target(3), ms.masters[3].port))
        for m in got["masters"]:
            self.assertEqual(m["addresses"], ["127.0.0.1"])
        first = got["first"]
        shares = {}
        for i, weight in ((0, 60), (1, 30), (2, 10)):
            key = "%s:%d" % (target(i), ms.masters[i].port)
            shares[key] = first.get(key, 0) / picks
            # Binomial standard deviation at 4000 draws is under 0.8 points.
            self.assertAlmostEqual(shares[key], weight / 100, delta=0.04, msg=first)
        self.assertNotIn("%s:%d" % (target(3), ms.masters[3].port), first)
        print("\nfirst choice over %d draws of weights 60/30/10: %s" % (
            picks, ", ".join("%.1f %%" % (100 * v) for v in shares.values())))

        rc, out, err = self.brine_masters(config, "--picks", "100")
        self.assertEqual(rc, 0, err)
        self.assertIn("masters from the SRV records of %s at %s (TTL 5 s)" % (SRV, dns.address),
                      out)

    def test_failover_takes_the_next_level_only_when_a_whole_level_is_down(self):
        ms = self.master_set(3)
        dns = self.dns(ms, self.records(ms, [(0, 10, 50), (1, 10, 50), (2, 20, 50)]))
        self.srv_minion(ms, dns, master_type="failover")
        wait_for(lambda: len(self.serving(ms, "m1")) == 1, 20, "m1 served by one master")
        first = self.serving(ms, "m1")[0]
        self.assertIn(first, ms.masters[:2], "a priority-20 master was chosen first")
        other = ms.masters[1] if first is ms.masters[0] else ms.masters[0]
        since = other.daemon.mark()
        first.kill()
        ms.wait_served("m1", other, timeout=10, since=since)
        self.assertEqual(ms.masters[2].connected("m1"), 0,
                         "the next level was used while its own level had a master up")
        since = ms.masters[2].daemon.mark()
        other.kill()
        ms.wait_served("m1", ms.masters[2], timeout=10, since=since)
        wait_for(lambda: ms.masters[2].ping_json("m1", 2)[1] == {"m1": True}, 5,
                 "m1 on the priority-20 master")

    def test_hot_mode_connects_every_target(self):
        ms = self.master_set(2)
        dns = self.dns(ms, self.records(ms, [(0, 10, 1), (1, 20, 1)]))
        self.srv_minion(ms, dns)
        for m in ms.masters:
            wait_for(lambda m=m: m.ping_json("m1", 2)[1] == {"m1": True}, 20,
                     "m1 on " + m.name)


class SrvCallTest(SrvTestCase):

    def test_brine_call_asks_the_masters_the_records_name(self):
        ms = self.master_set(2)
        dns = self.dns(ms, self.records(ms, [(0, 10, 1), (1, 20, 1)]))
        m = self.srv_minion(ms, dns, master_type="failover")
        wait_for(lambda: len(self.serving(ms, "m1")) == 1, 20, "m1 served by a master")

        def call():
            p = subprocess.run([BRINE_BIN, "call", "-c", m.config, "--out", "json",
                                "test.ping"], capture_output=True, text=True, timeout=60)
            return p.returncode, p.stdout, p.stderr

        rc, out, err = call()
        self.assertEqual((rc, json.loads(out) if rc == 0 else out), (0, {"local": True}), err)
        # The first record's master down: the call goes on to the next one.
        ms.masters[0].kill()
        rc, out, err = call()
        self.assertEqual((rc, json.loads(out) if rc == 0 else out), (0, {"local": True}), err)
        # Every master down: salt-call's exit 2, naming the SRV records.
        ms.masters[1].kill()
        rc, out, err = call()
        self.assertEqual(rc, 2, out)
        self.assertIn("no master answered the pillar request of minion m1", err)
        for i in (0, 1):
            self.assertIn("master %s:%d: " % (target(i), ms.masters[i].port), err)


class SrvRefreshTest(SrvTestCase):

    def test_records_are_looked_up_again_after_their_ttl(self):
        ms = self.master_set(2)
        a, b = ms.masters
        dns = self.dns(ms, self.records(ms, [(0, 10, 1)]), ttl=2)
        self.srv_minion(ms, dns, master_type="failover", master_alive_interval=30)
        wait_for(lambda: a.ping_json("m1", 2)[1] == {"m1": True}, 20, "m1 on master-0")
        since = b.daemon.mark()
        t0 = time.monotonic()
        dns.restart(self.records(ms, [(1, 10, 1)]), [(target(i), "127.0.0.1") for i in range(2)])
        ms.wait_served("m1", b, timeout=10, since=since)
        print("\nrecords changed: serving from the new master after %.2f s (TTL 2 s)"
              % (time.monotonic() - t0))
        wait_log(a.daemon, r"minion m1 at \S+ disconnected", 5)

    def test_records_are_looked_up_again_when_the_master_fails(self):
        ms = self.master_set(2)
        a, b = ms.masters
        hosts = [(target(i), "127.0.0.1") for i in range(2)]
        dns = self.dns(ms, self.records(ms, [(0, 10, 1)]), ttl=3600)
        self.srv_minion(ms, dns, master_type="failover")
        wait_for(lambda: a.ping_json("m1", 2)[1] == {"m1": True}, 20, "m1 on master-0")
        # New records, but an hour of TTL: only the failure makes the minion look.
        dns.restart(self.records(ms, [(1, 10, 1)]), hosts, ttl=3600)
        since = b.daemon.mark()
        a.kill()
        ms.wait_served("m1", b, timeout=10, since=since)


class SrvErrorTest(SrvTestCase):

    def test_missing_record_set_is_a_clear_error(self):
        ms = self.master_set(1)
        dns = self.dns(ms, [], domains=(DOMAIN, "empty.test"))
        m = self.srv_minion(ms, dns, srv_domain="empty.test", retry_dns=1)
        line = (r"DNS SRV lookup of _brine\._tcp\.empty\.test at 127\.0\.0\.1:%d: no such name "
                r"\(NXDOMAIN\)" % dns.port)
        wait_log(m, line, 10)
        # Looked up again every retry_dns, not given up.
        wait_for(lambda: m.count(line) >= 2, 10, "a second lookup after retry_dns")
        self.assertTrue(m.alive())
        rc, out, err = self.brine_masters(m.config)
        self.assertEqual(rc, 1)
        self.assertRegex(err, "^brine: " + line)

    def test_not_available_record_is_named(self):
        ms = self.master_set(1)
        dns = self.dns(ms, [("_brine._tcp.down.test", None, 0, 0, 0)],
                       domains=(DOMAIN, "down.test"))
        m = self.srv_minion(ms, dns, srv_domain="down.test", retry_dns=0)
        m.expect_clean_exit = False
        self.assertEqual(m.wait_exit(20), 1, tail(m.log()))
        self.assertRegex(m.log(), r"_brine\._tcp\.down\.test .*service is not available")


if __name__ == "__main__":
    unittest.main()
