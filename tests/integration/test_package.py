#!/usr/bin/env python3
"""The Debian package of scripts/package.sh: its control fields, every path
with its mode and owner, its conffiles and systemd units; then installed with
dpkg into a temporary root (its own dpkg database; the host's is never
touched): the files as installed, the installed brine running (the static
client; the daemons' brine-dynamic through it, on the packaged configs; a
master and a minion of the installed binaries answering test.ping), and
removal and purge leaving keys but nothing else.

The package is the one $BRINE_DEB names (.ci/run builds it after the
README's test command and sets it), else the newest build/package/brine_*.deb.
Without one the suite is skipped, unless $BRINE_REQUIRE_PACKAGE is set
(.ci/run sets it): then it fails."""

import configparser
import glob
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

from harness import STOP_TIMEOUT, free_port, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLACK = float(os.environ.get("BRINE_TEST_SLACK", "3"))

# Every path in the package, with its mode as `tar tv` prints it.
EXPECTED = {
    "./": "drwxr-xr-x",
    "./etc/": "drwxr-xr-x",
    "./etc/brine/": "drwxr-xr-x",
    "./etc/brine/master": "-rw-r--r--",
    "./etc/brine/minion": "-rw-r--r--",
    "./etc/brine/pki/": "drwx------",
    "./etc/brine/pki/master/": "drwx------",
    "./etc/brine/pki/minion/": "drwx------",
    "./lib/": "drwxr-xr-x",
    "./lib/systemd/": "drwxr-xr-x",
    "./lib/systemd/system/": "drwxr-xr-x",
    "./lib/systemd/system/brine-master.service": "-rw-r--r--",
    "./lib/systemd/system/brine-minion.service": "-rw-r--r--",
    "./usr/": "drwxr-xr-x",
    "./usr/bin/": "drwxr-xr-x",
    "./usr/bin/brine": "-rwxr-xr-x",
    "./usr/bin/brine-dynamic": "-rwxr-xr-x",
    "./usr/share/": "drwxr-xr-x",
    "./usr/share/doc/": "drwxr-xr-x",
    "./usr/share/doc/brine/": "drwxr-xr-x",
    "./usr/share/doc/brine/README.md.gz": "-rw-r--r--",
    "./usr/share/doc/brine/changelog.gz": "-rw-r--r--",
    "./usr/share/doc/brine/configuration.md.gz": "-rw-r--r--",
    "./usr/share/doc/brine/copyright": "-rw-r--r--",
    "./var/": "drwxr-xr-x",
    "./var/cache/": "drwxr-xr-x",
    "./var/cache/brine/": "drwx------",
    "./var/cache/brine/master/": "drwx------",
    "./var/cache/brine/minion/": "drwx------",
}


NO_PACKAGE = "needs the package: bash scripts/package.sh (.ci/run builds it)"


def find_package():
    """The .deb to test, or None (then each test skips, naming what it
    needs; run.py counts a suite that ran no test as failed)."""
    deb = os.environ.get("BRINE_DEB")
    if not deb:
        found = glob.glob(os.path.join(ROOT, "build", "package", "brine_*.deb"))
        deb = max(found, key=os.path.getmtime) if found else None
    if deb is not None and os.path.exists(deb):
        return deb
    if os.environ.get("BRINE_REQUIRE_PACKAGE"):
        raise AssertionError("no package (%s): scripts/package.sh failed or was not run"
                             % (deb or "build/package/brine_*.deb"))
    return None


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=60 * SLACK, **kwargs)


def dpkg_deb(*args):
    p = run(["dpkg-deb", *args])
    assert p.returncode == 0, p.stderr
    return p.stdout


def file_hash(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


def read_unit(path):
    unit = configparser.ConfigParser(strict=True, interpolation=None)
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read(path)
    return unit


def config_value(path, name):
    """The value of a top-level `name: value` line of a YAML config."""
    with open(path) as f:
        for line in f:
            m = re.match(r"%s:\s*(\S+)\s*$" % re.escape(name), line)
            if m:
                return m.group(1)
    return None


class Package(unittest.TestCase):
    """Reads the .deb only: runs as any user."""

    @classmethod
    def setUpClass(cls):
        cls.deb = find_package()
        if cls.deb is not None:
            cls.control = dict(re.findall(r"^([A-Za-z-]+): (.*)$", dpkg_deb("-f", cls.deb),
                                          re.M))

    def setUp(self):
        if self.deb is None:
            self.skipTest(NO_PACKAGE)

    def test_control_fields(self):
        c = self.control
        self.assertEqual(c["Package"], "brine")
        changelog = run(["dpkg-parsechangelog", "-l",
                         os.path.join(ROOT, "packaging", "deb", "changelog"), "-S", "Version"])
        self.assertEqual(c["Version"], changelog.stdout.strip())
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        self.assertEqual(c["Architecture"], arch)
        # brine is static and brine-dynamic needs only glibc: the libraries
        # it dlopens (libpq, libgit2) are suggested, never required.
        self.assertRegex(c["Depends"], r"^libc6 \(>= [0-9.]+\)$")
        suggests = [s.strip() for s in c["Suggests"].split(",")]
        self.assertIn("libpq5", suggests)
        self.assertIn("libgit2-1.5", suggests)
        self.assertIn("libmicrohttpd12", suggests)
        self.assertRegex(c["Built-Using"], r"glibc \(= [^)]+\)")
        self.assertGreater(int(c["Installed-Size"]), 1000)
        self.assertIn("Description", c)

    def test_every_path_mode_and_owner(self):
        listing = {}
        for line in dpkg_deb("-c", self.deb).splitlines():
            fields = line.split(None, 5)
            mode, owner, path = fields[0], fields[1], fields[5]
            self.assertEqual(owner, "root/root", line)
            listing[path] = mode
        self.assertEqual(listing, EXPECTED)

    def test_conffiles_are_the_two_configs(self):
        with tempfile.TemporaryDirectory() as d:
            dpkg_deb("-e", self.deb, d)
            with open(os.path.join(d, "conffiles")) as f:
                self.assertEqual(f.read().split(), ["/etc/brine/master", "/etc/brine/minion"])
            for script in ("postinst", "prerm", "postrm"):
                self.assertTrue(os.access(os.path.join(d, script), os.X_OK), script)
                p = run(["sh", "-n", os.path.join(d, script)])
                self.assertEqual(p.returncode, 0, p.stderr)
            # md5sums covers every file but the conffiles (dpkg keeps theirs).
            with open(os.path.join(d, "md5sums")) as f:
                summed = sorted("./" + line.split(None, 1)[1].strip() for line in f)
            files = sorted(p for p, m in EXPECTED.items()
                           if m.startswith("-") and not p.startswith("./etc/"))
            self.assertEqual(summed, files)


@unittest.skipUnless(os.geteuid() == 0, "needs root: dpkg installs files owned by root")
class Installed(unittest.TestCase):
    """Installs the package into a temporary root with its own dpkg database
    (dpkg --root; maintainer scripts run without chroot, with DPKG_ROOT set,
    so that they must act on that root only)."""

    @classmethod
    def setUpClass(cls):
        cls.deb = find_package()
        cls.tmp = None
        if cls.deb is None:
            return
        cls.host_status = file_hash("/var/lib/dpkg/status")
        cls.tmp = tempfile.mkdtemp(prefix="brine-package.")
        try:
            cls.root = cls.install(cls.tmp, "root")
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.tmp is not None:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        if self.deb is None:
            self.skipTest(NO_PACKAGE)

    @classmethod
    def dpkg(cls, root, *args):
        # --force-depends: libc6 is not in this root's empty database.
        return run(["dpkg", "--root=" + root, "--force-not-root", "--force-depends",
                    "--force-script-chrootless", *args])

    @classmethod
    def install(cls, tmp, name):
        root = os.path.join(tmp, name)
        for d in ("info", "updates"):
            os.makedirs(os.path.join(root, "var", "lib", "dpkg", d))
        open(os.path.join(root, "var", "lib", "dpkg", "status"), "w").close()
        p = cls.dpkg(root, "-i", cls.deb)
        assert p.returncode == 0, p.stdout + p.stderr
        return root

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def test_installed_and_verified(self):
        p = run(["dpkg-query", "--root=" + self.root, "-W", "-f=${Status} ${Version}", "brine"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^install ok installed \S+$")
        # Every file as packaged (md5sums), none changed since.
        p = self.dpkg(self.root, "--verify", "brine")
        self.assertEqual((p.returncode, p.stdout), (0, ""), p.stderr)

    def test_files_and_directories_as_installed(self):
        for rel, mode in EXPECTED.items():
            if rel == "./":
                continue
            st = os.lstat(self.path(rel[1:]))
            self.assertEqual(stat.filemode(st.st_mode), mode, rel)
            self.assertEqual((st.st_uid, st.st_gid), (0, 0), rel)

    def test_installed_brine_runs(self):
        version = run(["dpkg-query", "--root=" + self.root, "-W", "-f=${Version}",
                       "brine"]).stdout
        for binary in ("brine", "brine-dynamic"):
            p = run([self.path("/usr/bin/" + binary), "--version"])
            self.assertEqual((p.returncode, p.stdout), (0, "brine %s\n" % version),
                             binary + ": " + p.stderr)
        # The daemons' command lines go from the static brine to the
        # brine-dynamic beside it, which reads the packaged configs as the
        # units' ExecStart would: valid, and not one warning (an unknown or
        # ignored option would print one).
        for role in ("master", "minion"):
            config = self.path("/etc/brine/" + role)
            p = run([self.path("/usr/bin/brine"), role, "--check-config", "-c", config])
            self.assertEqual((p.returncode, p.stdout, p.stderr),
                             (0, "config %s: valid\n" % config, ""), role)

    def test_installed_master_and_minion_answer_a_job(self):
        # The stripped binaries as installed, as daemons: a master and an
        # auto-accepted minion in a directory of their own answer test.ping.
        d = tempfile.mkdtemp(prefix="fleet.", dir=self.tmp)
        port = free_port()
        with open(os.path.join(d, "master"), "w") as f:
            f.write("interface: 127.0.0.1\nport: %d\npki_dir: master-pki\n"
                    "cachedir: master-cache\nsock_dir: run\nauto_accept: true\n" % port)
        with open(os.path.join(d, "minion"), "w") as f:
            f.write("id: packaged\nmaster: 127.0.0.1\nmaster_port: %d\npki_dir: minion-pki\n"
                    "cachedir: minion-cache\nacceptance_wait_time: 1\n" % port)
        brine = self.path("/usr/bin/brine")
        daemons = []
        try:
            for role in ("master", "minion"):
                log = open(os.path.join(d, role + ".log"), "wb")
                daemons.append(subprocess.Popen([brine, role, "-c", os.path.join(d, role)],
                                                stdout=log, stderr=subprocess.STDOUT))
                log.close()
            cmd = [brine, "cmd", "-c", os.path.join(d, "master"), "packaged", "test.ping",
                   "--out", "json"]

            def pinged():
                for role, daemon in zip(("master", "minion"), daemons):
                    if daemon.poll() is not None:
                        with open(os.path.join(d, role + ".log")) as f:
                            self.fail("the installed %s exited: %s" % (role, f.read()[-2000:]))
                p = run(cmd)
                return p.returncode == 0 and json.loads(p.stdout) == {"packaged": True}

            wait_for(pinged, 30 * SLACK, "the installed minion's answer to test.ping")
        finally:
            for p in reversed(daemons):
                p.terminate()
            codes = []
            for p in reversed(daemons):
                try:
                    codes.append(p.wait(STOP_TIMEOUT))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    codes.append("killed after %.0f s" % STOP_TIMEOUT)
        self.assertEqual(codes, [0, 0], "exit codes of minion and master after SIGTERM")

    def test_units(self):
        units = self.path("/lib/systemd/system")
        master = read_unit(os.path.join(units, "brine-master.service"))
        minion = read_unit(os.path.join(units, "brine-minion.service"))
        for role, unit in (("master", master), ("minion", minion)):
            s = unit["Service"]
            self.assertEqual(s["ExecStart"], "/usr/bin/brine %s -c /etc/brine/%s" % (role, role))
            self.assertEqual(s["Restart"], "on-failure")
            self.assertEqual(s["Type"], "exec")
            self.assertEqual(unit["Install"]["WantedBy"], "multi-user.target")
        s = master["Service"]
        self.assertGreaterEqual(int(s["LimitNOFILE"]), 100000 + 1024)
        for key, value in (("NoNewPrivileges", "yes"), ("ProtectSystem", "full"),
                           ("ProtectHome", "yes"), ("PrivateTmp", "yes")):
            self.assertEqual(s[key], value, key)
        # What the packaged master config names, the unit provides: its
        # sock_dir is the RuntimeDirectory; its pki_dir is writable although
        # /etc is not (ProtectSystem=full); its cachedir is under /var.
        config = self.path("/etc/brine/master")
        sock_dir = config_value(config, "sock_dir")
        self.assertEqual(re.sub(r"^/(var/)?run/", "", sock_dir), s["RuntimeDirectory"])
        self.assertEqual(s["RuntimeDirectoryMode"], "0700")
        pki_dir = config_value(config, "pki_dir")
        self.assertTrue(any(pki_dir == w or pki_dir.startswith(w.rstrip("/") + "/")
                            for w in s["ReadWritePaths"].split()), s["ReadWritePaths"])
        self.assertTrue(os.path.isdir(self.path(s["ReadWritePaths"].split()[0])))
        self.assertTrue(config_value(config, "cachedir").startswith("/var/"))
        # The minion changes the machine as root: no sandbox.
        for key in ("ProtectSystem", "ProtectHome", "PrivateTmp", "NoNewPrivileges",
                    "PrivateDevices", "ReadWritePaths"):
            self.assertNotIn(key, minion["Service"], key)
        self.assertEqual(config_value(self.path("/etc/brine/minion"), "pki_dir"),
                         "/etc/brine/pki/minion")

    @unittest.skipUnless(shutil.which("systemd-analyze"), "needs systemd-analyze (systemd)")
    def test_units_verify(self):
        # systemd-analyze verify checks every key and value and that
        # ExecStart's program exists: copies of the units whose ExecStart
        # names the installed brine.
        with tempfile.TemporaryDirectory() as d:
            for name in ("brine-master.service", "brine-minion.service"):
                with open(self.path("/lib/systemd/system/" + name)) as f:
                    text = f.read()
                text = text.replace("ExecStart=/usr/bin/brine ",
                                    "ExecStart=%s " % self.path("/usr/bin/brine"))
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
                p = run(["systemd-analyze", "verify", "--man=no", "--generators=no",
                         os.path.join(d, name)])
                self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""), name)

    def test_remove_keeps_configs_and_purge_keeps_only_keys(self):
        root = self.install(self.tmp, "purge")
        key = os.path.join(root, "etc/brine/pki/master/master.pem")
        with open(key, "w") as f:
            f.write("a key the master made\n")
        wants = os.path.join(root, "etc/systemd/system/multi-user.target.wants")
        os.makedirs(wants)
        os.symlink("/lib/systemd/system/brine-master.service",
                   os.path.join(wants, "brine-master.service"))

        p = self.dpkg(root, "-r", "brine")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        status = run(["dpkg-query", "--root=" + root, "-W", "-f=${Status}", "brine"]).stdout
        self.assertEqual(status, "deinstall ok config-files")
        self.assertFalse(os.path.exists(os.path.join(root, "usr/bin/brine")))
        self.assertTrue(os.path.exists(os.path.join(root, "etc/brine/master")))

        p = self.dpkg(root, "-P", "brine")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        left = sorted(os.path.relpath(os.path.join(d, n), root)
                      for d, dirs, files in os.walk(root) for n in dirs + files
                      if not os.path.join(d, n).startswith(os.path.join(root, "var/lib/dpkg")))
        self.assertEqual(left, ["etc", "etc/brine", "etc/brine/pki", "etc/brine/pki/master",
                                "etc/brine/pki/master/master.pem", "etc/systemd",
                                "etc/systemd/system", "etc/systemd/system/multi-user.target.wants",
                                "var", "var/lib"])

    def test_host_dpkg_database_untouched(self):
        self.assertEqual(file_hash("/var/lib/dpkg/status"), self.host_status)


if __name__ == "__main__":
    unittest.main()
