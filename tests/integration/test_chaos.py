#!/usr/bin/env python3
"""Chaos: hundreds of jobs against minions with two masters while the test
kills masters with SIGKILL and restarts them at random moments. At the end
every (jid, targeted minion) is in `returns` or in `undelivered` of its
job, never both and never missing, and every job a minion ran has exactly
one return and ran exactly once."""

import collections
import json
import os
import random
import re
import threading
import time
import unittest

from harness import MasterSet, tail, wait_for

MINIONS = ["m1", "m2", "m3"]
JOBS = int(os.environ.get("CHAOS_JOBS", "220"))
HOLD = 6  # publish_hold of the masters: --async jobs wait this long for a minion


class ChaosTest(unittest.TestCase):

    def test_every_job_is_returned_or_undelivered_while_masters_die(self):
        seed = int(os.environ.get("CHAOS_SEED", str(int(time.time()))))
        rng = random.Random(seed)
        print("\nchaos seed %d (CHAOS_SEED=%d to repeat), %d jobs" % (seed, seed, JOBS))
        ms = MasterSet(2, master_opts={"publish_hold": HOLD})
        self.addCleanup(ms.stop)
        for mid in MINIONS:
            ms.add_minion(mid, master_alive_interval=2)
        for m in ms.masters:
            wait_for(lambda m=m: sorted(m.ping_json(timeout=2)[1]) == MINIONS, 20,
                     "every minion on " + m.name)

        before = set()
        for m in ms.masters:
            before.update(re.findall(r"(?m)^(\d{20})\s", m.brine("job", "list")[1]))
        stop = threading.Event()
        kills = []

        def chaos():
            while not stop.is_set():
                if stop.wait(rng.uniform(0.8, 2.5)):
                    break
                # Each master in turn, so that every one dies several times.
                victim = ms.masters[len(kills) % len(ms.masters)]
                victim.kill()
                kills.append(victim.name)
                stop.wait(rng.uniform(0.2, 2.0))
                victim.start()

        killer = threading.Thread(target=chaos, daemon=True)
        killer.start()

        published = []  # (master, jid or None, token)
        failed_cli = 0
        try:
            n = 0
            # JOBS jobs, and more (up to twice as many) until each master
            # has been killed at least twice while jobs were being published.
            while n < JOBS or (len(kills) < 2 * len(ms.masters) and n < 2 * JOBS):
                n += 1
                token = "chaos-%d-%d" % (seed, n)
                kind = rng.random()
                if kind < 0.6:
                    words = ["cmd.run",
                             "echo %s >> ran.txt; sleep %.2f" % (token, rng.uniform(0, 1.2))]
                elif kind < 0.85:
                    words = ["test.sleep", "%.2f" % rng.uniform(0, 1.5)]
                else:
                    words = ["test.echo", token]
                # A master that is down refuses the CLI; the other one takes it.
                first = rng.randrange(len(ms.masters))
                for m in (ms.masters[first], ms.masters[1 - first]):
                    rc, out, err = m.brine("cmd", "--async", "*", *words, timeout=30)
                    match = re.search(r"Executed command with job ID: (\d+)", out)
                    if rc == 0 and match:
                        published.append((m, match.group(1), token, words[0]))
                        break
                    failed_cli += 1
                time.sleep(rng.uniform(0.05, 0.2))
        finally:
            stop.set()
            killer.join(30)
        for m in ms.masters:
            if not m.daemon.alive():
                m.start()

        # A master killed between recording a job and answering the CLI has
        # a job the test was not told about: found in its job cache.
        known = {jid for _, jid, _, _ in published} | before
        for m in ms.masters:
            rc, out, err = m.brine("job", "list", "--limit", "100000")
            self.assertEqual(rc, 0, err)
            for jid in re.findall(r"(?m)^(\d{20})\s", out):
                if jid in known:
                    continue
                job = m.job(jid)
                text = json.dumps(job["args"])
                token = re.search(r"chaos-\d+-\d+", text)
                published.append((m, jid, token.group(0) if token else "untold-" + jid,
                                  job["fun"]))
                print("job %s on %s was recorded although its CLI saw the master die" % (jid,
                                                                                       m.name))

        # Every job settles: its deadline passes, the minions' spooled returns
        # reach their restarted masters, running jobs end. One bulk read of
        # each master's job cache a pass, not a CLI call per job.
        pending = {}
        settlement = {}

        def settled():
            pending.clear()
            settlement.clear()
            for m in ms.masters:
                rc, out, err = m.brine("job", "list", "--out", "json", "--limit", "100000")
                if rc != 0:
                    pending[m.name] = "job list: " + err.strip()
                    return False
                for job in json.loads(out):
                    settlement[(m.name, job["jid"])] = job
            for m, jid, token, fun in published:
                job = settlement.get((m.name, jid))
                if job is None:
                    pending[jid] = "not in the job cache of " + m.name
                elif job["running"]:
                    pending[jid] = "running on %s" % job["running"]
            return not pending

        try:
            wait_for(settled, HOLD + 60, "every job to be returned or undelivered")
        except AssertionError:
            raise AssertionError("unsettled jobs: %s" % dict(list(pending.items())[:10]))

        pairs = returned = 0
        reasons = collections.Counter()
        # token -> minion -> how many of the token's jobs that minion returned:
        # a token is in two jobs when a master recorded it and died before
        # answering the CLI, which then published it on the other master.
        returns_of = {}
        for m, jid, token, fun in published:
            job = settlement[(m.name, jid)]
            self.assertEqual(sorted(job["minions"]), MINIONS)
            rets, und = set(job["returned"]), set(job["undelivered"])
            self.assertFalse(rets & und, "job %s: both returned and undelivered: %s"
                             % (jid, rets & und))
            self.assertEqual(rets | und, set(MINIONS), "job %s: missing %s"
                             % (jid, set(MINIONS) - rets - und))
            pairs += len(MINIONS)
            returned += len(rets)
            reasons.update(job["undelivered"].values())
            for mid in rets:
                returns_of.setdefault(token, collections.Counter())[mid] += 1

        # What the minions ran: each token at most once per job of it that
        # has that minion's return, and only for such jobs.
        ran_total = 0
        for mid in MINIONS:
            path = os.path.join(ms.minion_dir(mid), "ran.txt")
            lines = []
            if os.path.exists(path):
                with open(path) as f:
                    lines = f.read().split()
            counts = collections.Counter(lines)
            for t, c in counts.items():
                self.assertIn(t, returns_of, "%s ran %s, a job no master admits to" % (mid, t))
                self.assertIn(mid, returns_of[t], "%s ran %s but its return is not stored"
                              % (mid, t))
                self.assertLessEqual(c, returns_of[t][mid],
                                     "%s ran %s %d times, more than the %d jobs of it with "
                                     "its return" % (mid, t, c, returns_of[t][mid]))
            ran_total += len(lines)

        print("chaos: %d jobs published (%d publishes refused while a master was down), "
              "%d master kills; %d (jid, minion) pairs: %d returns, %d undelivered %s; "
              "%d cmd.run executions, none twice"
              % (len(published), failed_cli, len(kills), pairs, returned, pairs - returned,
                 dict(reasons), ran_total))
        self.assertGreaterEqual(len(published), 200 if JOBS >= 220 else 1)
        # Several kills of each master.
        killed = collections.Counter(kills)
        self.assertTrue(all(killed[m.name] >= 2 for m in ms.masters), dict(killed))


if __name__ == "__main__":
    unittest.main()
