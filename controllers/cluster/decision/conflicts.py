"""Objects of the cluster's names that someone else controls (pure): never taken over.

The operator writes its Services, ConfigMap, PDBs and Secrets by name (server-side apply, or a
create). An object of one of those names that already exists and whose controller
ownerReference is not this ValkeyCluster (by uid) was made by someone else: a user, another
tool, another ValkeyCluster, or an earlier incarnation of this one. Applying over it would take
it over (our fields forced onto it, our controller reference on it, so deleting the cluster would
garbage-collect it). So the whole cluster is blocked instead (NameConflict, Stalled: only a human
can delete, rename or hand over the object), and nothing of the cluster is written until no
such object is left. The check is level-based: each pass reads the names again from the
informer caches, and an event on an object of one of the names requeues the cluster
(reconciler.clusters_named_by).

Admission keeps two ValkeyClusters' names apart (docs/reference/valkeycluster.md, "Reserved
names"); this check is what protects everything else in the namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from valkey_operator.core.rest import Obj


@attrs.frozen
class Conflict:
    """An object of one of the cluster's names, controlled by another (or by nothing)."""

    key: str
    """kind/name of the object."""
    controller: str | None
    """kind/name (uid) of its controller, or None when it has no controller reference."""


def controller_of(obj: Obj) -> Obj | None:
    """The object's controller ownerReference, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def conflicts(uid: str, named: Mapping[str, Obj | None]) -> tuple[Conflict, ...]:
    """Every existing object in named (kind/name -> cached object, None: absent) whose controller
    is not the ValkeyCluster of this uid, sorted by key."""
    found = []
    for key, obj in sorted(named.items()):
        if obj is None:
            continue
        ref = controller_of(obj)
        if ref is not None and uid and ref.get("uid") == uid:
            continue
        controller = None if ref is None else f"{ref.get('kind')}/{ref.get('name')} (uid {ref.get('uid')})"
        found.append(Conflict(key, controller))
    return tuple(found)


def conflict_message(found: Sequence[Conflict]) -> str:
    """What the status says: each object, and who controls it."""
    parts = [
        f"{conflict.key} exists and is controlled by {conflict.controller}"
        if conflict.controller is not None
        else f"{conflict.key} exists with no controller"
        for conflict in found
    ]
    return "; ".join(parts) + ": the operator does not take over an object it did not make"
