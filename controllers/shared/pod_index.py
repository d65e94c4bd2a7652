"""The informer index of pods by cluster, and the shape of a cached read, for every controller.

The cluster controller installs the index (its setup) and reads a cluster's pods through it; the
backup controller reads the same index to find the pods it streams from. Both name it from here,
so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable

from controllers.shared.names import CLUSTER_LABEL
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

PODS_BY_CLUSTER = "pods-by-valkeycluster"
"""Index of the pod informer: `namespace/cluster` -> the pods labelled for that cluster."""

CachedLookup = Callable[[Resource, str, str], Obj | None]
"""(resource, namespace, name) -> the cached object, or None."""


def pod_cluster_key(pod: Obj) -> list[str]:
    """The PODS_BY_CLUSTER key of a pod: its namespace and cluster label (none when unlabelled)."""
    metadata = pod.get("metadata", {})
    cluster = (metadata.get("labels") or {}).get(CLUSTER_LABEL)
    return [f"{metadata.get('namespace', '')}/{cluster}"] if cluster else []
