#!/usr/bin/env python3
"""docs/functions.md is what scripts/function_reference.py generates from the
built binary's sys.doc: a new or changed function shows up as a difference."""

import os
import subprocess
import sys
import unittest

from harness import BRINE_BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


if __name__ == "__main__":
    unittest.main()
