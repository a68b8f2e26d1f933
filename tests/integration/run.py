#!/usr/bin/env python3
"""Runs one integration suite (a test_*.py module) as CTest does: verbose
unittest output, exit status 0 only if every test passed, and a record of
each test (outcome, seconds, the reason of a skip) written as JSON to
$BRINE_TEST_RESULTS/integration.SUITE.json for tests/summary.py.

Usage: run.py SUITE   (e.g. run.py jobs for test_jobs.py)"""

import json
import os
import sys
import time
import unittest


class RecordingResult(unittest.TextTestResult):
    """A TextTestResult that also keeps (name, outcome, seconds, detail)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []
        self._started = {}

    def startTest(self, test):
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        began = self._started.pop(test.id(), None)
        seconds = time.monotonic() - began if began is not None else 0.0
        self.records.append({"name": test.id(), "outcome": outcome, "seconds": round(seconds, 3),
                             "detail": detail})

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        # An error in setUpClass is reported against a _ErrorHolder, not a test.
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    suite_name = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    suite = unittest.defaultTestLoader.loadTestsFromName("test_" + suite_name)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=RecordingResult)
    result = runner.run(suite)
    out_dir = os.environ.get("BRINE_TEST_RESULTS")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "integration.%s.json" % suite_name), "w") as f:
            json.dump({"suite": "integration." + suite_name, "tests": result.records}, f, indent=1)
    ok = result.wasSuccessful() and result.testsRun > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
