"""ValkeyRole reconciler: a readable summary in status, protection while clusters use it."""

from __future__ import annotations

from controllers.indexes import ReferenceIndex, cluster_role_refs
from controllers.protection import reconcile_protection
from controllers.status import status_patch
from valkey_operator.api.resources import ROLE_PROTECTION_FINALIZER, VALKEY_CLUSTERS, VALKEY_ROLES
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import Client
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


class RoleReconciler:
    def __init__(self, client: Client, index: ReferenceIndex) -> None:
        self.client = client
        self.index = index

    async def reconcile(self, request: Request) -> Result:
        role = self.index.role(request.name)
        if role is None:
            return Result()
        referenced = bool(self.index.clusters_using_role(request.name))
        role = await reconcile_protection(
            self.client, VALKEY_ROLES, role, ROLE_PROTECTION_FINALIZER, referenced
        )
        if role is None or ("deletionTimestamp" in role["metadata"] and not referenced):
            return Result()
        desired = {"observedGeneration": role["metadata"].get("generation"), "summary": summary(role)}
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
