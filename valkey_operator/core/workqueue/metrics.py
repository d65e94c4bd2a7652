"""Workqueue metrics hooks, and their Prometheus implementation with controller-runtime's names.

The queue only calls the :class:`QueueMetrics` hooks; what is measured and where it
goes is the implementation's business (as client-go's ``queueMetrics``). Dashboards
and alerts written for controller-runtime operators work unchanged against
:class:`PrometheusQueueMetrics`.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterable
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from valkey_operator.core.clock import Clock, RealClock
from valkey_operator.core.loopmetrics import CounterFamily, GaugeFamily, HistogramFamily

__all__ = [
    "DURATION_BUCKETS",
    "ItemTimings",
    "NoopQueueMetrics",
    "PrometheusQueueMetrics",
    "QueueMetrics",
]

# controller-runtime: prometheus.ExponentialBuckets(10e-9, 10, 12) == 1e-8 .. 1e3.
DURATION_BUCKETS: tuple[float, ...] = tuple(10.0**exponent for exponent in range(-8, 4))


class QueueMetrics(Protocol):
    """Hooks a queue calls; every call happens on the event loop, so no locking."""

    def add(self, item: Hashable) -> None:
        """An item entered the queue (not called for a deduplicated add)."""
        ...

    def get(self, item: Hashable) -> None:
        """A worker took the item: it left the queue and its processing started."""
        ...

    def done(self, item: Hashable) -> None:
        """The worker finished processing the item."""
        ...

    def retry(self) -> None:
        """An item was scheduled with a delay (``add_after``, hence every rate-limited requeue)."""
        ...

    def unfinished_work_seconds(self) -> float:
        """Sum over in-flight items of how long they have been processed so far."""
        ...

    def longest_running_processor_seconds(self) -> float:
        """How long the oldest in-flight item has been processed."""
        ...


class NoopQueueMetrics:
    """The default: a queue with no observer costs nothing."""

    def add(self, item: Hashable) -> None:
        pass

    def get(self, item: Hashable) -> None:
        pass

    def done(self, item: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass

    def unfinished_work_seconds(self) -> float:
        return 0.0

    def longest_running_processor_seconds(self) -> float:
        return 0.0


class ItemTimings:
    """When each queued item was added and when each in-flight item started.

    Separate from any metrics backend so other :class:`QueueMetrics` implementations
    can reuse the bookkeeping. An item re-added while in flight keeps its first add
    time, as client-go does.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._added: dict[Hashable, float] = {}
        self._started: dict[Hashable, float] = {}

    def added(self, item: Hashable) -> None:
        self._added.setdefault(item, self._clock.now())

    def started(self, item: Hashable) -> float | None:
        """Record the processing start; return the seconds the item waited in the queue."""
        now = self._clock.now()
        self._started[item] = now
        added = self._added.pop(item, None)
        return None if added is None else now - added

    def finished(self, item: Hashable) -> float | None:
        """Forget the item's processing start; return how long processing took."""
        started = self._started.pop(item, None)
        return None if started is None else self._clock.now() - started

    def unfinished_work_seconds(self) -> float:
        now = self._clock.now()
        return sum(now - started for started in self._started.values())

    def longest_running_processor_seconds(self) -> float:
        if not self._started:
            return 0.0
        return self._clock.now() - min(self._started.values())


LABELS = ["controller", "name"]
"""As controller-runtime labels its queues: both carry the queue's (the controller's) name."""
_UNFINISHED = "workqueue_unfinished_work_seconds"
_UNFINISHED_HELP = (
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases."
)
_LONGEST = "workqueue_longest_running_processor_seconds"
_LONGEST_HELP = "How many seconds has the longest running processor for workqueue been running."


class _InFlightCollector:
    """Computes the two in-flight gauges at scrape time.

    Their value depends on "now", so refreshing them on queue events would go stale
    between events; a collector is exact and costs nothing between scrapes.
    Queues are held weakly so a discarded queue stops being reported.
    """

    def __init__(self) -> None:
        self.queues: weakref.WeakValueDictionary[str, PrometheusQueueMetrics] = weakref.WeakValueDictionary()

    def describe(self) -> Iterable[Metric]:
        return [
            GaugeMetricFamily(_UNFINISHED, _UNFINISHED_HELP, labels=LABELS),
            GaugeMetricFamily(_LONGEST, _LONGEST_HELP, labels=LABELS),
        ]

    def collect(self) -> Iterable[Metric]:
        unfinished = GaugeMetricFamily(_UNFINISHED, _UNFINISHED_HELP, labels=LABELS)
        longest = GaugeMetricFamily(_LONGEST, _LONGEST_HELP, labels=LABELS)
        for name, metrics in sorted(self.queues.items()):
            unfinished.add_metric([name, name], metrics.unfinished_work_seconds())
            longest.add_metric([name, name], metrics.longest_running_processor_seconds())
        return [unfinished, longest]


class _Families:
    """The labelled metric families, registered once per registry and shared by all queues."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = LABELS
        self.depth = GaugeFamily("workqueue_depth", "Current depth of workqueue", labels, registry=registry)
        # Counters are exposed with `_total` appended: workqueue_adds_total.
        self.adds = CounterFamily(
            "workqueue_adds", "Total number of adds handled by workqueue", labels, registry=registry
        )
        self.queue_duration = HistogramFamily(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.work_duration = HistogramFamily(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.retries = CounterFamily(
            "workqueue_retries", "Total number of retries handled by workqueue", labels, registry=registry
        )
        self.in_flight = _InFlightCollector()
        registry.register(self.in_flight)


_families_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def _families(registry: CollectorRegistry) -> _Families:
    families = _families_by_registry.get(registry)
    if families is None:
        families = _families_by_registry[registry] = _Families(registry)
    return families


class PrometheusQueueMetrics:
    """controller-runtime's workqueue metrics for one queue, labelled ``controller`` and ``name`` with the
    queue's name.

    Several queues (one per controller) share a registry; the metric families are
    created on the first queue and reused. A second queue with the same name takes
    over the in-flight gauges of the first (counters and histograms are shared).
    The ``clock`` must be the one driving the queue so durations agree with it.
    """

    def __init__(
        self, name: str, registry: CollectorRegistry = REGISTRY, *, clock: Clock | None = None
    ) -> None:
        self.name = name
        self._timings = ItemTimings(clock if clock is not None else RealClock())
        families = _families(registry)
        self._depth = families.depth.labels(controller=name, name=name)
        self._adds = families.adds.labels(controller=name, name=name)
        self._queue_duration = families.queue_duration.labels(controller=name, name=name)
        self._work_duration = families.work_duration.labels(controller=name, name=name)
        self._retries = families.retries.labels(controller=name, name=name)
        families.in_flight.queues[name] = self

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._timings.added(item)

    def get(self, item: Hashable) -> None:
        self._depth.dec()
        waited = self._timings.started(item)
        if waited is not None:
            self._queue_duration.observe(waited)

    def done(self, item: Hashable) -> None:
        took = self._timings.finished(item)
        if took is not None:
            self._work_duration.observe(took)

    def retry(self) -> None:
        self._retries.inc()

    def unfinished_work_seconds(self) -> float:
        return self._timings.unfinished_work_seconds()

    def longest_running_processor_seconds(self) -> float:
        return self._timings.longest_running_processor_seconds()
