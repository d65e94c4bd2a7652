"""docs/metrics.md names every metric family the operator registers, and nothing it does not."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from controllers.backup.metrics import BackupMetrics
from controllers.cluster.metrics import ClusterMetrics
from controllers.cluster.valkey_exporter import ValkeyExporter
from controllers.cluster.valkey_exposition import render
from controllers.cluster.valkey_series import FIELDS, node_samples
from valkey_operator.core.metrics import ControllerMetrics
from valkey_operator.core.workqueue.metrics import PrometheusQueueMetrics
from valkey_operator.valkey.admin import parse_info

DOC = Path(__file__).parents[2] / "docs" / "metrics.md"
INFO = Path(__file__).parent / "data" / "valkey_info"


def node_families() -> set[str]:
    """Every redis_* family the exporter renders: a primary and a replica as captured from
    valkey-server 9.1.2, with every field of the name table present."""
    nodes = []
    for role in ("primary", "replica"):
        info = parse_info((INFO / f"valkey_9.1.2_{role}_info.txt").read_text())
        cluster_info = parse_info((INFO / f"valkey_9.1.2_{role}_cluster_info.txt").read_text())
        every = {**dict.fromkeys(FIELDS, "0"), **info}
        nodes.append((("ns", "c", "0", role), node_samples(every, cluster_info, 0.0)))
    text = render(nodes).decode()
    return {
        f"{f.name}_total" if f.type == "counter" else f.name for f in text_string_to_metric_families(text)
    }


def registered() -> set[str]:
    registry = CollectorRegistry()
    ControllerMetrics(registry)
    ClusterMetrics(registry)
    BackupMetrics(registry)
    registry.register(ValkeyExporter())  # its own gauges; the redis_* families are rendered text
    queue = PrometheusQueueMetrics("example", registry)  # its in-flight gauges exist while it does
    names = {f"{f.name}_total" if f.type == "counter" else f.name for f in registry.collect()}
    del queue
    return names | node_families()


def documented() -> set[str]:
    return set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), flags=re.MULTILINE))


def test_every_registered_metric_is_documented_and_nothing_else() -> None:
    assert registered() == documented()
