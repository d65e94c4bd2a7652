"""The PersistentVolumeClaim of a durable Valkey node (SPEC 1.6), and how a pod mounts it (pure).

With persistence (rdb or aof) every Valkey pod runs on a claim of its own that
holds the data directory and nodes.conf: the node's identity and its data live
and die together, on the claim instead of in memory. A claim outlives its pod:
a pod lost without being planned (crash, deletion, reboot) is replaced by a
pod on the same claim, which starts as the same node with its data. A claim is
named after the first pod it was created for (`{cluster}-{shard}-{suffix}`);
later pods on it have names of their own. The claim carries the shard label,
and the node id its server last reported (NODE_ID_ANNOTATION): an id the
cluster still knows for a node whose pod is away is a node coming back, not a
dead one to forget.

Owned by the cluster (deleting it deletes the claims) unless the config's
reclaimPolicy is Retain: then the claims carry only the labels, and a new
cluster of the same name in the same namespace finds them and starts on them.
"""

from __future__ import annotations

from controllers.cluster.render.context import RenderContext
from controllers.shared import names
from controllers.shared.names import DATA_VOLUME, MODE_ANNOTATION
from valkey_operator.api.config import Appendfsync, PersistenceMode, ReclaimPolicy
from valkey_operator.core.rest import Obj


def persistent(ctx: RenderContext) -> bool:
    """The config asks for durable nodes (rdb or aof): every pod gets a claim."""
    return ctx.persistence.enabled


def claim_size(ctx: RenderContext) -> str:
    return str(ctx.persistence.size)


def claim_bytes(ctx: RenderContext) -> int:
    return int(ctx.persistence.size_bytes or 0)


def claim_mode(ctx: RenderContext) -> str:
    return str(ctx.persistence.mode)


def complete_log(ctx: RenderContext) -> bool:
    """aof with appendfsync always: a node's own file holds every write it acknowledged, so it is the
    best copy of its shard when it restarts (with rdb or everysec a live replica may hold more)."""
    return ctx.persistence.mode is PersistenceMode.AOF and ctx.persistence.appendfsync is Appendfsync.ALWAYS


def retained(ctx: RenderContext) -> bool:
    return ctx.persistence.reclaim_policy is ReclaimPolicy.RETAIN


def render_claim(ctx: RenderContext, shard: int, name: str) -> Obj:
    """A new claim for a pod of `shard`, named after that pod."""
    metadata = ctx.metadata(name, names.claim_labels(ctx.name, shard))
    metadata["annotations"] = {MODE_ANNOTATION: str(ctx.persistence.mode)}
    if retained(ctx):
        del metadata["ownerReferences"]  # garbage collection must not take it with the cluster
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": claim_size(ctx)}},
    }
    storage_class = ctx.persistence.storage_class_name
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def claim_volume(claim: str) -> Obj:
    return {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
