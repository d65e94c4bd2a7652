"""redis_exporter's series for every Valkey node the leader runs, read when Prometheus scrapes.

Why on scrape: the reconciler's probe of a quiet cluster backs off to 300 s (cadence.py), far too
stale to chart ops/s. A scrape (`refresh()`, the manager's pre-scrape hook) reads every known node
again, once per `max_age` whatever the number of scrapers (two Prometheus replicas share one read),
and only while something scrapes: an operator nobody scrapes reads nothing. One read is one
connection and one pipelined round trip per node (`INFO <sections>` and `CLUSTER INFO`), all nodes
concurrently (at most `concurrency` at once), the whole read bounded by `deadline`: a node that does
not answer in time is `redis_up 0` for that scrape, never a slow or failed scrape.

Which nodes: the reconciler hands over each cluster's Ready pods with an IP, their shard and how to
reach them (`update`) after every pass, and `forget`s a deleted cluster. Only the leader reconciles,
so only the leader exports these series; a new leader exports them from its first pass of each
cluster. Each series carries the node's namespace, cluster, shard and pod labels (scrape with
honor_labels); `instance` is the operator pod, as Prometheus sets it.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence

import attrs
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controllers.cluster.valkey_exposition import NodeSamples, render
from controllers.cluster.valkey_series import INFO_SECTIONS, Sample, node_samples, up
from valkey_operator.valkey.admin import AdminClient, ValkeyAdminError, parse_info, text_of

MAX_AGE = 10.0
"""Seconds a read serves scrapes before a scrape reads again (below the usual 15-30 s interval)."""
DEADLINE = 5.0
"""Seconds one read of every node may take: below Prometheus' default 10 s scrape timeout."""
CONCURRENCY = 64
"""Nodes read at once (bounds the open connections and file descriptors)."""


@attrs.frozen(kw_only=True)
class NodeTarget:
    """One node to read: its pod, pod IP and shard (the pod's shard label)."""

    pod: str
    ip: str
    shard: str


@attrs.frozen(kw_only=True)
class _Cluster:
    admin: AdminClient
    nodes: tuple[NodeTarget, ...]


class ValkeyExporter(Collector):
    """A prometheus_client collector of the last read, and the read itself (`refresh`)."""

    def __init__(
        self,
        *,
        max_age: float = MAX_AGE,
        deadline: float = DEADLINE,
        concurrency: int = CONCURRENCY,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.max_age = max_age
        self.deadline = deadline
        self._limit = asyncio.Semaphore(concurrency)
        self._clock = clock
        self._wall = wall
        self._clusters: dict[tuple[str, str], _Cluster] = {}
        self._samples: dict[tuple[str, str, str], NodeSamples] = {}
        self._read_at: float | None = None
        self._reading: asyncio.Task[None] | None = None
        self._body: bytes | None = b""
        """The redis_* exposition of the last read; None once nodes were dropped since it was rendered."""
        self.last_read_seconds = 0.0
        self.last_read_time = 0.0

    # --- what to read (the reconciler) ---

    def update(
        self, namespace: str, cluster: str, admin: AdminClient | None, nodes: Sequence[NodeTarget]
    ) -> None:
        """The nodes of one cluster after a pass; a node no longer listed loses its series."""
        key = (namespace, cluster)
        if admin is None:
            self.forget(namespace, cluster)
            return
        self._clusters[key] = _Cluster(admin=admin, nodes=tuple(nodes))
        listed = {node.pod for node in nodes}
        for gone in [k for k in self._samples if k[:2] == key and k[2] not in listed]:
            del self._samples[gone]
            self._body = None

    def forget(self, namespace: str, cluster: str) -> None:
        self._clusters.pop((namespace, cluster), None)
        for gone in [k for k in self._samples if k[:2] == (namespace, cluster)]:
            del self._samples[gone]
            self._body = None

    def node_count(self) -> int:
        return sum(len(cluster.nodes) for cluster in self._clusters.values())

    # --- reading (the scrape hook) ---

    async def refresh(self) -> bytes:
        """The redis_* exposition (the manager's scrape hook): read every node first unless a read
        is under way (then wait for it) or the last is younger than max_age."""
        if self._reading is not None and not self._reading.done():
            await asyncio.shield(self._reading)
        elif self._clusters and (self._read_at is None or self._clock() - self._read_at >= self.max_age):
            self._reading = asyncio.ensure_future(self._read_all())
            await asyncio.shield(self._reading)
        if self._body is None:
            self._body = render(list(self._samples.values()))
        return self._body

    async def _read_all(self) -> None:
        started = self._clock()
        work = [
            (key, cluster.admin, node)
            for key, cluster in list(self._clusters.items())
            for node in cluster.nodes
        ]
        results = await asyncio.gather(*(self._read(admin, node) for _key, admin, node in work))
        for (key, _admin, node), samples in zip(work, results, strict=True):
            if self._clusters.get(key) is None or node not in self._clusters[key].nodes:
                continue  # forgotten or replaced while reading
            self._samples[(*key, node.pod)] = ((*key, node.shard, node.pod), samples)
        self._body = render(list(self._samples.values()))
        self._read_at = self._clock()
        self.last_read_seconds = self._read_at - started
        self.last_read_time = self._wall()

    async def _read(self, admin: AdminClient, node: NodeTarget) -> list[Sample]:
        try:
            # The deadline covers the wait for a slot too: every node's starts with the read.
            async with asyncio.timeout(self.deadline), self._limit, admin.connect(node.ip) as connection:
                info_reply, cluster_reply = await connection.pipeline(
                    ("INFO", *INFO_SECTIONS), ("CLUSTER", "INFO")
                )
        except (TimeoutError, ValkeyAdminError, OSError):
            return [up(False)]
        if isinstance(info_reply, ValkeyAdminError):
            return [up(False)]
        cluster_info = (
            {} if isinstance(cluster_reply, ValkeyAdminError) else parse_info(text_of(cluster_reply))
        )
        return node_samples(parse_info(text_of(info_reply)), cluster_info, self._wall())

    # --- exposing (prometheus_client) ---

    def describe(self) -> Iterable[Metric]:
        return []  # collected at every scrape, never at registration

    def collect(self) -> Iterator[Metric]:
        read = GaugeMetricFamily(
            "valkey_operator_node_metrics_read_seconds",
            "How long the last read of every node's INFO for the redis_* series took",
        )
        read.add_metric([], self.last_read_seconds)
        yield read
        at = GaugeMetricFamily(
            "valkey_operator_node_metrics_read_timestamp_seconds",
            "Unix time the redis_* series were last read from the nodes (0: never)",
        )
        at.add_metric([], self.last_read_time)
        yield at


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, ValkeyExporter] = weakref.WeakKeyDictionary()


def valkey_exporter(registry: CollectorRegistry) -> ValkeyExporter:
    """The exporter registered in registry, created and registered on first use (a collector
    registers once, and tests start several managers on one registry)."""
    exporter = _by_registry.get(registry)
    if exporter is None:
        exporter = _by_registry[registry] = ValkeyExporter()
        registry.register(exporter)
    return exporter
