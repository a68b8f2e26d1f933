#!/usr/bin/env python3
"""The documentation is true.

docs/functions.md is what scripts/function_reference.py generates from the
built binary's sys.doc: a new or changed function shows up as a difference.

Each room's README (src/ROOM/README.md) says what the room depends on in
one sentence, "Depends on ...": the rooms it names outside parentheses are
exactly the brine libraries its CMakeLists.txt links (DEPS of its
brine_library calls), and every `#include "ROOM/..."` in its own sources
names the room itself, one of those, or one they depend on in turn (an
include against the arrows would make a cycle).

The README's high-availability walkthroughs are run as a new user would run
them: each section's first ```sh block, copied as written, in an empty
temporary directory with the built `brine` first on PATH (bash -euo
pipefail, so the first command that fails ends it), then the section's
second ```sh block, its teardown, in the directory the walkthrough left the
shell in; the teardown runs also when the walkthrough or an assertion fails.
The tests check the output against what the prose and the comments say, and
that no process the walkthrough started is left (every process that carries
this run's marker in its environment, whether it wrote a pid file or not).

The walkthroughs are written for root on Debian 12: they use the documented
fixed ports (4501-4507, 4521-4523, 6000-6002; no other suite uses them:
they pick ports at random from 10000 up), PostgreSQL's cluster 15/main on
5432 (no other suite uses it) and apt-get, so the suite must not run beside
one that takes dpkg's lock (RESOURCE_LOCK dpkg in CMakeLists.txt). The
PostgreSQL ones are skipped when not root or when Debian's PostgreSQL 15 is
missing, the cluster one also when HAProxy is, the pg_auto_failover one also
when pg_auto_failover is, unless BRINE_REQUIRE_POSTGRES=1 (CI) says these
must be there. A cluster 15/main the test found stopped is stopped again
afterwards, and the role and database a walkthrough creates must be gone
after its teardown.
"""

import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from harness import BRINE_BIN, tail, wait_for
from haproxy import require_haproxy
from pgfailover import require_pg_auto_failover

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")

# Bound on a walkthrough (its own waits are bounded: 60 s each) and on its teardown.
WALK_TIMEOUT = 180
TEARDOWN_TIMEOUT = 60


def rooms():
    src = os.path.join(ROOT, "src")
    return sorted(d for d in os.listdir(src) if os.path.isfile(os.path.join(src, d, "CMakeLists.txt")))


def readme_depends(text, names):
    """The rooms a README's "Depends on" sentence names outside parentheses
    (None when it has no such sentence). The sentence ends at the first
    period outside parentheses that ends a word."""
    at = text.find("Depends on")
    if at < 0:
        return None
    sentence, depth = [], 0
    for i, ch in enumerate(text[at:], at):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            if ch == "." and (i + 1 == len(text) or text[i + 1].isspace()):
                break
            sentence.append(ch)
    words = re.findall(r"[A-Za-z_]+", "".join(sentence))
    return {w for w in words if w in names}


def cmake_depends(cmake, names):
    """The rooms a room's brine_library calls list as DEPS (brine_gitfs is
    the fileserver room's second library)."""
    libraries = {"gitfs": "fileserver"}
    out = set()
    for call in re.findall(r"brine_library\((.*?)\)\s*$", cmake, re.S | re.M):
        deps = call.split("DEPS", 1)[1] if "DEPS" in call else ""
        for lib in re.findall(r"\bbrine_([a-z_]+)", deps):
            room = libraries.get(lib, lib)
            if room in names:
                out.add(room)
    return out


class RoomReadmes(unittest.TestCase):

    def test_each_readme_names_exactly_its_rooms_dependencies(self):
        names = set(rooms())
        wrong = []
        for room in sorted(names - {"app"}):
            base = os.path.join(ROOT, "src", room)
            with open(os.path.join(base, "README.md")) as f:
                said = readme_depends(f.read(), names)
            with open(os.path.join(base, "CMakeLists.txt")) as f:
                linked = cmake_depends(f.read(), names) - {room}
            if said is None:
                wrong.append("%s: README.md has no \"Depends on ...\" sentence" % room)
            elif said != linked:
                wrong.append("%s: README.md names %s, CMakeLists.txt links %s" %
                             (room, sorted(said), sorted(linked)))
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_each_rooms_includes_follow_its_dependencies(self):
        # What a room links, directly or through what it links: an include
        # outside that would be an arrow the other way (a cycle).
        names = set(rooms())
        direct = {}
        for room in names:
            with open(os.path.join(ROOT, "src", room, "CMakeLists.txt")) as f:
                direct[room] = cmake_depends(f.read(), names) - {room}

        def reach(room, seen):
            for dep in direct[room] - seen:
                seen.add(dep)
                reach(dep, seen)
            return seen
        wrong = []
        for room in sorted(names - {"app"}):
            base = os.path.join(ROOT, "src", room)
            allowed = reach(room, set()) | {room}
            for entry in sorted(os.listdir(base)):
                if not entry.endswith((".cc", ".h", ".inc")):
                    continue
                with open(os.path.join(base, entry)) as f:
                    for n, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
                        if m and m.group(1) in names and m.group(1) not in allowed:
                            wrong.append("src/%s/%s:%d includes %s/, which %s does not link, not even through its dependencies"
                                         % (room, entry, n, m.group(1), room, m.group(1)))
        self.assertEqual(wrong, [], "\n".join(wrong))


class FunctionReference(unittest.TestCase):

    def test_function_reference_is_current(self):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "function_reference.py"),
                            BRINE_BIN], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(ROOT, "docs", "functions.md")) as f:
            committed = f.read()
        self.assertEqual(p.stdout, committed,
                         "docs/functions.md is out of date: run "
                         "'python3 scripts/function_reference.py BRINE > docs/functions.md'")
        # Every function has a summary line in the reference.
        self.assertGreater(p.stdout.count("\n### "), 60)


def sh_blocks(markdown, heading):
    """The ```sh blocks of the section that starts at the line `heading`
    (e.g. "### A master cluster") and ends at the next heading of its level
    or above; headings inside code blocks do not count."""
    lines = markdown.splitlines()
    if heading not in lines:
        raise AssertionError("README.md has no heading %r" % heading)
    level = len(heading) - len(heading.lstrip("#"))
    blocks, fence, info, body = [], None, None, None
    for line in lines[lines.index(heading) + 1:]:
        if fence is None:
            m = re.match(r"(`{3,}|~{3,})\s*([^\s`]*)", line)
            if m:
                fence, info, body = m.group(1), m.group(2), []
                continue
            h = re.match(r"(#+) ", line)
            if h and len(h.group(1)) <= level:
                break
        elif line.strip() == fence:
            if info == "sh":
                blocks.append("\n".join(body) + "\n")
            fence = None
        else:
            body.append(line)
    return blocks


def marked_processes(marker, postgres=False):
    """{pid: command line} of the live processes whose environment holds
    `marker` (a zombie's environment cannot be read: it is gone). PostgreSQL's
    server is left out unless `postgres`: a walkthrough may start the cluster
    15/main, which Walkthroughs.postgres() stops (pg_ctlcluster gives it an
    environment of its own anyway); the servers pg_autoctl starts inherit
    the walkthrough's."""
    found = {}
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/comm" % entry) as f:
                if f.read().strip() == "postgres" and not postgres:
                    continue
            with open("/proc/%s/environ" % entry, "rb") as f:
                if needle not in f.read():
                    continue
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
    return found


class Trace:
    """A script's output with bash's xtrace: each top-level command's trace
    line ("+ TIME 0 main COMMAND", PS4 set by Walkthrough.bash) starts a step
    that holds the output up to the next one. Trace lines of functions, of
    command substitutions and of commands started with `&` (a subshell,
    traced whenever it gets to it) start none."""

    LINE = re.compile(r"^\++ (\d+\.\d+) (\d+) (\S+) (.*)$")

    def __init__(self, text):
        self.text = text
        self.steps = []  # [command, start, output lines]
        for line in text.splitlines():
            m = self.LINE.match(line)
            if m and m.group(2) == "0" and m.group(3) == "main" and line.startswith("+ "):
                self.steps.append([m.group(4), float(m.group(1)), []])
            elif m:
                continue  # a command inside a function or a substitution
            elif self.steps:
                self.steps[-1][2].append(line)

    def find(self, command):
        """Every step whose command is `command` (as xtrace quotes it) or
        starts with it: [(output, seconds it took)]."""
        out = []
        for i, (cmd, start, lines) in enumerate(self.steps):
            if cmd == command or cmd.startswith(command + " "):
                end = self.steps[i + 1][1] if i + 1 < len(self.steps) else start
                out.append(("\n".join(lines), end - start))
        if not out:
            raise AssertionError("the walkthrough has no step %r; it ran:\n%s"
                                 % (command, "\n".join(s[0] for s in self.steps)))
        return out

    def output(self, command, nth=0):
        return self.find(command)[nth][0]


class Walkthrough:
    """One README section run in a temporary directory: run() runs its
    walkthrough block, the end of the `with` its teardown and the check
    that nothing it started is left."""

    def __init__(self, test, heading, ports):
        self.heading = heading
        with open(README) as f:
            blocks = sh_blocks(f.read(), heading)
        test.assertGreaterEqual(len(blocks), 2, "README.md, %r: a walkthrough block and its "
                                "teardown block (```sh) were expected" % heading)
        self.script, self.teardown = blocks[0], blocks[1]
        for port in ports:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError as e:
                    raise AssertionError("port %d, which %r uses, is taken (%s): is a "
                                         "walkthrough or a brine master still running?"
                                         % (port, heading, e))
        self.root = tempfile.mkdtemp(prefix="brine-docs-")
        self.work = os.path.join(self.root, "work")
        os.mkdir(self.work)
        # `brine` on PATH is the binary under test, whatever its file is called.
        os.mkdir(os.path.join(self.root, "bin"))
        os.symlink(os.path.abspath(BRINE_BIN), os.path.join(self.root, "bin", "brine"))
        self.marker = "BRINE_DOCS_RUN=" + secrets.token_hex(8)
        self.cwd_file = os.path.join(self.root, "cwd")
        self.trace = None
        self.seconds = None
        self.teardown_seconds = None

    def __enter__(self):
        return self

    def bash(self, name, script, cwd, timeout):
        """Runs `script` with bash -euo pipefail in `cwd`; returns (exit
        status or None after a timeout, output)."""
        path = os.path.join(self.root, name + ".sh")
        with open(path, "w") as f:
            f.write("PS4='+ $EPOCHREALTIME $BASH_SUBSHELL ${FUNCNAME[0]:-main} '\n"
                    "trap 'pwd > %s' EXIT\n"
                    "set -x\n" % self.cwd_file)
            f.write(script)
        env = dict(os.environ)
        env["PATH"] = os.path.join(self.root, "bin") + os.pathsep + env.get("PATH", "")
        key, value = self.marker.split("=")
        env[key] = value
        out_path = os.path.join(self.root, name + ".out")
        # Output to a file, not a pipe: the daemons the script starts keep
        # its stdout open after it ends.
        with open(out_path, "wb") as out:
            p = subprocess.Popen(["bash", "-euo", "pipefail", path], cwd=cwd, env=env,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # The script and the processes in its group (daemons started with
            # `&`); the teardown and the leftover check handle the rest.
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
            rc = None
        with open(out_path, errors="replace") as f:
            return rc, f.read()

    def logs(self):
        """Every *.log file the walkthrough wrote, for failure messages."""
        parts = []
        for d, _, files in os.walk(self.work):
            for name in sorted(files):
                if name.endswith(".log"):
                    try:
                        with open(os.path.join(d, name), errors="replace") as f:
                            parts.append("--- %s:\n%s" % (os.path.relpath(os.path.join(d, name),
                                                                           self.work),
                                                          tail(f.read(), 15)))
                    except OSError:
                        pass
        return "\n".join(parts)

    def run(self):
        began = time.monotonic()
        rc, text = self.bash("walkthrough", self.script, self.work, WALK_TIMEOUT)
        self.seconds = time.monotonic() - began
        self.trace = Trace(text)
        if rc != 0:
            raise AssertionError("%r: the walkthrough %s; its output:\n%s\n%s"
                                 % (self.heading, "timed out after %d s" % WALK_TIMEOUT
                                    if rc is None else "failed (exit status %d)" % rc,
                                    tail(text, 60), self.logs()))
        return self.trace

    def __exit__(self, *exc):
        try:
            with open(self.cwd_file) as f:
                cwd = f.read().strip()
        except FileNotFoundError:
            cwd = self.work
        began = time.monotonic()
        rc, text = self.bash("teardown", self.teardown, cwd, TEARDOWN_TIMEOUT)
        self.teardown_seconds = time.monotonic() - began
        problems = []
        if rc != 0 and exc[0] is None:
            problems.append("the teardown %s; its output:\n%s"
                            % ("timed out" if rc is None else "failed (exit status %d)" % rc,
                               tail(text, 30)))
        # The teardown waits for what it stopped; a moment more for a
        # process to be reaped.
        try:
            wait_for(lambda: not marked_processes(self.marker), 10, "the walkthrough's processes "
                     "to be gone after its teardown")
        except AssertionError:
            left = marked_processes(self.marker)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            problems.append("left running after the teardown (killed now): " +
                            "; ".join("%d: %s" % kv for kv in sorted(left.items())))
        failed = exc[0] is not None or problems
        if failed and os.environ.get("BRINE_KEEP_FAILED"):
            problems.append("kept " + self.root)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        print("\n%s: walkthrough %.1f s, teardown %.1f s"
              % (self.heading, self.seconds or 0, self.teardown_seconds), file=sys.stderr)
        if problems:
            raise AssertionError("%r: %s" % (self.heading, "\n".join(problems)))
        return False


def require_root_debian_postgres():
    """SkipTest (AssertionError with BRINE_REQUIRE_POSTGRES=1) unless the
    walkthroughs' PostgreSQL can be had as they get it: as root, with
    Debian's cluster 15/main."""
    why = None
    if os.geteuid() != 0:
        why = "the PostgreSQL walkthroughs are written for root (runuser, apt-get)"
    elif not shutil.which("pg_ctlcluster") or not os.path.isdir("/etc/postgresql/15/main"):
        why = ("PostgreSQL 15 is not installed as Debian packages it (no pg_ctlcluster or no "
               "cluster 15/main): apt-get install postgresql (scripts/deps.sh does)")
    if why is None:
        return
    if os.environ.get("BRINE_REQUIRE_POSTGRES") == "1":
        raise AssertionError(why + " (BRINE_REQUIRE_POSTGRES=1 makes this a failure)")
    raise unittest.SkipTest(why)


def psql(sql):
    p = subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-A", "-t",
                        "-v", "ON_ERROR_STOP=1", "-c", sql], cwd="/", capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("psql failed: %s\n%s%s" % (sql, p.stdout, p.stderr))
    return p.stdout.strip()


def cluster_running():
    return subprocess.run(["pg_ctlcluster", "15", "main", "status"], capture_output=True,
                          timeout=60).returncode == 0


class Walkthroughs(unittest.TestCase):
    """README.md, "## High availability": each walkthrough as written."""

    def postgres(self, name):
        """For a walkthrough that creates role and database `name` in the
        cluster 15/main: leaves the cluster as it found it (stopped, if it
        was) and drops what a failed teardown left."""
        require_root_debian_postgres()
        if not cluster_running():
            self.addCleanup(lambda: cluster_running() and subprocess.run(
                ["pg_ctlcluster", "15", "main", "stop"], capture_output=True, timeout=120))

        def drop():
            if cluster_running():
                psql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
                psql('DROP ROLE IF EXISTS "%s"' % name)
        self.addCleanup(drop)

    def assert_dropped(self, name):
        self.assertEqual(psql("SELECT count(*) FROM pg_database WHERE datname = '%s'" % name), "0",
                         "the teardown left the database %s" % name)
        self.assertEqual(psql("SELECT count(*) FROM pg_roles WHERE rolname = '%s'" % name), "0",
                         "the teardown left the role %s" % name)

    def assert_answers(self, output, minions, what):
        for m in minions:
            self.assertRegex(output, r"(?m)^%s:\n\s+True$" % m, "%s: %s did not answer True:\n%s"
                             % (what, m, output))

    def test_two_masters_on_one_machine(self):
        with Walkthrough(self, "### Two masters on one machine, step by step",
                         [4506, 4507]) as w:
            t = w.run()
            ping_a = "retry brine cmd -c a/master '*' test.ping"
            ping_b = "retry brine cmd -c b/master '*' test.ping"
            self.assert_answers(t.output(ping_a, 0), ["m1"], "A, before the kill")
            self.assert_answers(t.output(ping_b), ["m1"], "B, before the kill")
            # After A's death B answers at once: no wait for the dead master
            # (a wait would be the 5 s of -t).
            out, seconds = t.find("brine cmd -c b/master '*' test.ping")[0]
            self.assert_answers(out, ["m1"], "B, A dead")
            self.assertLess(seconds, 4, "B took %.1f s to answer with A dead" % seconds)
            self.assert_answers(t.output(ping_a, 1), ["m1"], "A, back")

    def test_two_masters_on_one_database(self):
        self.postgres("brine_ha")
        with Walkthrough(self, "### Two masters on one database", [4506, 4507]) as w:
            t = w.run()
            check = t.output("brine store check -c a/master")
            self.assertRegex(check, r"schema", check)
            self.assertRegex(t.output("retry brine key accept -c a/master m1"),
                             r"Key for minion m1 accepted")
            self.assert_answers(t.output("retry brine cmd -c b/master m1 test.ping"), ["m1"],
                                "B, m1 accepted on A")
            jobs_a = t.output("brine job list -c a/master")
            jobs_b = t.output("brine job list -c b/master")
            self.assertIn("test.ping", jobs_a)
            self.assertEqual(jobs_a, jobs_b, "A and B list different jobs")
            self.assertRegex(t.output("brine key reject -c b/master --include-accepted m1"),
                             r"Key for minion m1 rejected")
            # "A cuts m1 too": A has it rejected within a second and serves it no more.
            a_conf = os.path.join(w.work, "ha-db", "a", "master")
            wait_for(lambda: '"rejected":["m1"]' in subprocess.run(
                [BRINE_BIN, "key", "list", "-c", a_conf, "--json"], capture_output=True,
                text=True, timeout=30).stdout, 5, "A to have m1 rejected")
            p = subprocess.run([BRINE_BIN, "cmd", "-c", a_conf, "-t", "3", "m1", "test.ping"],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
            # The password is in no log and in nothing brine printed.
            self.assertNotIn("change-me", check)
            self.assertNotIn("change-me", w.logs())
        self.assert_dropped("brine_ha")

    def test_store_survives_its_primary(self):
        require_root_debian_postgres()
        require_pg_auto_failover()
        ports = [4506, 4507, 6000, 6001, 6002]
        with Walkthrough(self, "### A store that survives its primary", ports) as w:
            # The walkthrough hands its directory to postgres, who must be
            # able to reach it: mkdtemp's 0700 would stop it.
            os.chmod(w.root, 0o755)
            os.chmod(w.work, 0o755)
            reach = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", w.work],
                                   timeout=30)
            self.assertEqual(reach.returncode, 0, "the user postgres cannot enter %s: set "
                             "TMPDIR to a directory it can reach (not under /root)" % w.work)
            self.addCleanup(kill_all, w.marker)
            t = w.run()
            pgaf = os.path.join(w.work, "pgaf")

            # Before the kill: n1 primary, n2 its synchronous standby.
            state = t.output("af show state", 0)
            self.assertRegex(state, r"(?m)^\s*n1 \|.*\|\s+primary \|\s+primary\s*$", state)
            self.assertRegex(state, r"(?m)^\s*n2 \|.*\|\s+secondary \|\s+secondary\s*$", state)
            self.assertRegex(t.output("sql 6001 postgres 'SELECT application_name,").strip(),
                             r"^pgautofailover_standby_\d+\|quorum$")

            # Trust on the Unix socket only; every TCP rule asks for a password.
            shown = t.output("grep -H '^[^#]*trust'").splitlines()
            self.assertEqual(sorted({line.split(":")[0] for line in shown}),
                             ["monitor/pg_hba.conf", "n1/pg_hba.conf", "n2/pg_hba.conf"], shown)
            for name in ("monitor", "n1", "n2"):
                with open(os.path.join(pgaf, name, "pg_hba.conf")) as f:
                    rules = [r for r in (line.split("#")[0].split() for line in f) if r]
                self.assertTrue(any(r[0] == "local" and "trust" in r for r in rules), rules)
                for r in rules:
                    if "trust" in r:
                        self.assertEqual(r[0], "local", "%s/pg_hba.conf trusts %s" % (name, r))
                    if r[0].startswith("host"):
                        self.assertIn("scram-sha-256", r, "%s/pg_hba.conf: %s" % (name, r))

            # Loopback only: what the walkthrough's ss showed (n1 still up),
            # and every listening socket of the run's processes now.
            listening = t.output("ss -Hltn")
            self.assertEqual(sorted(line.split()[3] for line in listening.splitlines()),
                             sorted("127.0.0.1:%d" % p for p in ports), listening)
            seen = set()
            for local, pid in listeners():
                if pid in marked_processes(w.marker, postgres=True):
                    host, port = local.rsplit(":", 1)
                    self.assertIn(host, ("127.0.0.1", "[::1]"), "pid %d listens on %s" % (pid, local))
                    seen.add(int(port))
            self.assertLessEqual({4506, 4507, 6000, 6002}, seen, "the run's listening ports: %s"
                                 % sorted(seen))

            # web1 answers before the kill, on both masters, and after it: the
            # publish waited for n2 and was recorded.
            self.assert_answers(t.output("retry brine cmd -c m1/master '*' test.ping"), ["web1"],
                                "m1, before the kill")
            self.assert_answers(t.output("retry brine cmd -c m2/master '*' test.ping"), ["web1"],
                                "m2, before the kill")
            out, seconds = t.find("brine cmd -c m1/master -t 20 --show-jid '*' test.ping")[0]
            self.assert_answers(out, ["web1"], "m1, n1 dead")
            jid = re.search(r"(?m)^jid: (\d+)$", out)
            self.assertIsNotNone(jid, out)
            jid = jid.group(1)
            logged = t.output("grep 'recorded after waiting' m1.log")
            waited = re.search(r"publish: job %s recorded after waiting ([\d.]+) s for the store"
                               % jid, logged)
            self.assertIsNotNone(waited, "m1 logged no wait for job %s:\n%s" % (jid, logged))
            self.assertLessEqual(float(waited.group(1)), 15, logged)   # store_failover_wait
            self.assertGreaterEqual(seconds, float(waited.group(1)), out)

            # Every job from before is listed after, and this one with them.
            before = t.output("brine job list -c m1/master").splitlines()
            after = t.output("brine job list -c m2/master").splitlines()
            self.assertGreaterEqual(len(before), 2, before)
            for line in before:
                self.assertIn(line, after, "a job from before the kill is gone")
            self.assertEqual(len(after), len(before) + 1, after)
            self.assertRegex(after[0], r"^%s .* 1/1 returned" % jid, after)
            for line in after:
                self.assertRegex(line, r"test\.ping .* 1/1 returned$", after)

            state = t.output("af show state", 1)
            self.assertRegex(state, r"(?m)^\s*n2 \|.*\|\s+wait_primary \|\s+wait_primary\s*$",
                             state)

            # No password in a log: brine's, pg_autoctl's, the servers'.
            with open(os.path.join(pgaf, "pgpass")) as f:
                passwords = [line.rstrip("\n").rsplit(":", 1)[1] for line in f]
            with open(os.path.join(pgaf, "store.pw")) as f:
                passwords.append(f.read().strip())
            self.assertEqual(len(passwords), 4)
            for d, _, files in os.walk(pgaf):
                for name in files:
                    if name.endswith(".log"):
                        with open(os.path.join(d, name), errors="replace") as f:
                            text = f.read()
                        for pw in passwords:
                            self.assertNotIn(pw, text, "a password in " + os.path.join(d, name))
        # The teardown stopped the servers too (the harness's check leaves
        # postgres out), and pg_autoctl wrote nothing outside the directory.
        self.assertEqual(marked_processes(w.marker, postgres=True), {},
                         "left running after the teardown")
        for port in ports:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
        home = pwd.getpwnam("postgres").pw_dir
        for d in ("/tmp/pg_autoctl", os.path.join(home, ".config", "pg_autoctl"),
                  os.path.join(home, ".local", "share", "pg_autoctl")):
            self.assertFalse(os.path.exists(d + w.root), "pg_autoctl left %s" % (d + w.root))

    def test_master_cluster(self):
        require_haproxy()
        self.postgres("brine_cluster")
        minions = ["n%d" % i for i in range(1, 7)]
        with Walkthrough(self, "### A master cluster",
                         [4501, 4502, 4503, 4506, 4521, 4522, 4523]) as w:
            t = w.run()
            self.assertRegex(t.output("brine cluster init -c m1/master"), r"fingerprint: ")
            self.assert_answers(t.output("retry brine cmd -c m2/master -L n1,n2,n3,n4,n5,n6"),
                                minions, "m2, every minion")
            status = t.output("brine cluster status -c m1/master")
            rows = cluster_rows(status)
            self.assertEqual(sorted(rows), [4501, 4502, 4503], status)
            for port, (alive, link, _) in rows.items():
                self.assertEqual(alive, "yes", "%d is not alive:\n%s" % (port, status))
                self.assertRegex(link, r"^-$" if port == 4501 else r"^up ", status)
            self.assertIn("test.ping", t.output("brine job list -c m3/master"))
            self.assert_answers(t.output("brine cmd -c m1/master"), minions, "m1, m3 dead")
            # What the prose says of the status after the kill: the six are
            # on m1 and m2; m3 goes `down` (exit status 2) once its last
            # heartbeat is 5 s old.
            m1 = os.path.join(w.work, "cluster", "m1", "master")

            def after_kill():
                p = subprocess.run([BRINE_BIN, "cluster", "status", "-c", m1],
                                   capture_output=True, text=True, timeout=30)
                rows = cluster_rows(p.stdout)
                moved = rows.get(4501, ("", "", 0))[2] + rows.get(4502, ("", "", 0))[2] == 6
                down = rows.get(4503, ("",))[0] == "down" and p.returncode == 2
                return p.stdout if moved and down else None
            wait_for(after_kill, 20, "brine cluster status to show the six minions on m1 and m2 "
                     "and m3 down (exit status 2)")
        self.assert_dropped("brine_cluster")


def listeners():
    """[(local address, pid)] of every listening TCP and UDP socket (ss -p)."""
    p = subprocess.run(["ss", "-Hltunp"], capture_output=True, text=True, timeout=30)
    found = []
    for line in p.stdout.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        for pid in re.findall(r"pid=(\d+)", line):
            found.append((fields[4], int(pid)))
    return found


def kill_all(marker):
    """Stops whatever a failed walkthrough and its teardown left, postgres
    included: an immediate shutdown first (SIGQUIT: a postmaster removes its
    shared memory as it exits), then kill -9 of what is left after 10 s."""
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        left = marked_processes(marker, postgres=True)
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if left and sig == signal.SIGQUIT:
            try:
                wait_for(lambda: not marked_processes(marker, postgres=True), 10,
                         "the servers a failed walkthrough left to stop")
            except AssertionError:
                pass


def cluster_rows(status):
    """`brine cluster status`'s members by minion port: {port: (ALIVE, LINK,
    CONNECTED)}."""
    rows = {}
    for m in re.finditer(r"(?m)^\S+:(\d+)(?: \*)?\s+\S+\s+(yes|down|no key|removed)\s+"
                         r"(-|down|up [\d.]+ ms)\s+(\d+)", status):
        rows[int(m.group(1))] = (m.group(2), m.group(3), int(m.group(4)))
    return rows


if __name__ == "__main__":
    unittest.main()
