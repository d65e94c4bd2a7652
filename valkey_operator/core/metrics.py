"""Controller metrics under controller-runtime's names, so existing dashboards work.

One `ControllerMetrics` per registry; controllers label by their name.
Workqueue metrics live beside the queue (`workqueue/metrics.py`).
"""

from __future__ import annotations

import weakref

from prometheus_client import REGISTRY, CollectorRegistry

from valkey_operator.core.loopmetrics import CounterFamily, GaugeFamily, HistogramFamily

# controller-runtime's reconcile-time buckets.
RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip

RESULTS = ("success", "error", "requeue", "requeue_after")


class ControllerMetrics:
    """The controller_runtime_* and leader_election_* families of one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reconcile_total = CounterFamily(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=registry,
        )
        self.reconcile_errors = CounterFamily(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.terminal_reconcile_errors = CounterFamily(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_time = HistogramFamily(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_TIME_BUCKETS,
            registry=registry,
        )
        self.active_workers = GaugeFamily(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=registry,
        )
        self.max_concurrent_reconciles = GaugeFamily(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=registry,
        )
        self.leader_election_master_status = GaugeFamily(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=registry,
        )

    def init_controller(self, controller: str, workers: int) -> None:
        """Expose every series of a controller at zero before its first reconcile."""
        for result in RESULTS:
            self.reconcile_total.labels(controller=controller, result=result)
        self.reconcile_errors.labels(controller=controller)
        self.terminal_reconcile_errors.labels(controller=controller)
        self.active_workers.labels(controller=controller).set(0)
        self.max_concurrent_reconciles.labels(controller=controller).set(workers)


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, ControllerMetrics] = weakref.WeakKeyDictionary()


def controller_metrics(registry: CollectorRegistry = REGISTRY) -> ControllerMetrics:
    """The metric families of registry, created on first use (a family registers once)."""
    metrics = _by_registry.get(registry)
    if metrics is None:
        metrics = _by_registry[registry] = ControllerMetrics(registry)
    return metrics
