#!/usr/bin/env python3
"""service.running watching a file.managed, applied with `brine call --local`
on Debian without systemd: the first apply starts the service, an apply that
changes the file restarts it (the daemon's pid changes), an apply that
changes nothing leaves it alone (same pid). The service is
tests/support/brine-test-svc installed as /etc/init.d/brine-test-svc-int;
the test removes it, its boot links and its daemon afterwards, also when it
fails."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BRINE_BIN, SLACK, write_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "support", "brine-test-svc")
NAME = "brine-test-svc-int"
PIDFILE = "/run/%s.pid" % NAME

SLS = """svc_conf:
  file.managed:
    - name: {{ grains['sandbox'] }}/svc.conf
    - contents: {{ pillar.get('conf', 'one') }}

%s:
  service.running:
    - watch:
      - file: svc_conf
""" % NAME


def skip_reason():
    if os.geteuid() != 0:
        return "needs root to install a script in /etc/init.d"
    if os.path.isdir("/run/systemd/system"):
        return "this host runs systemd, which manages services instead of init.d scripts"
    for tool in ("service", "update-rc.d", "start-stop-daemon", "runlevel"):
        if shutil.which(tool) is None:
            return "needs " + tool
    return None


def remove_service():
    for argv in (["start-stop-daemon", "--stop", "--quiet", "--oknodo", "--retry",
                  "TERM/5/KILL/5", "--pidfile", PIDFILE, "--remove-pidfile"],
                 ["update-rc.d", NAME, "remove"]):
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for path in ("/etc/init.d/" + NAME, PIDFILE, "/run/%s.log" % NAME):
        if os.path.lexists(path):
            os.unlink(path)


def daemon_pid():
    """The pid of the running daemon, None when it does not run."""
    try:
        with open(PIDFILE) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(") ", 1)[1][0]
    except (OSError, ValueError, IndexError):
        return None
    return None if state == "Z" else pid


def gone(pid):
    """Exited (maybe a zombie not reaped yet by init)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[1][0] in "ZX"
    except OSError:
        return True


@unittest.skipIf(skip_reason(), skip_reason())
class ServiceWatch(unittest.TestCase):

    def setUp(self):
        remove_service()
        self.addCleanup(remove_service)
        shutil.copyfile(SCRIPT, "/etc/init.d/" + NAME)
        os.chmod("/etc/init.d/" + NAME, 0o755)
        self.dir = tempfile.mkdtemp(prefix="brine-service-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        tree = os.path.join(self.dir, "tree")
        os.makedirs(tree)
        os.makedirs(os.path.join(self.dir, "pillar"))
        os.makedirs(os.path.join(self.dir, "sandbox"))
        with open(os.path.join(tree, "svc.sls"), "w") as f:
            f.write(SLS)
        self.conf = os.path.join(self.dir, "minion")
        write_config(self.conf, {
            "id": "svc-minion",
            "cachedir": os.path.join(self.dir, "cache"),
            "pki_dir": os.path.join(self.dir, "pki"),
            "file_roots": {"base": [tree]},
            "pillar_roots": {"base": [os.path.join(self.dir, "pillar")]},
            "grains": {"sandbox": os.path.join(self.dir, "sandbox")},
        })

    def apply(self, *extra):
        p = subprocess.run([BRINE_BIN, "call", "--local", "-c", self.conf, "--out", "json",
                            "state.sls", "svc"] + list(extra),
                           capture_output=True, text=True, timeout=120 * SLACK, cwd=self.dir)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        ret = json.loads(p.stdout)["local"]
        return ret["service_|-%s_|-%s_|-running" % (NAME, NAME)]

    def test_a_change_of_the_watched_file_restarts_the_service(self):
        self.assertIsNone(daemon_pid())
        started = self.apply()
        self.assertTrue(started["result"], started)
        self.assertEqual(started["changes"], {NAME: True}, started)
        # Started by service.running itself, or, where Salt's "offline mode"
        # makes service.running a no-op (systemctl installed, systemd not
        # running), by the watch's mod_watch.
        self.assertIn(started["comment"], ("Started service " + NAME, "Service started"))
        first = daemon_pid()
        self.assertIsNotNone(first, "the daemon does not run after the first apply")

        same = self.apply()
        self.assertEqual(same["changes"], {}, same)
        self.assertTrue(same["result"], same)
        self.assertEqual(daemon_pid(), first, "an apply without changes restarted the service")

        restarted = self.apply('pillar={"conf": "two"}')
        self.assertEqual(restarted["changes"], {NAME: True}, restarted)
        self.assertEqual(restarted["comment"], "Service restarted")
        second = daemon_pid()
        self.assertIsNotNone(second, "the daemon does not run after the restart")
        self.assertNotEqual(second, first, "the watched file changed but the pid did not")
        self.assertTrue(gone(first), "the first daemon still runs after the restart")
        with open(os.path.join(self.dir, "sandbox", "svc.conf")) as f:
            self.assertEqual(f.read(), "two\n")
        with open("/run/%s.log" % NAME) as f:
            self.assertIn("restart", f.read().split())


if __name__ == "__main__":
    unittest.main()
