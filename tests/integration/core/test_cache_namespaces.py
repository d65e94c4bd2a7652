"""A controller whose `for_` names another namespace than the manager's reads its objects through the
cache, on the real API server (the embedder's Secret mirror hit NotCached on every read)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from valkey_operator.core import NAMESPACES, SECRETS, Manager, NotCached, Request, Result, build_controller
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest_asyncio.fixture
async def source(kube_api: client.ApiClient) -> AsyncIterator[str]:
    """A second namespace, outside the manager's scope."""
    kube = Client(RestClient(kube_api), "test")
    name = f"cache-src-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete(NAMESPACES, name)


class ReadsTheCache:
    """Records what the cache returns for each Request, and the NotCached of a namespace nobody watches."""

    def __init__(self, manager: Manager, elsewhere: str) -> None:
        self.manager, self.elsewhere = manager, elsewhere
        self.read: dict[str, Obj | None] = {}
        self.refused: list[str] = []

    async def reconcile(self, request: Request) -> Result:
        self.read[request.name] = self.manager.cache.get(SECRETS, request.name, request.namespace)
        try:
            self.manager.cache.get(SECRETS, request.name, self.elsewhere)
        except NotCached as exc:
            self.refused.append(str(exc))
        return Result()


async def test_a_controller_for_another_namespace_reads_its_objects_from_the_cache(
    kube_api: client.ApiClient, namespace: str, source: str
) -> None:
    kube = Client(RestClient(kube_api), "test")
    manager = Manager(
        kube_api,
        field_manager="cache-namespaces",
        namespace=namespace,  # the manager's scope is not where the Secrets are
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    reconciler = ReadsTheCache(manager, elsewhere=namespace)
    build_controller(manager, "cross-namespace").for_(SECRETS, namespace=source).complete(reconciler)
    running = asyncio.create_task(manager.run())
    try:
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": source}}
        await kube.create(SECRETS, {**secret, "stringData": {"key": "value"}})

        def read_it() -> bool | NotYet:
            found = reconciler.read.get("token")
            return (found is not None and found["metadata"]["namespace"] == source) or NotYet(reconciler.read)

        await eventually(read_it, "the reconcile of the Secret in the other namespace to read it", 30)
        message = reconciler.refused[0]
        assert "secrets" in message and repr(namespace) in message and f"namespace {source}" in message
    finally:
        manager.stop()
        await asyncio.wait_for(running, 30)
