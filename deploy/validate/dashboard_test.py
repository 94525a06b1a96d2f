"""The Grafana dashboard deploy/grafana/tandem.json against a live coordinator.

Starts a small local cluster with the bundled model pair (`tandem up`: coordinator,
draft worker, 2-rank target group), sends one speculative request with a fixed K and
one adaptive request that the coordinator's --speculation_max_batch=0 turns into
fallback steps, reads the coordinator's /metrics, and checks that every metric the
dashboard queries is exported, with every label value it selects. Also checks the
dashboard's structure (ids, layout, datasource, the topics it must cover) and that the
checker itself catches a misspelled metric or label.
Standalone: /usr/bin/python3 deploy/validate/dashboard_test.py --bin-dir bazel-bin
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from typing import Dict, List, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.dirname(HERE)
DASHBOARD = os.path.join(DEPLOY, "grafana", "tandem.json")
BIN_DIR = None  # Set in main().

METRIC = re.compile(r"\b(tandem_[a-z0-9_]+)\b")
# name{label="value", ...}: exact-match label selectors only.
SELECTOR = re.compile(r"\b(tandem_[a-z0-9_]+)\{([^}]*)\}")
LABEL = re.compile(r'([a-z_]+)="([^"]*)"')
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ", re.M)


def dashboard_queries(dashboard: dict) -> List[Tuple[str, str]]:
    """(panel title, PromQL expression) of every query of every panel."""
    out = []
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            out.append((panel.get("title", "?"), target.get("expr", "")))
    return out


def exported_samples(text: str) -> Dict[str, List[Dict[str, str]]]:
    """Prometheus text format: sample name -> the label sets it is exported with."""
    samples: Dict[str, List[Dict[str, str]]] = {}
    for name, labels in SAMPLE.findall(text):
        samples.setdefault(name, []).append(dict(LABEL.findall(labels or "")))
    return samples


def problems(queries: List[Tuple[str, str]], samples: Dict[str, List[Dict[str, str]]]) -> List[str]:
    """What the queries ask for that the metrics do not export: unknown metric names,
    and label values a selector names that no sample of that metric carries."""
    out = []
    for title, expr in queries:
        for name in sorted(set(METRIC.findall(expr))):
            if name not in samples:
                out.append(f"panel '{title}': {name} is not in /metrics")
        for name, selector in SELECTOR.findall(expr):
            for label, value in LABEL.findall(selector):
                if not any(s.get(label) == value for s in samples.get(name, [])):
                    out.append(f"panel '{title}': no {name} sample with {label}=\"{value}\"")
    return out


def binary(path: str) -> str:
    return os.path.join(BIN_DIR, path)


def models_dir() -> str:
    """The bundled models: the runfiles' models/ or, standalone, the repository's."""
    return os.path.join(os.path.dirname(DEPLOY), "models")


class LiveCluster:
    """`tandem up` with the bundled pair on free ports, torn down by stop()."""

    def __init__(self, work: str):
        models = models_dir()
        config = {
            "host": "127.0.0.1",
            "target": {"model": os.path.join(models, "target"), "tp": 2, "comm": "tcp",
                       "backend": "cpu", "threads": 1, "kv_cache_mb": 64},
            "draft": {"model": os.path.join(models, "draft"), "backend": "cpu", "threads": 1,
                      "kv_cache_mb": 64},
            # 0: every adaptive-K step of a running sequence is a batch_limit fallback.
            "coordinator": {"port": 0, "metrics_port": 0, "rendezvous_port": 0,
                            "args": ["--speculation_max_batch=0"]},
            "startup_timeout_s": 120,
        }
        config_path = os.path.join(work, "cluster.json")
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        self.ready = os.path.join(work, "ready")
        self.log = open(os.path.join(work, "up.log"), "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [binary("client/tandem"), "up", "--config", config_path, "--ready-file", self.ready,
             "--log-dir", os.path.join(work, "logs"),
             "--coordinator-bin", binary("coordinator/tandem-coordinator"),
             "--worker-bin", binary("worker/tandem-worker")],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.endpoint, self.metrics = self._wait_ready(120)

    def _wait_ready(self, timeout_s: float) -> Tuple[str, str]:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tandem up exited with {self.proc.returncode}; see {self.log.name}")
            if os.path.exists(self.ready):
                with open(self.ready, encoding="utf-8") as f:
                    lines = f.read().splitlines()
                metrics = [l.split("=", 1)[1] for l in lines if l.startswith("metrics=")]
                if lines and metrics:
                    return lines[0], metrics[0]
            time.sleep(0.2)
        raise RuntimeError(f"cluster not ready after {timeout_s} s; see {self.log.name}")

    def generate(self, *flags: str) -> str:
        proc = subprocess.run([binary("client/tandem"), "generate", "--server", self.endpoint,
                               "--max-tokens", "24", "--temperature", "0", *flags,
                               "def fibonacci(n):"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"tandem generate {' '.join(flags)} failed: {proc.stderr}")
        return proc.stderr

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as r:
            return r.read().decode("utf-8")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class DashboardStructureTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD, encoding="utf-8") as f:
            cls.dashboard = json.load(f)

    def test_panels_ids_layout_and_datasource(self):
        panels = self.dashboard["panels"]
        ids = [p["id"] for p in panels]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")
        cells: Set[Tuple[int, int]] = set()
        for p in panels:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                    for y in range(g["y"], g["y"] + g["h"])}
            self.assertFalse(cells & mine, f"panel '{p['title']}' overlaps another")
            cells |= mine
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
            self.assertTrue(p["targets"], f"panel '{p['title']}' has no query")
            for t in p["targets"]:
                self.assertEqual(t["expr"].count("("), t["expr"].count(")"), t["expr"])
        variables = [v["name"] for v in self.dashboard["templating"]["list"]]
        self.assertIn("datasource", variables)

    def test_covers_the_required_topics(self):
        exprs = " ".join(e for _, e in dashboard_queries(self.dashboard))
        for needed in ["tandem_position_accepted_total", "tandem_position_proposed_total",
                       "tandem_speculation_steps_total", "tandem_generated_tokens_total",
                       "tandem_step_latency_ms_sum", "tandem_queue_depth",
                       "tandem_kv_blocks_used", "tandem_kv_blocks_total",
                       "tandem_fallback_steps_total"]:
            self.assertIn(needed, exprs)
        self.assertIn("by (phase)", exprs)
        self.assertIn("by (position)", exprs)

    def test_checker_catches_unknown_metrics_and_labels(self):
        samples = exported_samples('tandem_a_total{phase="draft"} 1\ntandem_b 2\n')
        self.assertEqual(problems([("p", 'rate(tandem_a_total{phase="draft"}[1m]) + tandem_b')],
                                  samples), [])
        self.assertEqual(len(problems([("p", "tandem_c")], samples)), 1)
        self.assertEqual(len(problems([("p", 'tandem_a_total{phase="verify"}')], samples)), 1)


class DashboardLiveMetricsTest(unittest.TestCase):
    def test_every_queried_metric_is_exported(self):
        with tempfile.TemporaryDirectory(prefix="tandem-dashboard-") as work:
            cluster = LiveCluster(work)
            try:
                cluster.generate("--method", "draft", "--k", "3")
                stats = cluster.generate("--method", "draft")
                # The workers' KV gauges appear with the coordinator's first worker-stats
                # refresh (once a second): wait for it rather than race it.
                deadline = time.monotonic() + 15
                text = cluster.scrape()
                while "tandem_kv_blocks_total" not in text and time.monotonic() < deadline:
                    time.sleep(0.2)
                    text = cluster.scrape()
            finally:
                cluster.stop()
        self.assertIn("spec_off=batch_limit", stats)  # the fallback series is live, too
        with open(DASHBOARD, encoding="utf-8") as f:
            queries = dashboard_queries(json.load(f))
        found = problems(queries, exported_samples(text))
        self.assertEqual(found, [], "\n".join(found))


def main():
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", help="directory with coordinator/, worker/, client/ binaries "
                        "(default: the Bazel runfiles)")
    args, rest = parser.parse_known_args()
    if args.bin_dir:
        BIN_DIR = args.bin_dir
    else:
        BIN_DIR = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
