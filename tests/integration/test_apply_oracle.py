#!/usr/bin/env python3
"""brine against Salt: every case of tests/fixtures/apply (Salt 3006's
recorded `salt-call --local` outputs for small state trees, see its README)
run with `brine call --local` under the same minion options, normalised by
the same rules, and compared byte for byte: the JSON, the highstate text and
the exit code. Cases brine does not match yet are listed in XFAIL with the
reason; one of them that starts matching fails the test, so the list stays
true."""

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import BRINE_BIN, SLACK, write_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "apply")

# (tree, case) or (tree, "*") -> why brine differs today. Empty: every
# recorded case matches Salt.
XFAIL = {
    ("system_states", "present_test"):
        "recorded with Salt 3006.23 (2026-02), which fails a user.present under test whose "
        "group an earlier group.present creates ('The following group(s) are not present'), "
        "and so every state requiring it. Salt PR 69438 (merged 2026-06-12, fixing issue "
        "68110) makes it pending instead (result None), as the issue's Salt 3006.26 does and "
        "brine does; re-record this tree with 3006.26 to drop the entry.",
}

JSON_RULES = [
    (r'"start_time": "[^"]*"', '"start_time": "00:00:00.000000"'),
    (r'"duration": -?[0-9][0-9.eE+-]*', '"duration": 0.0'),
    (r'"pid": [0-9]+', '"pid": 0'),
]
TEXT_RULES = [
    (r"(Started: )[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?", r"\g<1>00:00:00.000000"),
    (r"(Duration: )[0-9][0-9.eE+-]*( ms)", r"\g<1>0.0\g<2>"),
    (r"(?m)^(Total run time:) +[0-9.]+ m?s$", r"\g<1> 0.000 ms"),
    (r"(\n *pid:\n +)[0-9]+(?=\n|$)", r"\g<1>0"),
    (r"(\n *start_time:\n +)[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(?=\n|$)",
     r"\g<1>00:00:00.000000"),
    (r"(\n *duration:\n +)[0-9][0-9.eE+-]*(?=\n|$)", r"\g<1>0.0"),
]


def normalise(text, rules, paths):
    for real, placeholder in paths:
        text = text.replace(real, placeholder)
    for pattern, repl in rules:
        text = re.sub(pattern, repl, text)
    return text


# Trees whose states change the machine itself (accounts, crontabs): they
# run only as root with the tools their states use, and what they create is
# removed before and after each sequence, also when a case fails midway.
SYSTEM_TREES = {
    "system_states": {
        "tools": ["useradd", "usermod", "userdel", "groupadd", "gpasswd", "crontab", "sysctl"],
        "cleanup": [
            ["crontab", "-u", "brinetest1", "-r"],
            ["userdel", "-r", "brinetest1"],
            ["groupdel", "brinetestm"],
            ["groupdel", "brinetestx"],
            ["groupdel", "brinetestg"],
        ],
    },
    # An init.d script the tree installs, starts, stops and removes. Salt
    # 3006 recorded it on Debian 12 without systemd running but with
    # systemctl installed ("offline": service.running and service.dead do
    # nothing there) and without insserv; elsewhere its outputs differ.
    "service_states": {
        "tools": ["service", "update-rc.d", "start-stop-daemon", "runlevel", "systemctl"],
        "absent": ["insserv"],
        "not_booted_with_systemd": True,
        "cleanup": [
            ["start-stop-daemon", "--stop", "--quiet", "--oknodo", "--retry", "TERM/5/KILL/5",
             "--pidfile", "/run/brine-test-svc.pid", "--remove-pidfile"],
            ["update-rc.d", "brine-test-svc", "remove"],
            ["rm", "-f", "/etc/init.d/brine-test-svc", "/run/brine-test-svc.log"],
        ],
    },
    # The same script where systemd is not installed (a plain container,
    # sysvinit): Salt's debian_service alone, recorded and replayed in a
    # mount namespace that hides systemctl (tests/support/without_systemctl.sh).
    "service_initd": {
        "tools": ["service", "update-rc.d", "start-stop-daemon", "unshare"],
        "absent": ["insserv"],
        "not_booted_with_systemd": True,
        "wrapper": [os.path.join(ROOT, "tests", "support", "without_systemctl.sh")],
        "cleanup": [
            ["start-stop-daemon", "--stop", "--quiet", "--oknodo", "--retry", "TERM/5/KILL/5",
             "--pidfile", "/run/brine-test-svc.pid", "--remove-pidfile"],
            ["update-rc.d", "brine-test-svc", "remove"],
            ["rm", "-f", "/etc/init.d/brine-test-svc", "/run/brine-test-svc.log"],
        ],
    },
}


# Trees that only touch their sandbox but need a tool of the machine.
TOOL_TREES = {
    "git_config": ["git"],
    "archive": ["tar", "gzip", "bzip2", "xz", "unzip"],
}


def system_tree_missing(tree):
    """Why `tree` cannot run here, or None."""
    tools = TOOL_TREES.get(tree, [])
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        return "needs " + ", ".join(missing)
    spec = SYSTEM_TREES.get(tree)
    if spec is None:
        return None
    if os.geteuid() != 0:
        return "needs root"
    missing = [t for t in spec["tools"] if shutil.which(t) is None]
    if missing:
        return "needs " + ", ".join(missing)
    present = [t for t in spec.get("absent", []) if shutil.which(t) is not None]
    if present:
        return "was recorded without " + ", ".join(present)
    if spec.get("not_booted_with_systemd") and os.path.isdir("/run/systemd/system"):
        return "was recorded where systemd is not the running init"
    return None


def clean_system(tree):
    for argv in SYSTEM_TREES.get(tree, {}).get("cleanup", []):
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# Trees that take a lock of the machine (pkg_states' apt-get takes dpkg's)
# besides SYSTEM_TREES, which change it: these run one sequence at a time.
SERIAL_TREES = {"pkg_states"}

# Sequences of other trees, each in its own sandbox, run this many at a time.
WORKERS = 2


def xfail_reason(tree, case):
    return XFAIL.get((tree, case)) or XFAIL.get((tree, "*"))


class OracleTest(unittest.TestCase):

    def run_sequence(self, tree, cases, fmt):
        """Runs every case of `tree` in order from a fresh sandbox; returns
        {case: (rc, normalised stdout)}."""
        work = tempfile.mkdtemp(prefix="brine-oracle-")
        clean_system(tree)
        try:
            sandbox = os.path.join(work, "sandbox")
            tree_dir = os.path.join(work, "tree")
            root = os.path.join(work, "root")
            os.makedirs(sandbox)
            os.makedirs(os.path.join(root, "pillar"))
            shutil.copytree(os.path.join(FIXTURES, tree, "tree"), tree_dir)
            paths = [(sandbox, "@SANDBOX@"), (tree_dir, "@TREE@"), (root, "@ROOT@")]
            out = {}
            for case in cases:
                conf = os.path.join(work, "minion")
                options = {
                    "file_client": "local",
                    "id": "fixture-minion",
                    "cachedir": os.path.join(root, "cache"),
                    "pki_dir": os.path.join(root, "pki"),
                    "file_roots": {"base": [tree_dir]},
                    "pillar_roots": {"base": [os.path.join(root, "pillar")]},
                    "grains": {"sandbox": sandbox},
                }
                options.update(case.get("options", {}))
                write_config(conf, options)
                argv = [a.replace("@SANDBOX@", sandbox).replace("@TREE@", tree_dir)
                        for a in case["argv"]]
                flags = ["--out", "json"] if fmt == "json" else ["--no-color"]
                wrapper = SYSTEM_TREES.get(tree, {}).get("wrapper", [])
                p = subprocess.run(wrapper + [BRINE_BIN, "call", "--local", "-c", conf] + flags + argv,
                                   capture_output=True, text=True, timeout=120 * SLACK,
                                   cwd=work)
                rules = JSON_RULES if fmt == "json" else TEXT_RULES
                out[case["name"]] = (p.returncode, normalise(p.stdout, rules, paths), p.stderr)
            return out
        finally:
            clean_system(tree)
            shutil.rmtree(work, ignore_errors=True)

    def run_all(self, trees, cases):
        """{(tree, format): run_sequence()} for every tree in both formats.
        The sequences of trees that change the machine or take one of its
        locks run one after another in one lane, started first (it is the
        longest); every other sequence is a lane of its own, on whichever
        worker is free."""
        serial = [(t, fmt) for t in trees if t in SYSTEM_TREES or t in SERIAL_TREES
                  for fmt in ("json", "txt")]
        lanes = [serial] + [[(t, fmt)] for t in trees if (t, "json") not in serial
                            for fmt in ("json", "txt")]

        def run_lane(lane):
            return {(t, fmt): self.run_sequence(t, cases[t], fmt) for t, fmt in lane}

        results = {}
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            for done in [pool.submit(run_lane, lane) for lane in lanes if lane]:
                results.update(done.result())
        return results

    def test_every_case_matches_salt(self):
        trees = sorted(d for d in os.listdir(FIXTURES)
                       if os.path.isdir(os.path.join(FIXTURES, d)))
        self.assertGreater(len(trees), 10)
        # BRINE_ORACLE_TREES=a,b runs only those (while working on them).
        only = os.environ.get("BRINE_ORACLE_TREES")
        if only:
            trees = [t for t in trees if t in only.split(",")]
        matched, expected_failures, failures = 0, 0, []
        skipped, ran, cases = [], [], {}
        for tree in trees:
            why = system_tree_missing(tree)
            if why:
                skipped.append("%s (%s)" % (tree, why))
                continue
            with open(os.path.join(FIXTURES, tree, "cases.json")) as f:
                cases[tree] = json.load(f)
            ran.append(tree)
        results = self.run_all(ran, cases)
        for tree in ran:
            for case in cases[tree]:
                name = case["name"]
                salt = os.path.join(FIXTURES, tree, "salt", name)
                with open(salt + ".rc") as f:
                    want_rc = int(f.read().strip())
                problems = []
                for fmt in ("json", "txt"):
                    with open(salt + "." + fmt) as f:
                        want = f.read()
                    rc, got, err = results[tree, fmt][name]
                    if rc != want_rc:
                        problems.append("%s: exit %d, Salt %d (stderr: %s)"
                                        % (fmt, rc, want_rc, err.strip()[-300:]))
                    if got != want:
                        problems.append("%s differs:\n--- salt\n%s\n--- brine\n%s"
                                        % (fmt, want[:3000], got[:3000]))
                reason = xfail_reason(tree, name)
                if reason and problems:
                    expected_failures += 1
                elif reason:
                    failures.append("%s/%s matches Salt now: take it out of XFAIL (%s)"
                                    % (tree, name, reason))
                elif problems:
                    failures.append("%s/%s:\n%s" % (tree, name, "\n".join(problems)))
                else:
                    matched += 1
        print("\nstate.apply oracle: %d cases match Salt byte for byte, %d expected failures"
              % (matched, expected_failures))
        if skipped:
            print("skipped trees (root or tools missing): " + ", ".join(skipped))
        self.assertEqual(failures, [], "\n\n".join(failures[:8]) +
                         ("\n(and %d more)" % (len(failures) - 8) if len(failures) > 8 else ""))


if __name__ == "__main__":
    unittest.main()
