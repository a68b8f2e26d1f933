#!/usr/bin/env python3
"""Metrics: the master's Prometheus endpoint (metrics_port) scraped while jobs
run, every scrape read by a strict parser of the text format (0.0.4); bad
metrics options; the minion's own figures through status.metrics, asked
through the master and with brine call."""

import http.client
import json
import math
import os
import re
import socket
import subprocess
import time
import unittest

from harness import (BRINE_BIN, SLACK, Cluster, ClusterCase, free_port, tail, wait_for,
                     wait_log, write_config)

MINIONS = ["m1", "m2"]

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ExpositionError(AssertionError):
    pass


def parse_value(text, where):
    """A sample value as Prometheus reads it (Go's ParseFloat, plus the
    spellings +Inf, -Inf and NaN)."""
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        raise ExpositionError("%s: %r is not a number" % (where, text))
    return float(text)


def parse_labels(text, where):
    """`{a="x",b="y"}` (the braces stripped) into a dict; escapes \\\\, \\" and
    \\n only; a label named twice is an error."""
    labels = {}
    i = 0
    while i < len(text):
        m = re.compile(LABEL_NAME).match(text, i)
        if not m:
            raise ExpositionError("%s: bad label name at %r" % (where, text[i:]))
        name = m.group(0)
        i = m.end()
        if text[i:i + 2] != '="':
            raise ExpositionError("%s: label %s without =\"" % (where, name))
        i += 2
        value = []
        while True:
            if i >= len(text):
                raise ExpositionError("%s: label %s: unterminated value" % (where, name))
            c = text[i]
            if c == "\\":
                esc = text[i + 1:i + 2]
                if esc not in ("\\", '"', "n"):
                    raise ExpositionError("%s: label %s: bad escape \\%s" % (where, name, esc))
                value.append("\n" if esc == "n" else esc)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ExpositionError("%s: label %s: raw line feed" % (where, name))
            else:
                value.append(c)
                i += 1
        if name in labels:
            raise ExpositionError("%s: label %s twice" % (where, name))
        labels[name] = "".join(value)
        if i < len(text):
            if text[i] != ",":
                raise ExpositionError("%s: expected ',' after label %s" % (where, name))
            i += 1
    return labels


def parse_exposition(text):
    """Parses Prometheus text exposition strictly. Returns {family: {"type",
    "help", "samples": [(name, labels, value)]}}. Checks: the text ends with a
    line feed; each family has one HELP and one TYPE, before its samples, and
    its samples are together; sample names belong to their family (a
    histogram's _bucket, _sum, _count); no series twice; counters are
    non-negative and end in _total; a histogram's buckets are cumulative,
    sorted by le, end with le="+Inf" equal to _count, and come with _sum."""
    if not text.endswith("\n"):
        raise ExpositionError("the exposition does not end with a line feed")
    families = {}
    current = None
    closed = set()
    seen = set()

    def family_of(sample_name):
        if current is None:
            raise ExpositionError("sample %s before any # TYPE" % sample_name)
        f = families[current]
        if f["type"] == "histogram":
            allowed = {current + "_bucket", current + "_sum", current + "_count"}
        else:
            allowed = {current}
        if sample_name not in allowed:
            raise ExpositionError("sample %s inside family %s (%s)"
                                  % (sample_name, current, f["type"]))
        return f

    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d" % n
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (%s) (.*)" % NAME, line)
            if not m:
                raise ExpositionError("%s: a comment that is neither HELP nor TYPE: %r"
                                      % (where, line))
            kind, name, rest = m.groups()
            if name in closed:
                raise ExpositionError("%s: family %s again after other families" % (where, name))
            if name != current:
                if current is not None:
                    closed.add(current)
                current = name
                families.setdefault(name, {"type": None, "help": None, "samples": []})
            f = families[name]
            if f["samples"]:
                raise ExpositionError("%s: %s of %s after its samples" % (where, kind, name))
            if kind == "HELP":
                if f["help"] is not None:
                    raise ExpositionError("%s: second HELP of %s" % (where, name))
                if re.search(r"\\[^\\n]", rest.replace("\\\\", "")):
                    raise ExpositionError("%s: bad escape in HELP of %s" % (where, name))
                f["help"] = rest
            else:
                if f["type"] is not None:
                    raise ExpositionError("%s: second TYPE of %s" % (where, name))
                if rest not in TYPES:
                    raise ExpositionError("%s: unknown type %r of %s" % (where, rest, name))
                f["type"] = rest
            continue
        if not line:
            raise ExpositionError("%s: empty line" % where)
        m = re.fullmatch(r"(%s)(?:\{(.*)\})? (\S+)(?: (-?\d+))?" % NAME, line)
        if not m:
            raise ExpositionError("%s: not a sample: %r" % (where, line))
        name, label_text, value_text, _timestamp = m.groups()
        labels = parse_labels(label_text or "", where)
        value = parse_value(value_text, where)
        f = family_of(name)
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ExpositionError("%s: series %s%s twice" % (where, name, labels))
        seen.add(key)
        f["samples"].append((name, labels, value))

    for name, f in families.items():
        if f["type"] is None or f["help"] is None:
            raise ExpositionError("family %s lacks a TYPE or a HELP" % name)
        if f["type"] == "counter":
            if not name.endswith("_total"):
                raise ExpositionError("counter %s does not end in _total" % name)
            for s in f["samples"]:
                if not s[2] >= 0:
                    raise ExpositionError("counter %s is %r" % (name, s[2]))
        if f["type"] == "histogram":
            check_histogram(name, f["samples"])
    return families


def check_histogram(name, samples):
    series = {}
    for sample_name, labels, value in samples:
        rest = {k: v for k, v in labels.items() if k != "le"}
        key = tuple(sorted(rest.items()))
        s = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sample_name == name + "_bucket":
            if "le" not in labels:
                raise ExpositionError("%s_bucket%s without le" % (name, labels))
            s["buckets"].append((parse_value(labels["le"], name + " le"), value))
        elif sample_name == name + "_sum":
            s["sum"] = value
        else:
            s["count"] = value
    for key, s in series.items():
        where = "%s%s" % (name, dict(key))
        if s["sum"] is None or s["count"] is None or not s["buckets"]:
            raise ExpositionError("%s: lacks _sum, _count or buckets" % where)
        les = [le for le, _ in s["buckets"]]
        if les != sorted(les) or len(set(les)) != len(les):
            raise ExpositionError("%s: buckets not in increasing le order: %r" % (where, les))
        if les[-1] != math.inf:
            raise ExpositionError("%s: no le=\"+Inf\" bucket last" % where)
        counts = [c for _, c in s["buckets"]]
        if any(b < a for a, b in zip(counts, counts[1:])):
            raise ExpositionError("%s: buckets not cumulative: %r" % (where, counts))
        if counts[-1] != s["count"]:
            raise ExpositionError("%s: +Inf bucket %r != _count %r" % (where, counts[-1],
                                                                      s["count"]))


def value(families, name, **labels):
    """The value of one series (0 when the family has no such series)."""
    for sample_name, l, v in families[name]["samples"]:
        if sample_name == name and l == labels:
            return v
    raise AssertionError("no series %s%s in %r" % (name, labels, families[name]["samples"]))


def histogram_count(families, name, **labels):
    for sample_name, l, v in families[name]["samples"]:
        if sample_name == name + "_count" and l == labels:
            return v
    raise AssertionError("no histogram %s%s" % (name, labels))


class StrictParser(unittest.TestCase):
    """The parser itself refuses what Prometheus would (a test that passes on
    anything checks nothing)."""

    GOOD = ("# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"q\\\"\\\\\\n\"} 1\n"
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
            "h_sum 3.5\nh_count 2\n")

    def test_accepts_good_text(self):
        f = parse_exposition(self.GOOD)
        self.assertEqual(f["a_total"]["samples"][0][1], {"x": "q\"\\\n"})

    def test_refuses_bad_text(self):
        bad = [
            self.GOOD[:-1],                                              # no final line feed
            self.GOOD.replace("h_count 2", "h_count 3"),                 # +Inf != count
            self.GOOD.replace('h_bucket{le="+Inf"} 2\n', ""),            # no +Inf
            self.GOOD.replace('le="1"} 1', 'le="1"} 5'),                 # not cumulative
            self.GOOD.replace("a_total{", "a_total{x=\"1\",x=\"2\",y=\"z\"} 1\na_total{"),
            self.GOOD.replace('\\"', '"'),                               # unescaped quote
            self.GOOD.replace("\\\\", "\\t"),                            # bad escape
            self.GOOD.replace("} 1\n# HELP h", "} one\n# HELP h"),       # not a number
            self.GOOD + "a_total{y=\"1\"} 1\n",                          # family split
            self.GOOD.replace("# TYPE a_total counter\n", ""),           # no TYPE
            self.GOOD.replace("counter", "countr"),
            "# TYPE b counter\n# HELP b B.\nb 1\n",                      # counter without _total
            self.GOOD + "\n",                                            # empty line
            self.GOOD.replace("h_sum 3.5\n", ""),                        # no _sum
        ]
        for text in bad:
            self.assertNotEqual(text, self.GOOD)
            with self.assertRaises(ExpositionError, msg=repr(text)):
                parse_exposition(text)


def scrape(port, path="/metrics", method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10 * SLACK)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8")
    finally:
        conn.close()


class MasterEndpoint(ClusterCase):
    """One master with metrics_port on loopback and two minions."""

    MINIONS = MINIONS

    @classmethod
    def before_start(cls):
        cls.metrics_port = free_port()
        cls.c.configure(metrics_port=cls.metrics_port)

    def figures(self):
        status, headers, body = scrape(self.metrics_port)
        self.assertEqual(status, 200, body)
        self.assertEqual(headers.get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        families = parse_exposition(body)
        for name in families:
            self.assertTrue(name.startswith("brine_"), name)
        return families

    def test_served_on_loopback(self):
        wait_log(self.c.master, r"metrics on http://127\.0\.0\.1:%d/metrics" % self.metrics_port, 10)
        # Not on another address of this host (the default interface is 127.0.0.1).
        addrs = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
        addrs.discard("127.0.0.1")
        addrs = {a for a in addrs if not a.startswith("127.")}
        for a in addrs:
            with socket.socket() as s:
                s.settimeout(2)
                self.assertNotEqual(s.connect_ex((a, self.metrics_port)), 0,
                                    "the endpoint answers on %s" % a)

    def test_scrape_during_a_job_moves_the_counters(self):
        before = self.figures()
        self.assertEqual(value(before, "brine_connected_minions"), len(MINIONS))
        self.assertEqual(value(before, "brine_keys", state="accepted"), len(MINIONS))
        self.assertEqual(value(before, "brine_keys", state="pending"), 0)
        self.assertGreaterEqual(value(before, "brine_key_signups_total", state="pending"),
                                len(MINIONS))
        self.assertGreaterEqual(value(before, "brine_handshakes_total", result="ok"), len(MINIONS))
        self.assertEqual(value(before, "brine_handshakes_in_flight"), 0)
        published = value(before, "brine_jobs_published_total")
        returns = value(before, "brine_returns_received_total")
        latency = histogram_count(before, "brine_publish_return_latency_seconds")

        # A job that runs for a while: scraped while it runs, then after.
        rc, out, err = self.c.brine("cmd", "--async", "*", "test.sleep", "3")
        self.assertEqual(rc, 0, out + err)
        jid = re.search(r"job ID: (\d+)", out).group(1)
        during = self.figures()
        self.assertEqual(value(during, "brine_jobs_published_total"), published + 1)
        self.assertEqual(value(during, "brine_connected_minions"), len(MINIONS))

        def returned():
            f = self.figures()
            return f if value(f, "brine_returns_received_total") >= returns + len(MINIONS) else None

        after = wait_for(returned, 30 * SLACK, "job %s's returns in brine_returns_received_total"
                         % jid)
        self.assertEqual(value(after, "brine_returns_received_total"), returns + len(MINIONS))
        self.assertEqual(histogram_count(after, "brine_publish_return_latency_seconds"),
                         latency + len(MINIONS))
        # Each of those returns came at least 3 s after its publish.
        buckets = {l["le"]: v for n, l, v in after["brine_publish_return_latency_seconds"]["samples"]
                   if n.endswith("_bucket")}
        before_buckets = {l["le"]: v for n, l, v in
                          before["brine_publish_return_latency_seconds"]["samples"]
                          if n.endswith("_bucket")}
        self.assertEqual(buckets["2.5"], before_buckets["2.5"])
        self.assertEqual(value(after, "brine_held_publishes"), 0)
        # The returns were stored: the store's add_returns was timed.
        self.assertGreater(histogram_count(after, "brine_store_operation_duration_seconds",
                                           op="add_returns"), 0)

    def test_state_runs_and_the_file_server_are_counted(self):
        before = self.figures()
        changed = histogram_count(before, "brine_state_run_duration_seconds", status="changed")
        failed = histogram_count(before, "brine_state_run_duration_seconds", status="failed")
        unchanged = histogram_count(before, "brine_state_run_duration_seconds", status="unchanged")
        requests = value(before, "brine_fileserver_requests_total")
        # A run that changes something, and one that fails: its sls is not in
        # the master's file server (asked for it, which is a request).
        rc, out, err = self.c.brine("cmd", "m1", "state.single", "test.succeed_with_changes",
                                    "name=metrics", timeout=60)
        self.assertEqual(rc, 0, out + err)
        rc, out, err = self.c.brine("cmd", "m1", "state.sls", "nothing_here", timeout=60)
        self.assertNotEqual(rc, 0, out + err)

        def counted():
            f = self.figures()
            ok = (histogram_count(f, "brine_state_run_duration_seconds", status="failed") > failed
                  and histogram_count(f, "brine_state_run_duration_seconds", status="changed")
                  > changed)
            return f if ok else None

        after = wait_for(counted, 30 * SLACK, "both state runs in the master's figures")
        self.assertEqual(histogram_count(after, "brine_state_run_duration_seconds",
                                         status="changed"), changed + 1)
        self.assertEqual(histogram_count(after, "brine_state_run_duration_seconds",
                                         status="failed"), failed + 1)
        self.assertEqual(histogram_count(after, "brine_state_run_duration_seconds",
                                         status="unchanged"), unchanged)
        self.assertGreater(value(after, "brine_fileserver_requests_total"), requests)
        # The minion timed the same runs.
        rc, out, err = self.c.brine("cmd", "--out", "json", "m1", "status.metrics",
                                    "format=prometheus")
        self.assertEqual(rc, 0, out + err)
        mine = parse_exposition(json.loads(out)["m1"])
        self.assertGreaterEqual(histogram_count(mine, "brine_minion_state_run_duration_seconds",
                                                status="changed"), 1)
        self.assertGreaterEqual(histogram_count(mine, "brine_minion_state_run_duration_seconds",
                                                status="failed"), 1)

    def test_pillar_compiles_are_timed(self):
        f = self.figures()
        # Each minion's pillar was compiled when its grains arrived.
        self.assertGreaterEqual(histogram_count(f, "brine_compile_duration_seconds",
                                                kind="pillar"), len(MINIONS))

    def test_other_paths_and_methods(self):
        status, _, body = scrape(self.metrics_port, "/")
        self.assertEqual(status, 404, body)
        self.assertIn("/metrics", body)
        status, headers, _ = scrape(self.metrics_port, "/metrics", "POST")
        self.assertEqual(status, 405)
        self.assertEqual(headers.get("Allow"), "GET, HEAD")
        status, _, body = scrape(self.metrics_port, "/metrics", "HEAD")
        self.assertEqual((status, body), (200, ""))

    def test_minion_figures_through_the_master(self):
        rc, out, err = self.c.brine("cmd", "--out", "json", "m1", "status.metrics")
        self.assertEqual(rc, 0, out + err)
        ret = json.loads(out)["m1"]
        self.assertEqual(ret["source"], "daemon")
        figures = ret["figures"]
        self.assertGreaterEqual(figures["brine_minion_master_connections_total"], 1)
        self.assertGreaterEqual(figures["brine_minion_publishes_received_total"], 1)
        self.assertIn("brine_minion_spool_bytes", figures)
        self.assertIn("brine_minion_returns_sent_total", figures)
        rc, out, err = self.c.brine("cmd", "--out", "json", "m1", "status.metrics",
                                    "format=prometheus")
        self.assertEqual(rc, 0, out + err)
        text = json.loads(out)["m1"]
        families = parse_exposition(text)
        self.assertIn("brine_minion_state_run_duration_seconds", families)
        self.assertGreaterEqual(value(families, "brine_minion_jobs_run_total"), 1)

    def test_minion_figures_with_brine_call(self):
        conf = os.path.join(self.c.minion_dir("m2"), "minion.conf")
        rc, out, err = self.c.brine("cmd", "m2", "test.ping")
        self.assertEqual(rc, 0, out + err)
        copy = os.path.join(self.c.minion_dir("m2"), "cache", "metrics.json")

        def sent_in_copy():
            try:
                with open(copy) as f:
                    figures = json.load(f)["figures"]
            except (OSError, ValueError):
                return False
            return figures["brine_minion_returns_sent_total"] >= 1

        # The daemon rewrites its copy every 10 s when a figure moved.
        wait_for(sent_in_copy, 25 * SLACK, "m2's copy of its figures with a return sent")
        p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--out", "json", "status.metrics"],
                           capture_output=True, text=True, timeout=60 * SLACK,
                           cwd=self.c.minion_dir("m2"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        ret = json.loads(p.stdout)["local"]
        self.assertEqual(ret["source"], "copy")
        self.assertGreaterEqual(ret["age_seconds"], 0)
        self.assertLess(ret["age_seconds"], 60 * SLACK)
        self.assertGreaterEqual(ret["figures"]["brine_minion_returns_sent_total"], 1)
        p = subprocess.run([BRINE_BIN, "call", "-c", conf, "--out", "json", "status.metrics",
                            "format=yaml"], capture_output=True, text=True, timeout=60 * SLACK,
                           cwd=self.c.minion_dir("m2"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("format must be json or prometheus, got 'yaml'", p.stdout + p.stderr)


class BadConfig(unittest.TestCase):

    def test_port_out_of_range_names_the_option(self):
        for bad in ("70000", "-1", "metrics"):
            c = Cluster(master_opts={"metrics_port": 9100}, start=False)
            try:
                with open(c.config) as f:
                    text = f.read().replace("metrics_port: 9100", "metrics_port: " + bad)
                with open(c.config, "w") as f:
                    f.write(text)
                rc, out, err = c.brine("master", "--check-config")
                self.assertEqual(rc, 1, out + err)
                self.assertIn("metrics_port must be an integer 0..65535, got %s" % bad, out + err)
            finally:
                c.abort()

    def test_interface_must_be_an_address(self):
        c = Cluster(master_opts={"metrics_port": 9100, "metrics_interface": "localhost"},
                    start=False)
        try:
            rc, out, err = c.brine("master", "--check-config")
            self.assertEqual(rc, 1, out + err)
            self.assertIn("metrics_interface must be an IPv4 or IPv6 address", out + err)
        finally:
            c.abort()

    def test_port_in_use_stops_the_master_naming_the_option(self):
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen(1)
            port = busy.getsockname()[1]
            c = Cluster(master_opts={"metrics_port": port}, start=False)
            try:
                c.master.start()
                rc = c.master.wait_exit(30 * SLACK)
                self.assertNotEqual(rc, 0)
                log = c.master.log()
                self.assertIn("metrics_port %d: cannot listen on 127.0.0.1:%d: Address already in "
                              "use; set metrics_port in %s to a free port (0: off)"
                              % (port, port, c.config), log, tail(log))
            finally:
                c.abort()

    def test_off_by_default(self):
        c = Cluster()
        try:
            self.assertNotRegex(c.master.log(), r"metrics on http")
        finally:
            c.stop()


if __name__ == "__main__":
    unittest.main()
