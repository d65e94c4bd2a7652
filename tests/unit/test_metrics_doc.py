"""docs/metrics.md names every metric family the operator registers, and nothing it does not."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from controllers.backup.metrics import BackupMetrics
from controllers.cluster.metrics import ClusterMetrics
from valkey_operator.core.metrics import ControllerMetrics
from valkey_operator.core.workqueue.metrics import PrometheusQueueMetrics

DOC = Path(__file__).parents[2] / "docs" / "metrics.md"


def registered() -> set[str]:
    registry = CollectorRegistry()
    ControllerMetrics(registry)
    ClusterMetrics(registry)
    BackupMetrics(registry)
    queue = PrometheusQueueMetrics("example", registry)  # its in-flight gauges exist while it does
    names = {f"{f.name}_total" if f.type == "counter" else f.name for f in registry.collect()}
    del queue
    return names


def documented() -> set[str]:
    return set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), flags=re.MULTILINE))


def test_every_registered_metric_is_documented_and_nothing_else() -> None:
    assert registered() == documented()
