"""Counters, gauges and histograms updated from the event loop: plain numbers, read at scrape time.

prometheus-client's metrics take a lock on every update so threads can share
them; the core's controllers and queues all run on one event loop, and a
reconcile updates about ten series, so on the hot path those locks were a
tenth of a no-op reconcile's cost (profile in docs/performance.md). These keep
plain numbers instead and turn them into metric families when the registry is
collected, with the names, types, help and buckets of prometheus-client's own.
A scrape from another thread reads numbers that may be one update behind, as a
scrape between two updates would anyway; a histogram's count is the sum of its
buckets, so the exposition is always consistent.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

__all__ = [
    "CounterFamily",
    "GaugeFamily",
    "HistogramFamily",
    "LoopCounter",
    "LoopGauge",
    "LoopHistogram",
]


class LoopCounter:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class LoopGauge:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)


class LoopHistogram:
    """Cumulative buckets as Prometheus wants them are computed at scrape; an observation is one
    bisect and two additions."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.sum += value
        self.counts[bisect.bisect_left(self.bounds, value)] += 1

    def cumulative(self) -> list[tuple[str, float]]:
        total = 0
        buckets = []
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            total += count
            buckets.append((floatToGoString(bound), float(total)))  # type: ignore[no-untyped-call]
        return buckets


Child = TypeVar("Child", LoopCounter, LoopGauge, LoopHistogram)


class LoopFamily(Generic[Child]):
    """One metric family with label names; `labels(...)` returns the child series, created at zero."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], *, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Child] = {}
        registry.register(self)

    def labels(self, **labels: str) -> Child:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: labels {sorted(labels)} != {sorted(self.labelnames)}")
        key = tuple(str(labels[name]) for name in self.labelnames)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._new_child()
        return child

    def describe(self) -> Iterable[Metric]:
        return [self._family({})]

    def collect(self) -> Iterable[Metric]:
        return [self._family(dict(self._children))]

    def _new_child(self) -> Child:
        raise NotImplementedError

    def _family(self, children: Mapping[tuple[str, ...], Child]) -> Metric:
        """The family as prometheus-client exposes it, with one series per child."""
        raise NotImplementedError


class CounterFamily(LoopFamily[LoopCounter]):
    """As prometheus_client.Counter: exposed as `name_total`."""

    def _new_child(self) -> LoopCounter:
        return LoopCounter()

    def _family(self, children: Mapping[tuple[str, ...], LoopCounter]) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, child in children.items():
            family.add_metric(key, child.value)
        return family


class GaugeFamily(LoopFamily[LoopGauge]):
    def _new_child(self) -> LoopGauge:
        return LoopGauge()

    def _family(self, children: Mapping[tuple[str, ...], LoopGauge]) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, child in children.items():
            family.add_metric(key, child.value)
        return family


class HistogramFamily(LoopFamily[LoopHistogram]):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
        buckets: Sequence[float],
    ) -> None:
        self.buckets = tuple(sorted(buckets))
        super().__init__(name, documentation, labelnames, registry=registry)

    def _new_child(self) -> LoopHistogram:
        return LoopHistogram(self.buckets)

    def _family(self, children: Mapping[tuple[str, ...], LoopHistogram]) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, child in children.items():
            family.add_metric(key, child.cumulative(), child.sum)
        return family
