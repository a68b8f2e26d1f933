#!/usr/bin/env python3
"""gitfs: the master serves salt:// from a git repository at a revision
pinned in its store. Three masters on one shared PostgreSQL serve the same
revision; `brine fileserver update` on one moves every master to the new
commit (the others hear of it by LISTEN/NOTIFY), and a state run never sees
two files of one commit half-updated. A single master on SQLite does the
same; a bad remote is named in one clear line and the master keeps running.
The repository is made with the real git command; PostgreSQL is Debian's,
started on a loopback port (pgserver.py)."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from githttp import GitHttpServer
from harness import ClusterTestCase, MasterSet, tail, wait_for, wait_log
from pgserver import PostgresServer, postgres_available

PG = None

PAIR_SLS = """\
pair:
  test.succeed_without_changes:
    - name: "{{ salt['cp.get_file_str']('salt://a.txt') | trim }}|{{ salt['cp.get_file_str']('salt://b.txt') | trim }}"
"""


def git(repo, *args):
    p = subprocess.run(["git", "-C", repo, "-c", "user.name=brine",
                        "-c", "user.email=brine@example.test", "-c", "init.defaultBranch=master",
                        "-c", "commit.gpgsign=false"] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, "git %s: %s" % (" ".join(args), p.stdout + p.stderr)
    return p.stdout.strip()


def make_repo(directory):
    os.makedirs(directory)
    git(directory, "init", "-q")
    write_files(directory, {"a.txt": "A1\n", "b.txt": "B1\n", "pair.sls": PAIR_SLS})
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "one")
    return git(directory, "rev-parse", "HEAD")


def publish(repo, bare):
    """Pushes `repo`'s master branch to the bare repository `bare` (made
    if missing), as a developer pushes to a private server."""
    if not os.path.exists(bare):
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        git(os.path.dirname(bare), "init", "-q", "--bare", bare)
    git(repo, "push", "-q", bare, "master:master")


def write_files(directory, files):
    for name, text in files.items():
        with open(os.path.join(directory, name), "w") as f:
            f.write(text)


def commit_both(repo, a, b):
    """Changes a.txt and b.txt in one commit; its id."""
    write_files(repo, {"a.txt": a, "b.txt": b})
    git(repo, "commit", "-q", "-am", "change %s %s" % (a.strip(), b.strip()))
    return git(repo, "rev-parse", "HEAD")


def get_file_str(master, mid, path="salt://a.txt"):
    rc, out, err = master.brine("cmd", "-t", "60", "--out", "json", mid, "cp.get_file_str", path,
                                timeout=120)
    if rc != 0 or not out.strip():
        return None
    return json.loads(out).get(mid)


def pair(master, mid):
    """What one state run on `mid` read of a.txt and b.txt ("A1|B1"), or
    None when the run failed (a switch between its listing and its fetch is
    reported as a failure, never served mixed)."""
    rc, out, err = master.brine("cmd", "-t", "60", "--out", "json", mid, "state.sls", "pair",
                                timeout=120)
    if not out.strip():
        return None
    ret = json.loads(out).get(mid)
    if not isinstance(ret, dict):
        return None
    for state in ret.values():
        if isinstance(state, dict) and state.get("result") is True:
            return state.get("name")
    return None


class SharedStoreGitfsTest(unittest.TestCase):

    def setUp(self):
        if not postgres_available():
            if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
                raise AssertionError("PostgreSQL (initdb, pg_ctl) is not installed")
            raise unittest.SkipTest("PostgreSQL is not installed (apt-get install postgresql)")
        global PG
        if PG is None:
            PG = PostgresServer()
            PG.start()
        self.tmp = tempfile.mkdtemp(prefix="brine-gitfs-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.repo = os.path.join(self.tmp, "repo")
        self.first = make_repo(self.repo)

    def masters(self, n):
        db = "brine_gitfs_%d_%d" % (os.getpid(), int(time.monotonic() * 1000))
        PG.create_database(db)
        pw = os.path.join(PG.dir, db + ".pw")
        PG.password_file(pw)
        ms = MasterSet(n, master_opts={"store": PG.url(db), "store_password_file": pw,
                                       "fileserver_backend": ["gitfs"],
                                       "gitfs_remotes": [self.repo]})
        self.addCleanup(ms.stop)
        # One minion per master, so that each master's file server is asked.
        for i, m in enumerate(ms.masters):
            ms.add_minion("m%d" % i, masters=[m.address])
        for i, m in enumerate(ms.masters):
            ms.wait_served("m%d" % i, m, timeout=30)
        return ms

    def test_update_on_one_master_moves_every_master_and_never_half(self):
        ms = self.masters(3)
        a, b, c = ms.masters
        # The first master pinned the commit at its start; the others serve it.
        for i, m in enumerate(ms.masters):
            wait_for(lambda: get_file_str(m, "m%d" % i) == "A1\n", 60,
                     "m%d to read A1 through %s" % (i, m.name))
        self.assertIn("gitfs: pinned %s saltenv base at %s" % (self.repo, self.first),
                      a.daemon.log())

        second = commit_both(self.repo, "A2\n", "B2\n")
        # A commit on the branch is not served until it is pinned.
        self.assertEqual(get_file_str(b, "m1"), "A1\n")

        # State runs on c while a pins the new commit: every run reads both
        # files of one commit (or fails), never one of each.
        seen = []
        stop = threading.Event()

        def runs():
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline:
                seen.append(pair(c, "m2"))

        t = threading.Thread(target=runs)
        t.start()
        try:
            since_b = b.daemon.mark()
            rc, out, err = a.brine("fileserver", "update", timeout=120)
            self.assertEqual(rc, 0, out + err)
            self.assertIn(self.repo + ":\n  base: " + second + " (refs/heads/master)", out)
            for i, m in enumerate(ms.masters):
                wait_for(lambda: get_file_str(m, "m%d" % i) == "A2\n", 30,
                         "m%d to read A2 through %s" % (i, m.name))
            wait_log(b.daemon, r"gitfs: switched to the pinned revisions", 10, since_b)
            wait_for(lambda: "A2|B2" in seen, 60, "a state run on m2 to read A2|B2")
        finally:
            stop.set()
            t.join(150)
        self.assertIn("A2|B2", seen, seen)
        for got in seen:
            self.assertIn(got, ("A1|B1", "A2|B2", None), seen)
        self.assertEqual(get_file_str(c, "m2", "salt://b.txt"), "B2\n")

        # A master started later serves the pinned commit, not the branch's
        # newest one.
        commit_both(self.repo, "A3\n", "B3\n")
        rc = b.daemon.terminate()
        self.assertEqual(rc, 0, tail(b.daemon.log()))
        since = b.daemon.mark()
        b.start()
        ms.wait_served("m1", b, timeout=30, since=since)
        wait_for(lambda: get_file_str(b, "m1") is not None, 30, "m1 answering through b")
        self.assertEqual(get_file_str(b, "m1"), "A2\n")


    def test_a_master_that_cannot_fetch_the_pinned_commit_keeps_its_revision(self):
        ms = self.masters(2)
        a, b = ms.masters
        for i, m in enumerate(ms.masters):
            wait_for(lambda: get_file_str(m, "m%d" % i) == "A1\n", 60,
                     "m%d to read A1 through %s" % (i, m.name))
        second = commit_both(self.repo, "A2\n", "B2\n")
        # b hears of the new pin only after the remote has gone away.
        os.kill(b.daemon.proc.pid, signal.SIGSTOP)
        try:
            rc, out, err = a.brine("fileserver", "update", timeout=120)
            self.assertEqual(rc, 0, out + err)
            moved = self.repo + ".away"
            os.rename(self.repo, moved)
            since = b.daemon.mark()
        finally:
            os.kill(b.daemon.proc.pid, signal.SIGCONT)
        wait_log(b.daemon, r"gitfs remote %s: cannot serve the pinned commit %s of saltenv base "
                           r"\(.*\); this master keeps serving its current revision; make the "
                           r"remote reachable from it" % (re.escape(self.repo), second), 30, since)
        self.assertEqual(get_file_str(b, "m1"), "A1\n")
        self.assertEqual(get_file_str(b, "m1", "salt://b.txt"), "B1\n")
        self.assertEqual(get_file_str(a, "m0"), "A2\n")
        # Reachable again: b catches up by itself, with no other update.
        os.rename(moved, self.repo)
        wait_for(lambda: get_file_str(b, "m1") == "A2\n", 120, "m1 to read A2 through b")
        wait_log(b.daemon, r"gitfs remote %s: caught up: serving its pinned revision"
                 % re.escape(self.repo), 10, since)


class SingleMasterGitfsTest(ClusterTestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="brine-gitfs-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.repo = os.path.join(self.tmp, "repo")
        self.first = make_repo(self.repo)

    def test_sqlite_master_serves_the_pinned_commit_until_update(self):
        c = self.cluster(master_opts={"fileserver_backend": ["roots", "gitfs"],
                                      "file_roots": {"base": ["srv"]},
                                      "gitfs_remotes": [self.repo]})
        os.makedirs(c.path("srv"))
        write_files(c.path("srv"), {"b.txt": "B from roots\n"})
        c.add_accepted_minion("m1")
        self.assertEqual(get_file_str(c, "m1"), "A1\n")
        # roots comes first in fileserver_backend: its b.txt wins.
        self.assertEqual(get_file_str(c, "m1", "salt://b.txt"), "B from roots\n")

        second = commit_both(self.repo, "A2\n", "B2\n")
        self.assertEqual(get_file_str(c, "m1"), "A1\n")
        rc, out, err = c.brine("fileserver", "update", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("base: " + second, out)
        self.assertEqual(get_file_str(c, "m1"), "A2\n")

        # The pin survives a restart (the store holds it).
        commit_both(self.repo, "A3\n", "B3\n")
        since = c.master.mark()
        c.restart_master()
        c.wait_connected("m1", timeout=30, since=since)
        wait_for(lambda: get_file_str(c, "m1") is not None, 30, "m1 answering")
        self.assertEqual(get_file_str(c, "m1"), "A2\n")

        rc, out, err = c.brine("fileserver", "update", "--json", timeout=120)
        self.assertEqual(rc, 0, out + err)
        pins = json.loads(out)["pins"]
        self.assertEqual([p["saltenv"] for p in pins], ["base"])
        self.assertEqual(get_file_str(c, "m1"), "A3\n")

    def test_a_master_behind_its_pinned_commit_catches_up_by_itself(self):
        c = self.cluster(master_opts={"fileserver_backend": ["gitfs"],
                                      "gitfs_remotes": [self.repo], "log_level": "debug"})
        c.add_accepted_minion("m1")
        second = commit_both(self.repo, "A2\n", "B2\n")
        rc, out, err = c.brine("fileserver", "update", timeout=120)
        self.assertEqual(rc, 0, out + err)
        commit_both(self.repo, "A3\n", "B3\n")  # newer, not pinned

        # The master starts again without its clone while the remote is away:
        # it cannot fetch the pinned commit.
        rc = c.master.terminate()
        self.assertEqual(rc, 0, tail(c.master.log()))
        shutil.rmtree(c.path("master-cache", "gitfs"))
        moved = self.repo + ".away"
        os.rename(self.repo, moved)
        since = c.master.mark()
        c.start_master()
        repo = re.escape(self.repo)
        wait_log(c.master, r"\[warning\] gitfs remote %s: behind its pinned revision; this master "
                           r"tries again by itself" % repo, 30, since)
        # It keeps trying (two retries seen), logging them at debug only.
        wait_log(c.master, r"gitfs: retrying the pinned revisions of 1 remotes \(retry 2\)", 30,
                 since)
        c.wait_connected("m1", timeout=30, since=since)
        self.assertNotEqual(get_file_str(c, "m1"), "A2\n")

        os.rename(moved, self.repo)
        wait_for(lambda: get_file_str(c, "m1") == "A2\n", 120,
                 "m1 to read the pinned A2 without another update")
        self.assertEqual(get_file_str(c, "m1", "salt://b.txt"), "B2\n")
        log = c.master.log_since(since)
        self.assertEqual(len(re.findall(r"\[warning\] gitfs remote %s: behind" % repo, log)), 1, log)
        self.assertEqual(len(re.findall(r"\[info\] gitfs remote %s: caught up: serving its pinned "
                                        r"revision \(after \d+ retries\)" % repo, log)), 1, log)
        self.assertEqual(len(re.findall(r"\[error\] gitfs remote %s: cannot serve the pinned "
                                        r"commit %s" % (repo, second), log)), 1, log)
        self.assertGreaterEqual(len(re.findall(r"\[debug\] gitfs remote %s: cannot serve the "
                                               r"pinned commit" % repo, log)), 2, log)

    def test_a_bad_remote_is_named_and_the_master_keeps_serving(self):
        missing = os.path.join(self.tmp, "no-such-repo")
        c = self.cluster(master_opts={"fileserver_backend": ["gitfs"],
                                      "gitfs_remotes": [missing, self.repo],
                                      "gitfs_base": "main"})
        log = c.master.log()
        self.assertRegex(log, r"gitfs remote %s: cannot fetch: .*; check the URL in "
                              r"gitfs_remotes" % re.escape(missing))
        self.assertIn("gitfs remote %s: branch 'main' (gitfs_base) not found" % self.repo, log)
        c.add_accepted_minion("m1")
        # No base, but the branch is served under its own name.
        rc, out, err = c.brine("cmd", "-t", "60", "--out", "json", "m1", "cp.get_file_str",
                               "salt://a.txt", "saltenv=master", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(json.loads(out)["m1"], "A1\n")
        rc, out, err = c.brine("fileserver", "update", timeout=120)
        self.assertNotEqual(rc, 0)
        self.assertIn("gitfs_remotes", err)
        self.assertIn("master: ", out)
        self.assertTrue(c.master.alive())

    def test_a_relative_remote_is_read_against_the_config_directory(self):
        c = self.cluster(master_opts={"fileserver_backend": ["gitfs"],
                                      "gitfs_remotes": ["repos/states"]}, start=False)
        make_repo(c.path("repos", "states"))
        # Started from another directory, which has a different repository
        # at the same relative path: the config's directory decides.
        elsewhere = os.path.join(self.tmp, "elsewhere")
        make_repo(os.path.join(elsewhere, "repos", "states"))
        commit_both(os.path.join(elsewhere, "repos", "states"), "wrong\n", "wrong\n")
        c.master.cwd = elsewhere
        c.start_master()
        absolute = c.path("repos", "states")
        self.assertIn("gitfs: pinned %s saltenv base" % absolute, c.master.log())
        c.add_accepted_minion("m1")
        self.assertEqual(get_file_str(c, "m1"), "A1\n")
        rc, out, err = c.brine("fileserver", "update", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertIn(absolute + ":\n  base: ", out)

    def test_gitfs_without_remotes_is_refused_at_start(self):
        c = self.cluster(master_opts={"fileserver_backend": ["gitfs"]}, start=False)
        c.master.start()
        c.master.expect_clean_exit = False
        rc = c.master.wait_exit(30)
        self.assertNotEqual(rc, 0)
        self.assertIn("fileserver_backend lists gitfs but gitfs_remotes is empty", c.master.log())


class PrivateRemoteGitfsTest(ClusterTestCase):
    """gitfs_user/gitfs_password against a real git server (git
    http-backend) that wants basic authentication, on loopback over plain
    http (so insecure_auth is set, as Salt requires)."""

    USER = "brine"
    PASSWORD = "Right-pa55-9d2e41"
    WRONG = "Wrong-pa55-c07b13"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="brine-gitfs-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.work = os.path.join(self.tmp, "work")
        self.first = make_repo(self.work)
        publish(self.work, os.path.join(self.tmp, "srv", "private.git"))
        self.server = GitHttpServer(os.path.join(self.tmp, "srv"), self.USER,
                                    self.PASSWORD).start()
        self.addCleanup(self.server.stop)
        self.url = self.server.url("private.git")

    def gitfs_master(self, gitfs_yaml, start=True):
        c = self.cluster(master_opts={"fileserver_backend": ["gitfs"], "log_level": "debug"},
                         start=False)
        with open(c.config, "a") as f:
            f.write(gitfs_yaml)
        if start:
            c.start_master()
        return c

    def assert_no_secret(self, *texts):
        for text in texts:
            self.assertNotIn(self.PASSWORD, text)
            self.assertNotIn(self.WRONG, text)

    def test_wrong_password_fails_once_with_the_option_to_fix(self):
        c = self.gitfs_master("gitfs_insecure_auth: true\n"
                              "gitfs_remotes:\n"
                              "  - %s:\n"
                              "    - user: %s\n"
                              "    - password: %s\n" % (self.url, self.USER, self.WRONG))
        refusal = ("gitfs remote %s: the server refused user '%s' with the password given; "
                   "fix gitfs_user (or the remote's user) and gitfs_password (or the remote's "
                   "password)" % (self.url, self.USER))
        wait_log(c.master, re.escape(refusal), 30)
        # libgit2 asks the callback again after each 401; it answered once:
        # one request without credentials, one with the wrong ones.
        self.assertLessEqual(self.server.refused_count(), 2)
        before = self.server.refused_count()
        rc, out, err = c.brine("fileserver", "update", timeout=120)
        self.assertNotEqual(rc, 0, out + err)
        self.assertIn(refusal, out + err)
        self.assertLessEqual(self.server.refused_count() - before, 2)
        self.assertTrue(c.master.alive())
        self.assert_no_secret(out, err, c.master.log())

    def test_right_password_serves_the_private_remote_and_is_never_shown(self):
        c = self.gitfs_master("gitfs_user: %s\n"
                              "gitfs_password: %s\n"
                              "gitfs_insecure_auth: true\n"
                              "gitfs_remotes:\n"
                              "  - %s\n" % (self.USER, self.PASSWORD, self.url))
        c.add_accepted_minion("m1")
        self.assertEqual(get_file_str(c, "m1"), "A1\n")
        second = commit_both(self.work, "A2\n", "B2\n")
        publish(self.work, os.path.join(self.tmp, "srv", "private.git"))
        rc, out, err = c.brine("fileserver", "update", "--json", timeout=120)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([p["commit"] for p in json.loads(out)["pins"]], [second])
        self.assertEqual(get_file_str(c, "m1"), "A2\n")
        self.assert_no_secret(out, err, c.master.log())

    def test_a_password_over_plain_http_is_refused_without_insecure_auth(self):
        c = self.gitfs_master("gitfs_remotes:\n"
                              "  - %s:\n"
                              "    - user: %s\n"
                              "    - password: %s\n" % (self.url, self.USER, self.PASSWORD),
                              start=False)
        c.master.start()
        c.master.expect_clean_exit = False
        rc = c.master.wait_exit(30)
        self.assertNotEqual(rc, 0)
        log = c.master.log()
        self.assertIn("gitfs_remotes %s: a password over plain http:// is refused" % self.url, log)
        self.assertIn("set gitfs_insecure_auth (or the remote's insecure_auth) to true", log)
        self.assert_no_secret(log)
        # Nothing went to the server: the password was never sent.
        self.assertEqual(self.server.refused_count(), 0)
        self.assertEqual(self.server.served, 0)


def tearDownModule():
    if PG is not None:
        PG.cleanup()


if __name__ == "__main__":
    unittest.main()
