"""The shipped Prometheus alerts and Grafana dashboard name only metrics the
service exports (read from the metrics registry, no server started)."""

from __future__ import annotations

import json
import re

from helpers import ROOT

from watchdog.metrics import Metrics

DEPLOY = ROOT / "deploy"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_names() -> set[str]:
    """Every series name the service can export (labelled ones included)."""
    return {
        family.name + suffix
        for family in Metrics().registry.collect()
        for suffix in SUFFIXES[family.type]
    }


def test_alerts_and_dashboard_use_only_exported_metrics():
    exported = exported_names()
    texts = [(DEPLOY / "prometheus" / "alerts.yml").read_text()]
    dashboard = json.loads((DEPLOY / "grafana" / "afk-watchdog.json").read_text())
    texts += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for text in texts for m in re.findall(r"\bafk_[a-z_]+", text)}
    assert used, "no metrics found"
    assert used <= exported, used - exported
