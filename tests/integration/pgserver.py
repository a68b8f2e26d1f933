#!/usr/bin/env python3
"""A throwaway PostgreSQL server for the integration tests (standard library only).

    pg = PostgresServer()          # or: with PostgresServer() as pg:
    pg.start()
    pg.create_database("brine")
    url = pg.url("brine")          # postgresql://brine@127.0.0.1:PORT/brine?sslmode=disable
    pg.password_file(path)         # the role's password, mode 0600
    ...
    pg.cleanup()                   # stops the server, removes its directory

The cluster lives in a temporary directory: initdb, then pg_ctl start with
the server listening on 127.0.0.1 (a free port, kept across restarts) and its
Unix socket in that directory. The role `brine` logs in over TCP with a random
password (scram-sha-256), as a master would; the superuser `postgres` uses the
socket (trust) for test set-up through psql(). PostgreSQL refuses to run as
root, so as root every server program runs as the user `postgres`.

Every wait is bounded and fails with a message naming what it waited for.
"""

import atexit
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from ports import free_port

# Bound on initdb, a start (until it accepts connections) and a stop.
TIMEOUT = 60


def find_bin():
    """The directory of initdb, pg_ctl, postgres and psql: initdb's on PATH
    (symlinks resolved), else the newest /usr/lib/postgresql/N/bin; None when
    PostgreSQL is not installed."""
    def complete(d):
        return all(os.access(os.path.join(d, t), os.X_OK)
                   for t in ("initdb", "pg_ctl", "postgres", "psql"))

    initdb = shutil.which("initdb")
    if initdb:
        d = os.path.dirname(os.path.realpath(initdb))
        if complete(d):
            return d
    candidates = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        version = os.path.basename(os.path.dirname(d))
        if version.isdigit() and complete(d):
            candidates.append((int(version), d))
    return max(candidates)[1] if candidates else None


def postgres_available():
    """True when PostgreSQL's server programs are installed."""
    return find_bin() is not None


def require_postgres():
    """Raises unittest.SkipTest when PostgreSQL is not installed, or an
    AssertionError when BRINE_REQUIRE_POSTGRES=1 (CI) says it must be."""
    if find_bin():
        return
    why = ("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin); "
           "install postgresql (scripts/deps.sh) to run these tests")
    if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
        raise AssertionError(why + " (BRINE_REQUIRE_POSTGRES=1 makes this a failure)")
    raise unittest.SkipTest(why)


def initdb_command(bin_dir, data):
    """initdb of a cluster whose pg_hba.conf trusts the Unix socket only:
    every TCP connection, whatever its address, user or database (replication
    included), logs in with a password (scram-sha-256)."""
    return [os.path.join(bin_dir, "initdb"), "-D", data, "-U", "postgres", "-E", "UTF8",
            "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync",
            "--no-instructions"]


def server_user(directory):
    """The user PostgreSQL's processes run as: "postgres" when the tests
    run as root (PostgreSQL refuses root), who is given `directory`; else
    None (the tests' own user)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise AssertionError("PostgreSQL refuses to run as root and there is no user "
                             "postgres to run it as")
    os.chown(directory, pw.pw_uid, pw.pw_gid)
    return "postgres"


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory; see the module text."""

    def __init__(self, bin_dir=None):
        self.bin = bin_dir or find_bin()
        if not self.bin:
            raise AssertionError("PostgreSQL is not installed; call require_postgres() first")
        self.dir = tempfile.mkdtemp(prefix="brine-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.password = secrets.token_hex(16)
        self.port = None
        self._initialized = False
        self._has_role = False
        self._user = server_user(self.dir)
        # A test that fails before cleanup() must not leave a server running.
        atexit.register(self.cleanup)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.cleanup()

    def _run(self, args, timeout=TIMEOUT, as_server_user=True):
        if as_server_user and self._user:
            args = ["runuser", "-u", self._user, "--"] + args
        try:
            p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout, cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise AssertionError("timed out after %d s: %s\nserver log:\n%s"
                                 % (timeout, " ".join(args), self.log()))
        return p.returncode, p.stdout.decode("utf-8", "replace")

    def _pg_ctl(self, *args):
        rc, out = self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data,
                             "-t", str(TIMEOUT)] + list(args))
        return rc, out

    def _server_options(self):
        # fsync and friends off: a test server need not survive a power cut.
        return " ".join([
            "-c listen_addresses=127.0.0.1",
            "-c port=%d" % self.port,
            "-c unix_socket_directories=%s" % self.dir,
            "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off",
            "-c shared_buffers=16MB", "-c max_connections=100",
        ])

    def start(self):
        """initdb on the first call; starts the server and waits (bounded) until
        it accepts connections. The first start picks a free port (again if
        another process took it meanwhile); later ones keep it."""
        if not self._initialized:
            rc, out = self._run(initdb_command(self.bin, self.data))
            if rc != 0:
                raise AssertionError("initdb failed:\n" + out)
            self._initialized = True
        attempts = 1 if self.port else 5
        for attempt in range(attempts):
            if not self.port:
                self.port = free_port()
            rc, out = self._pg_ctl("start", "-w", "-l", self.log_path,
                                   "-o", self._server_options())
            if rc == 0:
                break
            if attempt + 1 == attempts or self._has_role:
                raise AssertionError("pg_ctl start failed:\n%s\nserver log:\n%s"
                                     % (out, self.log()))
            self.port = None
        self._wait_accepting()
        if not self._has_role:
            self.psql("CREATE ROLE brine LOGIN PASSWORD '%s'" % self.password)
            self._has_role = True
        return self

    def _wait_accepting(self):
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise AssertionError("timed out after %d s waiting for PostgreSQL on port %d; "
                                     "log:\n%s" % (TIMEOUT, self.port, self.log()))
            time.sleep(0.05)

    def running(self):
        if not self._initialized:
            return False
        rc, _ = self._pg_ctl("status")
        return rc == 0

    def stop(self):
        """Fast shutdown: sessions are disconnected and the server exits cleanly."""
        if self.running():
            rc, out = self._pg_ctl("stop", "-w", "-m", "fast")
            if rc != 0:
                raise AssertionError("pg_ctl stop failed:\n" + out)

    def kill(self):
        """Immediate shutdown, as a crash (the next start recovers)."""
        if self.running():
            rc, out = self._pg_ctl("stop", "-w", "-m", "immediate")
            if rc != 0:
                raise AssertionError("pg_ctl stop -m immediate failed:\n" + out)

    def start_again(self):
        """start() after stop() or kill(), on the same port and data."""
        return self.start()

    def restart(self):
        self.stop()
        return self.start()

    def url(self, db):
        return "postgresql://brine@127.0.0.1:%d/%s?sslmode=disable" % (self.port, db)

    def password_file(self, path):
        """Writes the password of `brine` to `path` with mode 0600; returns path."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        os.chmod(path, 0o600)
        return path

    def create_database(self, name):
        """A new, empty database that `brine` owns."""
        self.psql('CREATE DATABASE "%s" OWNER brine' % name)

    def psql(self, sql, db="postgres"):
        """Runs SQL as the superuser; returns the rows (unaligned, tuples only,
        stripped). Raises AssertionError with psql's output on failure."""
        rc, out = self._run([os.path.join(self.bin, "psql"), "-X", "-q", "-A", "-t",
                             "-v", "ON_ERROR_STOP=1", "-h", self.dir, "-p", str(self.port),
                             "-U", "postgres", "-d", db, "-c", sql],
                            as_server_user=False)
        if rc != 0:
            raise AssertionError("psql failed: %s\n%s" % (sql, out))
        return out.strip()

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def cleanup(self):
        """Stops the server (immediately) and removes the directory; safe to
        call twice."""
        if os.path.isdir(self.dir):
            try:
                if self._initialized:
                    self._pg_ctl("stop", "-w", "-m", "immediate")
            finally:
                shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.cleanup)
