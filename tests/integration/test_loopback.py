#!/usr/bin/env python3
"""Loopback means loopback: every kind of server the integration tests (and
the README's walkthroughs, which mirror them) start listens on 127.0.0.0/8
or ::1 only, and every PostgreSQL trusts its Unix socket only.

Each test starts servers with the suites' own helpers, then lists the
listening TCP and UDP sockets (IPv4 and IPv6) of the processes it started
and of their descendants, from /proc (harness.sockets_of), and requires each
server's own port among them and none bound beyond loopback. For each
PostgreSQL it reads the pg_hba.conf the server uses (SHOW hba_file) and
pg_hba_file_rules: `trust` only on `local` lines; and a TCP connection
without a password, as each role the helpers use (replication included), is
asked for one."""

import ipaddress
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

import clustercase
from clustercase import ClusterTestCase
from dnsserver import Dnsmasq
from githttp import GitHttpServer
from harness import process_tree, sockets_of
from pgfailover import FailoverCluster, require_pg_auto_failover
from pgserver import find_bin


def setUpModule():
    clustercase.start_store()


def tearDownModule():
    clustercase.stop_store()


def listeners(pids, descendants=True):
    """The listening sockets of `pids` (and of their descendants): {Socket: pid}."""
    found = {}
    for root in pids:
        for pid in (process_tree(root) if descendants else [root]):
            for s in sockets_of(pid):
                if s.listening:
                    found.setdefault(s, pid)
    return found


def postmaster(psql):
    """The postmaster's pid of the server that `psql` (SQL -> rows) reaches."""
    with open(os.path.join(psql("SHOW data_directory"), "postmaster.pid")) as f:
        return int(f.readline())


class LoopbackTest(ClusterTestCase):

    def assert_loopback_only(self, name, pids, ports, descendants=True):
        """`name`'s processes listen on each of `ports` and on loopback only."""
        found = listeners(pids, descendants)
        shown = ", ".join(sorted("%s %s:%d (pid %d)" % (s.protocol, s.address, s.port, pid)
                                 for s, pid in found.items()))
        print("\n%s listens on: %s" % (name, shown or "nothing"))
        for port in ports:
            self.assertIn(port, [s.port for s in found],
                          "%s does not listen on its port %d: %s" % (name, port, shown))
        beyond = [s for s in found if not ipaddress.ip_address(s.address).is_loopback]
        self.assertEqual(beyond, [], "%s listens beyond loopback: %s" % (name, shown))

    def assert_trusts_only_the_socket(self, name, port, psql, roles):
        """The pg_hba.conf in use (file and pg_hba_file_rules) has `trust` on
        `local` lines only and asks a password of TCP; each of `roles`
        (user, database) connecting over TCP without one is asked for it."""
        hba = psql("SHOW hba_file")
        with open(hba) as f:
            rules = [line.split("#", 1)[0].split() for line in f]
        rules = [r for r in rules if r]
        self.assertEqual([r for r in rules if "trust" in r and r[0] != "local"], [],
                         "%s: %s trusts TCP" % (name, hba))
        self.assertTrue(any(r[0] == "host" and "scram-sha-256" in r for r in rules),
                        "%s: %s has no host rule with scram-sha-256: %s" % (name, hba, rules))
        rows = psql("SELECT type, auth_method, coalesce(error, '') FROM pg_hba_file_rules")
        parsed = [row.split("|") for row in rows.splitlines()]
        self.assertEqual([r for r in parsed if r[2]], [], "%s: errors in %s" % (name, hba))
        self.assertEqual([r for r in parsed if r[1] == "trust" and r[0] != "local"], [],
                         "%s: pg_hba_file_rules trusts TCP" % name)
        self.assertIn(["local", "trust", ""], parsed, name)
        tmp = tempfile.mkdtemp(prefix="brine-nopass-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["PGPASSFILE"] = os.path.join(tmp, "none")  # absent: no password at all
        for user, db in roles:
            conninfo = "host=127.0.0.1 port=%d user=%s dbname=%s connect_timeout=5" % (
                port, user, db)
            if db == "replication":
                conninfo += " replication=true"
            p = subprocess.run([os.path.join(find_bin(), "psql"), "-X", "-w", "-At", "-d",
                                conninfo, "-c", "SELECT 1"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=30, env=env)
            self.assertNotEqual(p.returncode, 0, "%s: %s logged in over TCP without a password"
                                % (name, user))
            self.assertIn("no password supplied", p.stderr, "%s: %s@%s" % (name, user, db))

    def test_postgresql_haproxy_a_master_and_a_minion_listen_on_loopback_only(self):
        pg = clustercase.PG
        ms, lb = self.cluster(n=1, metrics=True)
        self.add_minions(ms, lb, ["l1"])
        m = ms.masters[0]
        self.answered(m, ["l1"])
        self.assert_loopback_only("postgresql", [postmaster(pg.psql)], [pg.port])
        self.assert_trusts_only_the_socket("postgresql", pg.port, pg.psql,
                                           [("postgres", "postgres"), ("brine", "postgres"),
                                            ("postgres", "replication")])
        self.assert_loopback_only("haproxy", [lb.proc.pid], [lb.port])
        self.assert_loopback_only(
            "brine master", [m.daemon.pid],
            [m.port, m.options["cluster_port"], m.options["metrics_port"]])
        self.assert_loopback_only("brine minion", [ms.minions["l1"].pid], [])

    def test_the_pg_auto_failover_monitor_and_nodes_listen_on_loopback_only(self):
        require_pg_auto_failover()
        pg = FailoverCluster()
        self.addCleanup(pg.cleanup)
        pg.start()
        self.assertEqual(stat.S_IMODE(os.stat(pg.pgpass).st_mode), 0o600)
        # The health checks that pg_hba.conf now asks a password of still
        # count the nodes as up (the monitor takes the request for one as
        # an answer).
        self.assertEqual(pg.monitor_sql("SELECT nodename, health FROM pgautofailover.node "
                                        "ORDER BY nodename"), "n1|1\nn2|1")
        servers = [("pg_auto_failover monitor", pg.monitor_port, "monitor",
                    lambda sql: pg.psql(pg.monitor_port, sql),
                    [("postgres", "postgres"), ("autoctl_node", "pg_auto_failover")])]
        for name in ("n1", "n2"):
            port = pg.ports[name]
            servers.append(("pg_auto_failover node " + name, port, name,
                            lambda sql, port=port: pg.psql(port, sql),
                            [("postgres", "postgres"), ("brine", "brine"),
                             ("pgautofailover_monitor", "postgres"),
                             ("pgautofailover_replicator", "replication")]))
        for title, port, keeper, psql, roles in servers:
            self.assert_loopback_only(title, [pg.keepers[keeper].pid, postmaster(psql)], [port])
            self.assert_trusts_only_the_socket(title, port, psql, roles)

    def test_dnsmasq_and_the_git_http_server_listen_on_loopback_only(self):
        tmp = tempfile.mkdtemp(prefix="brine-loopback-")
        self.addCleanup(shutil.rmtree, tmp, True)
        dns = Dnsmasq(tmp, ["brine.test"])
        self.addCleanup(dns.stop)
        self.assert_loopback_only("dnsmasq", [dns.proc.pid], [dns.port])
        os.makedirs(os.path.join(tmp, "srv"))
        git = GitHttpServer(os.path.join(tmp, "srv"), "brine", "unused").start()
        self.addCleanup(git.stop)
        # A server in this process: its own sockets, not those of its children.
        self.assert_loopback_only("git http server", [os.getpid()], [git.port], descendants=False)


if __name__ == "__main__":
    unittest.main()
