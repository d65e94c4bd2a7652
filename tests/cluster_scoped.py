"""Cluster-scoped objects that tests create under per-test names and remove afterwards."""

from __future__ import annotations

from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj


class ClusterScoped:
    """Objects named `{name}-{suffix}` so tests never collide; cleanup() drops finalizers, then deletes."""

    def __init__(self, kube: Client, suffix: str) -> None:
        self.kube = kube
        self.suffix = suffix
        self.created: list[tuple[Resource, str]] = []

    def __call__(self, name: str) -> str:
        return f"{name}-{self.suffix}"

    async def create(self, resource: Resource, body: Obj) -> Obj:
        created = await self.kube.create(
            resource, {"apiVersion": resource.api_version, "kind": resource.kind, **body}
        )
        self.created.append((resource, created["metadata"]["name"]))
        return created

    async def cleanup(self) -> None:
        for resource, name in reversed(self.created):
            current = await self.kube.get_or_none(resource, name)
            if current is not None and current["metadata"].get("finalizers"):
                await self.kube.patch(resource, name, {"metadata": {"finalizers": None}})
            await self.kube.delete(resource, name)
