"""What a cluster restoring to a moment loads (spec.restore.pointInTime): one node's history per
shard of the source at that moment, read from the bucket once (decision/archive_restore.py).

Only small objects are read: the topology records, each candidate node's progress.json, its
sequence folders (a listing by folder, however many segments they hold) and the dates of a few
bases; the histories themselves are fetched by the restoring pods' init containers. A source
found is kept per cluster and spec; one that cannot be used yet (the archive does not reach the
moment) is read again on a later pass, so a restore to a moment a few seconds ago waits for the
archivers instead of failing. The endpoint is dialled only where the operator's policy allows.
"""

from __future__ import annotations

from controllers.cluster.archive_progress import MAX_PROGRESS_BYTES, read_progress
from controllers.cluster.decision import stalled
from controllers.cluster.decision.archive_restore import (
    Group,
    Record,
    behind,
    candidates,
    groups_at,
    usable_bases,
)
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.render.restore import ArchiveShard, RestoreFetch
from controllers.shared.storage import StoreUnavailable, destination_of, destination_store
from valkey_operator.api.backup import Restore
from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.clock import rfc3339
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy, ObjectStore

MAX_RECORD_BYTES = MAX_PROGRESS_BYTES * 16
"""A topology record lists every shard's slots and nodes: a few KiB for hundreds of shards."""


class ArchiveSources:
    def __init__(self, client: Client, image: str, endpoints: EndpointPolicy = REFUSE_LOCAL) -> None:
        self.client = client
        self.image = image
        self.endpoints = endpoints
        self._found: dict[tuple[str, Restore], RestoreSource] = {}

    async def source(self, namespace: str, restore: Restore) -> RestoreSource | RestoreHeld:
        moment = restore.moment()
        if moment is None or restore.cluster_name is None or restore.destination is None:
            return RestoreHeld("RestoreSourceUnknown", "spec.restore names no archive")  # CEL refuses it
        if not self.image:
            return RestoreHeld(
                "RestoreImageUnknown", "the operator runs without --operator-image: no image for the restore"
            )
        if (namespace, restore) in self._found:
            return self._found[(namespace, restore)]
        destination = restore.destination.to_dict()
        try:
            async with destination_store(self.client, namespace, destination, self.endpoints) as store:
                found = await _read(store, namespace, restore.cluster_name, moment)
        except StoreUnavailable as exc:
            return RestoreHeld(exc.reason, str(exc))
        if isinstance(found, RestoreHeld):
            return found
        where = destination_of(destination)
        source = RestoreSource(
            label=f"cluster {restore.cluster_name} at {restore.point_in_time}",
            shards=found,
            fetch=RestoreFetch(
                image=self.image,
                endpoint=where.endpoint,
                bucket=where.bucket,
                region=where.region,
                credentials_secret=restore.destination.credentials_secret_name,
                ca_secret=restore.destination.ca_secret_name,
                until=int(moment),
            ),
        )
        self._found[(namespace, restore)] = source
        return source


async def _read(
    store: ObjectStore, namespace: str, cluster: str, moment: float
) -> tuple[ArchiveShard, ...] | RestoreHeld:
    archive = store.key(*layout.archive_prefix(namespace, cluster))
    records = await _records(store, f"{archive}/{layout.TOPOLOGY}")
    groups = groups_at(records, moment)
    if groups is None:
        first = min((record.recorded_at for record in records), default=None)
        since = f"its first record is from {rfc3339(first)}" if first is not None else "it holds no record"
        return RestoreHeld(
            stalled.NO_ARCHIVE_AT_MOMENT,
            f"the archive of cluster {cluster} does not reach back to the moment: {since}",
        )
    shards: list[ArchiveShard] = []
    for group in groups:
        chosen = await _choose(store, namespace, cluster, group, moment)
        if isinstance(chosen, RestoreHeld):
            if group.optional:
                continue
            return chosen
        node, folder, base = chosen
        shards.append(
            ArchiveShard(index=len(shards), node=node, folder=folder, base_seq=base, slots=group.slots)
        )
    return tuple(shards)


async def _records(store: ObjectStore, folder: str) -> list[Record]:
    records = []
    for key, _ in await store.list_objects(folder):
        recorded_at = layout.topology_time(key.rpartition("/")[2])
        if recorded_at is None:
            continue
        record = Record.parse(recorded_at, await store.get_json(key, MAX_RECORD_BYTES))
        if record is not None:
            records.append(record)
    return records


async def _choose(
    store: ObjectStore, namespace: str, cluster: str, group: Group, moment: float
) -> tuple[str, str, int] | RestoreHeld:
    """The node whose history replays group at moment, its folder, and the base it starts from."""
    progress = {
        node: found
        for node in group.nodes
        if (found := await read_progress(store, namespace, cluster, node)) is not None
    }
    nodes = candidates(group, progress, moment)
    if not nodes:
        return RestoreHeld("ArchiveBehindMoment", behind(group, progress, moment))
    for node in nodes:
        folder = store.key(*layout.node_prefix(namespace, cluster, node))
        seqs = [int(name) for name in await store.list_folders(folder) if name.isdigit()]
        for seq in usable_bases(seqs, progress[node].gaps):
            stored = await store.stored_at("/".join((folder, *layout.base_name(seq))))
            if stored is not None and stored <= moment:
                return node, folder, seq
    return RestoreHeld(
        stalled.NO_BASE_BEFORE_MOMENT,
        f"slots {group.slots}: no node's archive holds a base stored at or before the moment (a "
        "history starts at a base: choose a later moment)",
    )
