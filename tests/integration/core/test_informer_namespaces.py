"""An informer of several namespaces against the real API server: one store, one watch per namespace.

The operator's `--namespace a,b` (the Helm chart's watchNamespaces) rests on
this: RBAC then grants list and watch in those namespaces only, so the cache
must never list across all of them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from informer_running import holding, running
from kubernetes_asyncio import client

from valkey_operator.core.cache import NotCached
from valkey_operator.core.client import Client
from valkey_operator.core.informer import FuncHandler, SharedInformer
from valkey_operator.core.manager import Manager
from valkey_operator.core.resource import CONFIG_MAPS, NAMESPACES
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.wait import eventually

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def three_namespaces(kube_api: client.ApiClient) -> AsyncIterator[list[str]]:
    kube = Client(RestClient(kube_api), "test")
    suffix = uuid.uuid4().hex[:6]
    names = [f"multi-{letter}-{suffix}" for letter in "abc"]
    for name in names:
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield names
    finally:
        for name in names:
            await kube.delete(NAMESPACES, name)


def config_map(namespace: str, name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


def keys(informer: SharedInformer) -> list[str]:
    return sorted(key for key in informer.store.list_keys() if not key.endswith("/kube-root-ca.crt"))


async def test_an_informer_of_two_namespaces_sees_both_and_nothing_else(
    kube_api: client.ApiClient, three_namespaces: list[str]
) -> None:
    first, second, unwatched = three_namespaces
    kube = Client(RestClient(kube_api), "test")
    for namespace in three_namespaces:
        await kube.create(CONFIG_MAPS, config_map(namespace, "before"))
    informer = SharedInformer(RestClient(kube_api), CONFIG_MAPS, namespace=[second, first])
    assert informer.namespaces == (first, second)
    added: list[str] = []
    informer.add_event_handler(FuncHandler(on_add=lambda o: added.append(o["metadata"]["namespace"])))
    async with running(informer):
        await holding(informer, f"{first}/before", f"{second}/before")
        assert keys(informer) == [f"{first}/before", f"{second}/before"]
        for namespace in three_namespaces:
            await kube.create(CONFIG_MAPS, config_map(namespace, "after"))
        expected = [f"{first}/after", f"{first}/before", f"{second}/after", f"{second}/before"]
        await eventually(lambda: keys(informer) == expected, "both watched namespaces' new objects")
        await kube.delete(CONFIG_MAPS, "before", first)
        await eventually(lambda: f"{first}/before" not in keys(informer), "the delete in the first namespace")
        assert unwatched not in added
        assert f"{second}/before" in keys(informer)
        with pytest.raises(ValueError, match="watches 2 namespaces"):
            _ = informer.last_sync_resource_version


async def test_a_manager_scoped_to_namespaces_shares_one_informer_and_reads_them(
    kube_api: client.ApiClient, three_namespaces: list[str]
) -> None:
    first, second, unwatched = three_namespaces
    kube = Client(RestClient(kube_api), "test")
    for namespace in three_namespaces:
        await kube.create(CONFIG_MAPS, config_map(namespace, "settings"))
    manager = Manager(kube_api, field_manager="test", namespace=[second, first])
    assert manager.namespaces == (first, second)
    assert manager.in_scope(first) and not manager.in_scope(unwatched)
    informer = manager.informer(CONFIG_MAPS)
    assert manager.informer(CONFIG_MAPS, namespace=(first, second)) is informer
    async with running(informer):
        await holding(informer, f"{first}/settings", f"{second}/settings")
        listed = manager.cache.list(CONFIG_MAPS)
        found = sorted(o["metadata"]["namespace"] for o in listed if o["metadata"]["name"] == "settings")
        assert [n for n in found if n in three_namespaces] == [first, second]
        with pytest.raises(NotCached, match=unwatched):  # controller-runtime: "unknown namespace"
            manager.cache.get(CONFIG_MAPS, "settings", unwatched)
        assert manager.cache.get(CONFIG_MAPS, "settings", second) is not None
