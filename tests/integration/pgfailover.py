#!/usr/bin/env python3
"""A throwaway PostgreSQL pair under pg_auto_failover for the integration
tests (standard library only).

    pg = FailoverCluster()
    pg.start()                     # monitor, primary, synchronous standby
    url = pg.url()                 # postgresql://brine@127.0.0.1:P1,127.0.0.1:P2/brine?...
    pg.password_file(path)         # the role's password, mode 0600
    old = pg.primary()             # "n1" or "n2"
    pg.kill_primary()              # kill -9 of its keeper and its postgres
    pg.wait_promoted(old)          # the other node takes writes (bounded)
    pg.cleanup()                   # stops everything, removes the directory

Everything lives in one temporary directory: the monitor's data, each node's
data, pg_autoctl's configuration and state (XDG_CONFIG_HOME, XDG_DATA_HOME
point there), the password file and the logs. Every server listens on
127.0.0.1 only (--listen), on a free port. The monitor is tuned to decide in
seconds rather than pg_auto_failover's defaults (a node unhealthy after
20 s, then 30 s for the old primary to demote itself: ~50 s from a crash to
writes on the standby); those defaults suit a real network, where a primary
that is only cut off must have time to notice and stop taking writes before
the standby does.

Only the Unix socket is trusted: every TCP connection, pg_auto_failover's
own included, logs in with a password (scram-sha-256). The monitor's and the
first node's data directories are made by initdb_command() (pg_hba.conf:
`local ... trust`, `host ... scram-sha-256`), and pg_autoctl edits no rule
(--skip-pg-hba: with --auth it would add `host ... trust` for the monitor's
health checks whatever the method); the standby's base backup copies the
first node's file. The passwords, random, are set over the socket once each
role exists: autoctl_node (the nodes' connections to the monitor) and
postgres on the monitor; pgautofailover_replicator (base backup, streaming
replication) and postgres on the first node, whose catalog the standby
copies. One password file (PGPASSFILE, mode 0600) gives them to every
process: pg_autoctl, pg_basebackup, the postgres servers it starts (a
standby's WAL receiver) and psql(). pgautofailover_monitor gets a random
password that no one is given: the monitor's health check sends a fixed one
of its own and counts the server's asking for a password as an answer. The
role `brine` logs in with its own random password (password_file()).

PostgreSQL and pg_autoctl refuse to run as root, so as root every program of
theirs runs as the user `postgres`. Every wait is bounded and fails with a
message naming what it waited for.
"""

import atexit
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import free_port, process_tree
from pgserver import find_bin, initdb_command, server_user

# Bound on creating a node, on a standby's catching up, on a promotion.
TIMEOUT = 120
NODES = ("n1", "n2")
# The roles that log in over TCP with a password from the password file
# (see the module text).
PASSWORD_ROLES = ("autoctl_node", "pgautofailover_replicator", "postgres")

# The monitor's timings (milliseconds): a health check a second, a node
# unhealthy after 2 s without answer, the old primary given 3 s to demote
# itself before the standby's promotion completes.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "2000",
    "pgautofailover.primary_demote_timeout": "3000",
    "pgautofailover.startup_grace_period": "2000",
}


def pg_autoctl_available():
    """True when pg_autoctl and the monitor's extension are installed."""
    b = find_bin()
    if not b or not shutil.which("pg_autoctl"):
        return False
    lib = os.path.join(os.path.dirname(b), "lib", "pgautofailover.so")
    return os.path.exists(lib)


def require_pg_auto_failover():
    """Raises unittest.SkipTest when pg_auto_failover is not installed, or an
    AssertionError when BRINE_REQUIRE_POSTGRES=1 (CI) says it must be."""
    if pg_autoctl_available():
        return
    why = ("pg_auto_failover is not installed (no pg_autoctl, or no pgautofailover.so for "
           "this PostgreSQL); install pg-auto-failover-cli and postgresql-15-auto-failover "
           "(scripts/deps.sh) to run these tests")
    if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
        raise AssertionError(why + " (BRINE_REQUIRE_POSTGRES=1 makes this a failure)")
    raise unittest.SkipTest(why)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


class FailoverCluster:
    """A pg_auto_failover monitor and two data nodes; see the module text."""

    def __init__(self):
        self.bin = find_bin()
        if not pg_autoctl_available():
            raise AssertionError("pg_auto_failover is not installed; call "
                                 "require_pg_auto_failover() first")
        self.dir = tempfile.mkdtemp(prefix="brine-pgaf-")
        self.password = secrets.token_hex(16)
        self.passwords = {role: secrets.token_hex(16) for role in PASSWORD_ROLES}
        self.monitor_port = free_port()
        self.ports = {}
        self.keepers = {}  # name -> Popen of `pg_autoctl ... --run` / `pg_autoctl run`
        self.logs = {}
        self.pgpass = os.path.join(self.dir, "pgpass")
        self._env = dict(os.environ,
                         XDG_CONFIG_HOME=os.path.join(self.dir, "config"),
                         XDG_DATA_HOME=os.path.join(self.dir, "share"),
                         PG_CONFIG=os.path.join(self.bin, "pg_config"),
                         PGPASSFILE=self.pgpass)
        self._env.pop("PGPASSWORD", None)
        self._user = server_user(self.dir)
        atexit.register(self.cleanup)
        self._write_pgpass()

    def _write_pgpass(self):
        """The password file of every role that logs in over TCP, readable by
        the servers' user only (libpq ignores a file others may read)."""
        fd = os.open(self.pgpass, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            for role, password in self.passwords.items():
                f.write("127.0.0.1:*:*:%s:%s\n" % (role, password))
        if self._user:
            pw = pwd.getpwnam(self._user)
            os.chown(self.pgpass, pw.pw_uid, pw.pw_gid)

    # -- processes -----------------------------------------------------

    def _as_server_user(self, args):
        return (["runuser", "-u", self._user, "--"] + args) if self._user else args

    def _run(self, args, timeout=TIMEOUT):
        try:
            p = subprocess.run(self._as_server_user(args), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout, cwd=self.dir, env=self._env)
        except subprocess.TimeoutExpired:
            raise AssertionError("timed out after %d s: %s" % (timeout, " ".join(args)))
        return p.returncode, p.stdout.decode("utf-8", "replace")

    def _spawn(self, name, args):
        """Starts a pg_autoctl service in a process group of its own, its
        output in NAME.log."""
        path = os.path.join(self.dir, name + ".log")
        log = open(path, "ab")
        try:
            p = subprocess.Popen(self._as_server_user(args), stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
                                 env=self._env, start_new_session=True)
        finally:
            log.close()
        self.keepers[name] = p
        self.logs[name] = path

    def log(self, name):
        try:
            with open(self.logs.get(name, ""), "r", errors="replace") as f:
                return f.read()
        except (FileNotFoundError, OSError):
            return ""

    def _tail(self, name, lines=30):
        return "\n".join(self.log(name).splitlines()[-lines:])

    def _data(self, name):
        return os.path.join(self.dir, name)

    def _wait(self, predicate, timeout, what, logs=()):
        deadline = time.monotonic() + timeout
        while True:
            try:
                if predicate():
                    return
            except AssertionError:
                pass
            if time.monotonic() >= deadline:
                shown = "".join("\n--- %s.log (last lines):\n%s" % (n, self._tail(n))
                                for n in logs)
                raise AssertionError("timed out after %d s waiting for %s%s"
                                     % (timeout, what, shown))
            time.sleep(0.2)

    # -- SQL -------------------------------------------------------------

    def psql(self, port, sql, db="postgres", timeout=15, local=False):
        """Runs SQL as the superuser over TCP with its password (or, `local`,
        over the Unix socket, trusted: before the password is set); returns
        the rows (unaligned, tuples only, stripped). `sql`: a statement, or a
        list run in one session. Raises AssertionError on failure."""
        host = self._socket_dir(port) if local else "127.0.0.1"
        statements = [sql] if isinstance(sql, str) else sql
        args = [os.path.join(self.bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-w", "-h", host, "-p", str(port), "-U", "postgres", "-d", db]
        for statement in statements:
            args += ["-c", statement]
        try:
            p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout,
                               env=dict(self._env, PGCONNECT_TIMEOUT="3"))
        except subprocess.TimeoutExpired:
            raise AssertionError("psql timed out after %d s on port %d: %s" % (timeout, port, sql))
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            raise AssertionError("psql failed on port %d: %s\n%s" % (port, sql, out))
        return out.strip()

    def _socket_dir(self, port):
        """The Unix socket directory of the server on `port`, from the 5th
        line of its postmaster.pid."""
        name = "monitor" if port == self.monitor_port else \
            [n for n, p in self.ports.items() if p == port][0]
        try:
            with open(os.path.join(self._data(name), "postmaster.pid")) as f:
                return f.read().splitlines()[4]
        except (OSError, IndexError):
            raise AssertionError("%s (port %d) has no postmaster.pid with a socket directory"
                                 % (name, port))

    def _set_passwords(self, port, roles):
        """ALTER ROLE ... PASSWORD over the socket, not logged (the monitor
        logs DDL)."""
        self.psql(port, ["SET log_statement = 'none'"] +
                  ["ALTER ROLE %s PASSWORD '%s'" % (role, self.passwords[role])
                   for role in roles], local=True)

    def monitor_sql(self, sql):
        return self.psql(self.monitor_port, sql, db="pg_auto_failover")

    def states(self):
        """{node name: (reported state, assigned state)} from the monitor."""
        rows = self.monitor_sql("SELECT nodename, reportedstate, goalstate FROM pgautofailover.node")
        out = {}
        for line in rows.splitlines():
            name, reported, goal = line.split("|")
            out[name] = (reported, goal)
        return out

    # -- set-up ----------------------------------------------------------

    def start(self):
        """The monitor, then n1 (the primary), then n2 (its synchronous
        standby); returns when the monitor reports primary and secondary and
        the primary lists the standby as synchronous."""
        pgctl = os.path.join(self.bin, "pg_ctl")
        monitor = self._data("monitor")
        self._initdb("monitor")
        rc, out = self._run(["pg_autoctl", "create", "monitor", "--pgdata", monitor,
                             "--pgport", str(self.monitor_port), "--hostname", "127.0.0.1",
                             "--listen", "127.0.0.1", "--skip-pg-hba", "--no-ssl",
                             "--pgctl", pgctl])
        if rc != 0:
            raise AssertionError("pg_autoctl create monitor failed:\n" + out)
        # Read at the monitor's start, as ALTER SYSTEM would have written them.
        # BRINE_PGAF_DEFAULT_TIMINGS=1: pg_auto_failover's own (a failover
        # of about 50 s), to measure what a user meets with them.
        settings = {} if os.environ.get("BRINE_PGAF_DEFAULT_TIMINGS") == "1" else MONITOR_SETTINGS
        with open(os.path.join(monitor, "postgresql.auto.conf"), "a") as f:
            for k, v in settings.items():
                f.write("%s = '%s'\n" % (k, v))
        self._spawn("monitor", ["pg_autoctl", "run", "--pgdata", monitor])
        self._wait(lambda: self.psql(self.monitor_port, "SELECT 1", local=True) == "1",
                   TIMEOUT, "the pg_auto_failover monitor on port %d" % self.monitor_port,
                   ["monitor"])
        self._set_passwords(self.monitor_port, ["autoctl_node", "postgres"])

        self._initdb("n1")
        self._create_node("n1")
        self._wait(lambda: self.states().get("n1") == ("single", "single"), TIMEOUT,
                   "n1 to be the single node", ["n1", "monitor"])
        p1 = self.ports["n1"]
        # Before n2 exists: its base backup copies n1's roles and pg_hba.conf.
        self._set_passwords(p1, ["postgres", "pgautofailover_replicator"])
        self.psql(p1, ["SET log_statement = 'none'",
                       "ALTER ROLE pgautofailover_monitor PASSWORD '%s'" % secrets.token_hex(16),
                       "CREATE ROLE brine LOGIN PASSWORD '%s'" % self.password,
                       "ALTER DATABASE brine OWNER TO brine"], local=True)

        self._create_node("n2")

        def standby_ready():
            # pg_basebackup waits for a checkpoint, spread over minutes by
            # default: asked for at once instead.
            self.psql(p1, "CHECKPOINT")
            s = self.states()
            return (s.get("n1") == ("primary", "primary") and
                    s.get("n2") == ("secondary", "secondary"))
        self._wait(standby_ready, TIMEOUT, "n2 to be n1's secondary", ["n2", "n1", "monitor"])
        self._wait(lambda: self.sync_state(self.ports["n1"]) in ("sync", "quorum"), 30,
                   "n1 to list n2 as a synchronous standby (pg_stat_replication)")
        return self

    def _initdb(self, name):
        """The data directory of `name` made before pg_autoctl sees it, so
        that its pg_hba.conf trusts the socket only from the start
        (pg_autoctl's own initdb trusts TCP on loopback)."""
        rc, out = self._run(initdb_command(self.bin, self._data(name)))
        if rc != 0:
            raise AssertionError("initdb of %s failed:\n%s" % (name, out))

    def _create_node(self, name):
        port = free_port()
        self.ports[name] = port
        mon = "postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable" % (
            self.monitor_port)
        self._spawn(name, ["pg_autoctl", "create", "postgres", "--pgdata", self._data(name),
                           "--pgport", str(port), "--listen", "127.0.0.1",
                           "--hostname", "127.0.0.1", "--name", name, "--dbname", "brine",
                           "--monitor", mon, "--skip-pg-hba", "--no-ssl",
                           "--ssl-mode", "disable",
                           "--pgctl", os.path.join(self.bin, "pg_ctl"), "--run"])

    # -- what tests use --------------------------------------------------

    def url(self, db="brine"):
        hosts = ",".join("127.0.0.1:%d" % self.ports[n] for n in NODES)
        return ("postgresql://brine@%s/%s?target_session_attrs=read-write&sslmode=disable"
                % (hosts, db))

    def password_file(self, path):
        """Writes the password of `brine` to `path` with mode 0600; returns path."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        os.chmod(path, 0o600)
        return path

    def primary(self):
        """The name of the node the monitor has as primary (or wait_primary)."""
        for name, (reported, goal) in self.states().items():
            if reported in ("primary", "wait_primary") and goal == reported:
                return name
        raise AssertionError("the monitor reports no primary: %s" % self.states())

    def sync_state(self, port):
        """pg_stat_replication's sync_state of the standby on the node at
        `port` ('sync', 'quorum', 'async', or '' with no standby)."""
        return self.psql(port, "SELECT sync_state FROM pg_stat_replication LIMIT 1")

    def synchronous_standby_names(self, port):
        return self.psql(port, "SHOW synchronous_standby_names")

    def _postmaster(self, name):
        try:
            with open(os.path.join(self._data(name), "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def kill_node(self, name):
        """kill -9 of the node's keeper (so that it does not restart its
        postgres) and of its postgres, every process of it at once, as when
        the machine dies."""
        doomed = []
        keeper = self.keepers.get(name)
        if keeper is not None:
            doomed += process_tree(keeper.pid)
        pm = self._postmaster(name)
        if pm is not None and _alive(pm):
            doomed += process_tree(pm)
        if keeper is not None:
            try:
                os.killpg(keeper.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if keeper is not None:
            keeper.wait(timeout=10)
        self._wait(lambda: not any(_alive(p) for p in doomed), 10,
                   "the processes of %s to die (kill -9)" % name)

    def kill_primary(self):
        """Kills the current primary (kill_node); returns its name."""
        name = self.primary()
        self.kill_node(name)
        return name

    def wait_promoted(self, old, timeout=TIMEOUT):
        """Waits until a node other than `old` is the primary and takes
        writes; returns its name."""
        other = [n for n in NODES if n != old][0]

        def promoted():
            reported, goal = self.states().get(other, ("", ""))
            if reported not in ("wait_primary", "primary") or goal != reported:
                return False
            return self.psql(self.ports[other], "SELECT pg_is_in_recovery()") == "f"
        self._wait(promoted, timeout, "%s to be promoted after %s died" % (other, old),
                   [other, "monitor"])
        return other

    def cleanup(self):
        """Kills every process this cluster started and removes the
        directory; safe to call twice."""
        if not os.path.isdir(self.dir):
            atexit.unregister(self.cleanup)
            return
        try:
            # The data nodes first, then the monitor (its postmaster read from
            # its own pid file, as a node's).
            for name in [n for n in NODES if n != "monitor"] + ["monitor"]:
                self.kill_node(name)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            atexit.unregister(self.cleanup)


if __name__ == "__main__":
    # A quick look by hand: start, kill the primary, time the promotion.
    require_pg_auto_failover()
    c = FailoverCluster()
    try:
        t = time.monotonic()
        c.start()
        print("up in %.1f s: %s; %s; sync_state %s" % (
            time.monotonic() - t, c.states(), c.synchronous_standby_names(c.ports["n1"]),
            c.sync_state(c.ports["n1"])))
        print(c.url())
        t = time.monotonic()
        old = c.kill_primary()
        new = c.wait_promoted(old)
        print("%s promoted %.1f s after %s was killed" % (new, time.monotonic() - t, old))
    finally:
        c.cleanup()
