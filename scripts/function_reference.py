#!/usr/bin/env python3
"""Prints docs/functions.md: the reference of brine's execution functions,
generated from their sys.doc text (brine call --local sys.doc).

    python3 scripts/function_reference.py build/debug/src/app/brine > docs/functions.md

tests/integration/test_docs.py checks that the committed file is current."""

import json
import os
import subprocess
import sys
import tempfile


def docs(brine):
    with tempfile.TemporaryDirectory(prefix="brine-doc-") as d:
        conf = os.path.join(d, "minion.conf")
        with open(conf, "w") as f:
            f.write("id: docs\npki_dir: pki\ncachedir: cache\n"
                    "pillar_roots: {base: [%s]}\n" % json.dumps(os.path.join(d, "pillar")))
        p = subprocess.run([brine, "call", "--local", "-c", conf, "--out", "json", "sys.doc"],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            sys.exit("brine call sys.doc failed: %s" % p.stderr)
        return json.loads(p.stdout)["local"]


def render(funcs):
    modules = {}
    for name in sorted(funcs):
        modules.setdefault(name.split(".")[0], []).append(name)
    out = ["# Execution functions", "",
           "Generated from `sys.doc` by `scripts/function_reference.py`; do not edit by hand.",
           "Run any of them with `brine cmd TARGET FUNCTION ARGS` or `brine call FUNCTION ARGS`;",
           "`brine cmd '*' sys.doc MODULE` prints the same text.", ""]
    out.append(" · ".join("[%s](#%s)" % (m, m) for m in modules))
    for mod, names in modules.items():
        out += ["", "## %s" % mod, ""]
        for name in names:
            text = funcs[name].strip()
            summary, _, rest = text.partition("\n")
            out += ["### %s" % name, "", summary.strip(), ""]
            for line in rest.strip("\n").splitlines():
                line = line.strip()
                if line.lower().startswith("cli example:"):
                    out += ["```", line[len("CLI example:"):].strip(), "```", ""]
                elif line:
                    out += [line, ""]
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.stdout.write(render(docs(sys.argv[1])))
