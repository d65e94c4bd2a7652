"""The persistence a config chain resolves to (pure; SPEC 1.6).

Merged field by field, child over parent, like the other settings: a child
that sets only `size` keeps its base's mode. At the root an unset mode is
none, an unset appendfsync everysec, an unset reclaimPolicy Delete.

Admission checks each config alone; two things only the chain can show:
- rdb or aof with no size anywhere in the chain: a resolution failure
  (`PersistenceSizeMissing`), so no cluster is built without a claim size;
- an appendfsync inherited by a child that switched the mode to rdb or none:
  ignored (the child cannot unset a field its base sets), so `appendfsync`
  is None unless the mode is aof.
A size that shrinks through the chain (baseRef pointed at a smaller base, a size
removed so that a smaller one shows through) is
not caught here either: the resolved size is what the chain says, and the
cluster side is to compare it with its claims.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from valkey_operator.api.config import Appendfsync, PersistenceMode, ReclaimPolicy
from valkey_operator.api.quantity import quantity_bytes
from valkey_operator.core.rest import Obj

_FIELDS = ("mode", "size", "storageClassName", "appendfsync", "reclaimPolicy")


@attrs.frozen(kw_only=True)
class Persistence:
    """What a cluster's nodes keep, and on what claims. The default is a cache (mode none)."""

    mode: PersistenceMode = PersistenceMode.NONE
    size: str | None = None
    """The claim size as written (a Kubernetes quantity); None with mode none."""
    size_bytes: int | None = None
    """`size` in bytes (rounded up, as Kubernetes does); None with mode none."""
    storage_class_name: str | None = None
    """None: the cluster's default StorageClass."""
    appendfsync: Appendfsync | None = None
    """everysec or always with mode aof; None otherwise."""
    reclaim_policy: ReclaimPolicy = ReclaimPolicy.DELETE

    @property
    def enabled(self) -> bool:
        """Whether the nodes keep anything: each Valkey pod then has a claim."""
        return self.mode is not PersistenceMode.NONE

    def to_json(self) -> Obj:
        """The API's camelCase form (ValkeyConfig status.persistence; settings and template hashes)."""
        content: Obj = {"mode": str(self.mode), "size": self.size, "reclaimPolicy": str(self.reclaim_policy)}
        if self.storage_class_name is not None:
            content["storageClassName"] = self.storage_class_name
        if self.appendfsync is not None:
            content["appendfsync"] = str(self.appendfsync)
        return content


NONE = Persistence()


def merge_persistence(specs: Sequence[Obj]) -> Persistence | str:
    """The chain's persistence (specs leaf first), or why it cannot be built (a message)."""
    merged: Obj = {}
    for spec in reversed(specs):  # root first, so children override
        own = spec.get("persistence") or {}
        merged.update({key: own[key] for key in _FIELDS if own.get(key) is not None})
    try:
        # Admission refuses what fails here; an older CRD or a direct etcd write might not.
        mode = PersistenceMode(merged.get("mode", PersistenceMode.NONE))
        if mode is PersistenceMode.NONE:
            return NONE
        size = merged.get("size")
        if size is None:
            return f"persistence mode {mode} needs a size, and no config in the chain sets persistence.size"
        size = str(size)
        size_bytes = quantity_bytes(size)
        fsync = Appendfsync(merged.get("appendfsync", Appendfsync.EVERYSEC))
        reclaim = ReclaimPolicy(merged.get("reclaimPolicy", ReclaimPolicy.DELETE))
    except ValueError as error:
        return f"invalid persistence: {error}"
    return Persistence(
        mode=mode,
        size=size,
        size_bytes=size_bytes,
        storage_class_name=merged.get("storageClassName"),
        appendfsync=fsync if mode is PersistenceMode.AOF else None,
        reclaim_policy=reclaim,
    )
