"""How far each node's history is archived: the progress.json each archiver writes (render/archiver.py).

The operator never reads the history itself, only these small objects, one per node, at most every
REFRESH_S per cluster (a pass in between gets what was read last): a pass waits for storage at most
once in that time, and a cluster with many passes costs the bucket no more. The credentials come
from the destination's Secret, as for backups; the endpoint is dialled only where the operator's
policy allows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from controllers.cluster.decision.archive import ArchiveProgress, NodeProgress
from controllers.shared.storage import AccessProblem, storage_access
from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy, ObjectStore, StorageError, open_store

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

    async def _read_all(
        self, namespace: str, cluster: str, destination: Obj, nodes: list[str]
    ) -> ArchiveProgress:
        access = await storage_access(self.client, namespace, destination)
        if isinstance(access, AccessProblem):
            return ArchiveProgress(reason=access.reason, message=access.message)
        try:
            async with open_store(
                access.destination, access.credentials, access.ca_pem, endpoints=self.endpoints
            ) as store:
                found = await asyncio.gather(*(_node(store, namespace, cluster, node) for node in nodes))
        except StorageError as exc:
            return ArchiveProgress(reason=exc.reason, message=str(exc))
        return ArchiveProgress(nodes={node: got for node, got in zip(nodes, found, strict=True) if got})


async def _node(store: ObjectStore, namespace: str, cluster: str, node: str) -> NodeProgress | None:
    key = store.key(*layout.node_prefix(namespace, cluster, node), layout.PROGRESS_NAME)
    try:
        document = await store.get_json(key, MAX_PROGRESS_BYTES)
    except StorageError as exc:
        if exc.reason == "ObjectMissing":
            return None
        raise
    return NodeProgress.parse(document)
