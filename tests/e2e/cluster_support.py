"""What the ValkeyCluster end-to-end tests share: per-test images and configs, waiting, asking nodes."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from cluster_scoped import ClusterScoped

from controllers.cluster.render import names as render_names
from valkey_operator.api.resources import ADMIN_USER, VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS, SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.testing import images
from valkey_operator.valkey.admin import AdminClient, Credentials

NODE_TIMEOUT_MS = "5000"  # >= 5000 ms on the test bed's 2 shared cores


class Catalog(ClusterScoped):
    """Cluster-scoped images and configs named per test, removed afterwards."""

    async def image(self, name: str, tag: str, version: str | None = None) -> str:
        body = {"metadata": {"name": self(name)}, "spec": {"repository": "valkey/valkey", "tag": tag}}
        body["spec"]["version"] = version or tag
        await self.create(VALKEY_IMAGES, body)
        return self(name)

    async def config(self, name: str, image_ref: str) -> str:
        spec = {"imageRef": image_ref, "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS}}
        await self.create(VALKEY_CONFIGS, {"metadata": {"name": self(name)}, "spec": spec})
        return self(name)


def require_image(reference: str) -> None:
    if images.resolve_image(reference) is None:
        pytest.skip(f"{reference} is not installed (python -m valkey_operator.testing build)")


async def create_cluster(
    kube: Client, namespace: str, name: str, config: str, shards: int, replicas: int
) -> Obj:
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configRef": config, "shards": shards, "replicasPerShard": replicas},
    }
    return await kube.create(VALKEY_CLUSTERS, body)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await check():
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def status_of(kube: Client, namespace: str, name: str) -> Obj:
    cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
    status: Obj = cluster.get("status") or {}
    return status


async def wait_for_state(kube: Client, namespace: str, name: str, state: str, timeout: float) -> Obj:
    last: Obj = {}

    async def reached() -> bool:
        nonlocal last
        last = await status_of(kube, namespace, name)
        return last.get("state") == state

    try:
        await eventually(reached, f"{name} {state}", timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last status: {last}") from None
    return last


async def owned_pods(kube: Client, namespace: str, name: str) -> list[Obj]:
    return await kube.list(PODS, namespace, label_selector=f"{render_names.CLUSTER_LABEL}={name}")


async def admin_client(kube: Client, namespace: str, name: str) -> AdminClient:
    secret = await kube.get(SECRETS, render_names.secret_name(name), namespace)
    password = base64.b64decode(secret["data"]["admin-password"]).decode()
    return AdminClient(credentials=Credentials(username=ADMIN_USER, password=password))


async def node_reports(admin: AdminClient, ip: str) -> dict[str, Any]:
    async with admin.connect(ip) as node:
        return {
            "info": await node.info("replication"),
            "cluster": await node.cluster_info(),
            "nodes": await node.cluster_nodes(),
        }


async def settled(kube: Client, namespace: str, name: str, timeout: float) -> Obj:
    """Wait until the status describes the current spec and says Active."""
    last: Obj = {}

    async def done() -> bool:
        nonlocal last
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        last = cluster.get("status") or {}
        return (
            last.get("observedGeneration") == cluster["metadata"]["generation"]
            and last.get("state") == "Active"
            and last.get("shards") == cluster["spec"]["shards"]
        )

    try:
        await eventually(done, f"{name} Active after the change", timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last status: {last}") from None
    return last


async def formed_cluster(
    kube: Client,
    catalog: Catalog,
    namespace: str,
    name: str,
    *,
    shards: int,
    replicas: int,
    timeout: float = 360.0,
) -> tuple[Obj, AdminClient]:
    """A ValkeyCluster of Valkey 9.1.2 (shards x replicas) created and Active: its status and an admin
    client for its nodes."""
    require_image("valkey/valkey:9.1.2")
    config = await catalog.config("cfg", await catalog.image("img", "9.1.2"))
    started = time.monotonic()
    await create_cluster(kube, namespace, name, config, shards=shards, replicas=replicas)
    status = await settled(kube, namespace, name, timeout)
    print(f"{name}: {shards}x{replicas} Active after {time.monotonic() - started:.1f}s")
    return status, await admin_client(kube, namespace, name)
