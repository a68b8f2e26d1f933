#!/usr/bin/env python3
"""After a CTest run: the slowest entries and tests, every skipped test with
its reason, and one closing count of single tests (unit tests' gtest cases
and integration tests' unittest cases), as

    tests: N passed, N failed, N skipped

With BRINE_TEST_SECONDS (the test phase's wall time, set by scripts/test.sh)
it first prints that time against the phase's budget.

Reads BUILD/test-results/: ctest.xml (CTest's --output-junit), unit.*.xml
(each gtest binary's --gtest_output) and integration.*.json (run.py's).
An entry that CTest ran and that left no results of its own (it crashed, or
timed out) counts as one failed test. Exit status: 0, it only reports.

Usage: summary.py BUILD_DIR"""

import glob
import json
import os
import sys
import xml.etree.ElementTree as ET

# The test phase's budget (issue 34: ctest in at most 8 minutes on 2 cores).
TEST_BUDGET_SECONDS = 480


def gtest_results(path):
    """(entry, [(test name, outcome, seconds, detail)]) of one gtest XML file."""
    entry = os.path.basename(path)[:-len(".xml")]
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = "%s.%s" % (case.get("classname"), case.get("name"))
        seconds = float(case.get("time") or 0)
        failure = case.find("failure")
        skipped = case.find("skipped")
        if failure is not None:
            tests.append((name, "failed", seconds, failure.get("message", "")))
        elif skipped is not None or case.get("result") == "skipped":
            reason = skipped.get("message", "") if skipped is not None else ""
            tests.append((name, "skipped", seconds, reason))
        elif case.get("status") == "notrun":
            continue  # DISABLED_ tests
        else:
            tests.append((name, "passed", seconds, ""))
    return entry, tests


def integration_results(path):
    with open(path) as f:
        data = json.load(f)
    return data["suite"], [(t["name"], t["outcome"], t["seconds"], t["detail"])
                           for t in data["tests"]]


def ctest_entries(path):
    """{entry: (status, seconds)} from CTest's JUnit file."""
    entries = {}
    if not os.path.exists(path):
        return entries
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None:
            status = "fail"
        entries[case.get("name")] = (status, float(case.get("time") or 0))
    return entries


def skip_reason(detail):
    # gtest's message is "file:line\nReason"; keep the reason.
    lines = [l for l in detail.strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no reason given)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    results_dir = os.path.join(sys.argv[1], "test-results")
    entries = ctest_entries(os.path.join(results_dir, "ctest.xml"))
    per_entry = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "unit.*.xml"))):
        entry, tests = gtest_results(path)
        per_entry[entry] = tests
    for path in sorted(glob.glob(os.path.join(results_dir, "integration.*.json"))):
        entry, tests = integration_results(path)
        per_entry[entry] = tests
    # Results left by an earlier run of an entry that did not run now are not counted.
    if entries:
        per_entry = {e: t for e, t in per_entry.items() if e in entries}
    for entry, (status, seconds) in entries.items():
        if status == "fail" and not any(o == "failed" for _, o, _, _ in per_entry.get(entry, [])):
            per_entry.setdefault(entry, []).append(
                (entry, "failed", seconds, "the entry failed outside its tests (crash or timeout)"))

    wall = os.environ.get("BRINE_TEST_SECONDS")
    if wall:
        seconds = int(wall)
        print("\nTest phase: %d s of its %d s budget (%s)"
              % (seconds, TEST_BUDGET_SECONDS,
                 "within" if seconds <= TEST_BUDGET_SECONDS else
                 "OVER by %d s" % (seconds - TEST_BUDGET_SECONDS)))
    if entries:
        print("\nTen slowest suites (CTest entries):")
        for name, (status, seconds) in sorted(entries.items(), key=lambda kv: -kv[1][1])[:10]:
            print("  %7.1f s  %s%s" % (seconds, name, "" if status == "run" else "  (%s)" % status))
    singles = [(seconds, entry, name) for entry, tests in per_entry.items()
               for name, outcome, seconds, _ in tests]
    if singles:
        print("Slowest single tests:")
        for seconds, entry, name in sorted(singles, reverse=True)[:10]:
            print("  %7.1f s  %s: %s" % (seconds, entry, name))

    counts = {"passed": 0, "failed": 0, "skipped": 0}
    skipped, failed = [], []
    for entry, tests in sorted(per_entry.items()):
        for name, outcome, _, detail in tests:
            counts[outcome] += 1
            if outcome == "skipped":
                skipped.append("  %s: %s: %s" % (entry, name, skip_reason(detail)))
            elif outcome == "failed":
                failed.append("  %s: %s" % (entry, name))
    if skipped:
        print("Skipped, with what each needs:")
        print("\n".join(skipped))
    if failed:
        print("Failed:")
        print("\n".join(failed))
    print("tests: %d passed, %d failed, %d skipped"
          % (counts["passed"], counts["failed"], counts["skipped"]))


if __name__ == "__main__":
    main()
