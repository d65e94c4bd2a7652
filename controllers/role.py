"""ValkeyRole reconciler: a readable summary in status, protection while clusters use it.

The `InUse` condition names the clusters that use the role: what keeps a
delete waiting on the protection finalizer, readable in `kubectl describe`.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers.indexes import ReferenceIndex, cluster_role_refs
from controllers.protection import reconcile_protection
from controllers.status import status_patch
from valkey_operator.api.resources import ROLE_PROTECTION_FINALIZER, VALKEY_CLUSTERS, VALKEY_ROLES
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import set_condition
from valkey_operator.core.controller import Controller
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.rest import Obj


def summary(role: Obj) -> str:
    """'+@read +@write -@dangerous' (Valkey's ACL spelling) for the printer column; commands are counted."""
    spec = role.get("spec", {})
    parts = [("+@" if c.get("access") == "allow" else "-@") + c["name"] for c in spec.get("categories", [])]
    commands = spec.get("commands", [])
    if commands:
        parts.append(f"({len(commands)} command rule{'s' if len(commands) != 1 else ''})")
    return " ".join(parts)


IN_USE = "InUse"
READY = "Ready"
NAMED_CLUSTERS = 5
"""At most this many clusters are named in the InUse message (the count is always given)."""


def desired_status(role: Obj, clusters: Sequence[str]) -> Obj:
    """The status this pass observed (pure): the summary, and which clusters (namespace/name) use
    the role. Conditions keep their transition times."""
    generation = role["metadata"].get("generation")
    current = role.get("status") or {}
    if clusters:
        named = sorted(clusters)
        listed = ", ".join(named[:NAMED_CLUSTERS])
        if len(named) > NAMED_CLUSTERS:
            listed += f" and {len(named) - NAMED_CLUSTERS} more"
        count = f"{len(named)} cluster{'s' if len(named) != 1 else ''}"
        message = f"used by {count}: {listed}; a delete waits until none uses it"
        conditions = set_condition(
            current.get("conditions"), IN_USE, True, "UsedByClusters", message, generation
        )
    else:
        message = "no cluster uses this role"
        conditions = set_condition(current.get("conditions"), IN_USE, False, "Unused", message, generation)
    # Admission validates the whole spec, so a stored role is ready to use (kstatus: Current; SPEC 1.8).
    conditions = set_condition(conditions, READY, True, "Accepted", summary(role), generation)
    return {"observedGeneration": generation, "summary": summary(role), "conditions": conditions}


class RoleReconciler:
    def __init__(self, client: Client, index: ReferenceIndex) -> None:
        self.client = client
        self.index = index

    async def reconcile(self, request: Request) -> Result:
        role = self.index.role(request.name)
        if role is None:
            return Result()
        clusters = self.index.clusters_using_role(request.name)
        referenced = bool(clusters)
        role = await reconcile_protection(
            self.client, VALKEY_ROLES, role, ROLE_PROTECTION_FINALIZER, referenced
        )
        if role is None or ("deletionTimestamp" in role["metadata"] and not referenced):
            return Result()
        desired = desired_status(role, clusters)
        patch = status_patch(role.get("status", {}), desired)
        if patch is not None:
            await self.client.patch_status(VALKEY_ROLES, request.name, patch)
        return Result()


def roles_of_cluster(cluster: Obj) -> list[Request]:
    return [Request(name) for name in cluster_role_refs(cluster)]


def setup(manager: Manager, index: ReferenceIndex, workers: int) -> Controller:
    return (
        build_controller(manager, "valkeyrole")
        .for_(VALKEY_ROLES)
        .watches(VALKEY_CLUSTERS, roles_of_cluster, namespace=index.clusters.namespaces)
        .with_workers(workers)
        .complete(RoleReconciler(manager.client, index))
    )
