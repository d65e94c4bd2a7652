"""How far each node's history is archived (the progress.json each archiver writes, render/archiver.py),
and which node served which slots (the topology records the operator writes beside the histories).

The operator never reads the history itself, only these small objects, one per node, at most every
REFRESH_S per cluster (a pass in between gets what was read last): a pass waits for storage at most
once in that time, and a cluster with many passes costs the bucket no more. The credentials come
from the destination's Secret, as for backups; the endpoint is dialled only where the operator's
policy allows.

A topology record (`<archive>/topology/<unix seconds>.json`, decision/archive.py `topology`) is
written when a pass sees a slot map that differs from the last one recorded: a restore to a moment
replays the history of the primary each slot range had then. It is dated when the operator saw
the map, up to a pass after the change (a failover, a migration finishing); until then the older
record names the former primary, whose own history (it replicates the new one) goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

import structlog

from controllers.cluster.decision.archive import ArchiveProgress, NodeProgress
from controllers.shared.storage import StoreUnavailable, destination_store
from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy, ObjectStore, StorageError

log = structlog.get_logger(__name__)

REFRESH_S = 5.0
MAX_PROGRESS_BYTES = 64 * 1024
"""progress.json is a few dozen bytes (more with many gaps); the bucket may be anyone's."""


class ArchiveProgressReader:
    def __init__(
        self,
        client: Client,
        endpoints: EndpointPolicy = REFUSE_LOCAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.endpoints = endpoints
        self.clock = clock
        self._read: dict[tuple[str, str], tuple[float, frozenset[str], ArchiveProgress]] = {}
        self._recorded: dict[tuple[str, str], Obj] = {}
        """The topology each cluster's newest record holds, as written or read."""

    async def progress(
        self, namespace: str, cluster: str, destination: Obj, nodes: Iterable[str]
    ) -> ArchiveProgress:
        """Each node's progress (absent: none stored yet), or why none could be read."""
        wanted = frozenset(nodes)
        held = self._read.get((namespace, cluster))
        if held is not None and held[1] == wanted and self.clock() - held[0] < REFRESH_S:
            return held[2]
        read = await self._read_all(namespace, cluster, destination, sorted(wanted))
        self._read[(namespace, cluster)] = (self.clock(), wanted, read)
        return read

    def forget(self, namespace: str, cluster: str) -> None:
        self._read.pop((namespace, cluster), None)
        self._recorded.pop((namespace, cluster), None)

    async def record_topology(
        self, namespace: str, cluster: str, destination: Obj, shape: Obj, now: float
    ) -> None:
        """Write shape as a topology record unless the newest one holds it already; a storage
        failure is logged and the next pass tries again."""
        if self._recorded.get((namespace, cluster)) == shape:
            return
        try:
            async with destination_store(self.client, namespace, destination, self.endpoints) as store:
                folder = store.key(*layout.archive_prefix(namespace, cluster), layout.TOPOLOGY)
                if (namespace, cluster) not in self._recorded:
                    listed = await store.list_objects(folder)
                    newest = max((key for key, _ in listed), default=None)
                    if newest is not None:
                        document = await store.get_json(newest, MAX_PROGRESS_BYTES * 16)
                        if isinstance(document, dict) and document.get("shards") == shape["shards"]:
                            self._recorded[(namespace, cluster)] = shape
                            return
                await store.put_json(f"{folder}/{layout.topology_name(now)}", {"recordedAt": now, **shape})
        except StoreUnavailable as exc:  # the progress read says why in the status
            log.info(
                "topology not recorded", cluster=f"{namespace}/{cluster}", reason=exc.reason, error=str(exc)
            )
            return
        self._recorded[(namespace, cluster)] = shape

    async def _read_all(
        self, namespace: str, cluster: str, destination: Obj, nodes: list[str]
    ) -> ArchiveProgress:
        try:
            async with destination_store(self.client, namespace, destination, self.endpoints) as store:
                found = await asyncio.gather(
                    *(read_progress(store, namespace, cluster, node) for node in nodes)
                )
        except StoreUnavailable as exc:
            return ArchiveProgress(reason=exc.reason, message=str(exc))
        return ArchiveProgress(nodes={node: got for node, got in zip(nodes, found, strict=True) if got})


async def read_progress(store: ObjectStore, namespace: str, cluster: str, node: str) -> NodeProgress | None:
    """A node's progress.json; None when it has none (or not one the archiver wrote)."""
    key = store.key(*layout.node_prefix(namespace, cluster, node), layout.PROGRESS_NAME)
    try:
        document = await store.get_json(key, MAX_PROGRESS_BYTES)
    except StorageError as exc:
        if exc.reason == "ObjectMissing":
            return None
        raise
    return NodeProgress.parse(document)
