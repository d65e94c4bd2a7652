"""The example operator, built only on the public core API, on the real API server."""

from __future__ import annotations

from collections.abc import Awaitable

import pytest
from example_manager import running_example
from kubernetes_asyncio import client as k8s

from examples.configmap_checksum.operator import (
    CHECKSUM_ANNOTATION,
    MISSING,
    SOURCE_ANNOTATION,
    checksum,
    setup,
)
from valkey_operator.core import CONFIG_MAPS, DEPLOYMENTS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def deployment(name: str, namespace: str, source: str) -> Obj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "annotations": {SOURCE_ANNOTATION: source}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "example/app:1"}]},
            },
        },
    }


def test_checksum_is_stable_and_content_sensitive() -> None:
    a = {"data": {"k": "v", "j": "w"}}
    assert checksum(a) == checksum({"data": {"j": "w", "k": "v"}})
    assert checksum(a) != checksum({"data": {"k": "v2", "j": "w"}})
    assert checksum(None) == MISSING


async def test_example_operator_follows_configmap_changes(kube_api: k8s.ApiClient, namespace: str) -> None:
    api = Client(RestClient(kube_api), field_manager="test")

    async def annotation() -> str | None:
        current = await api.get(DEPLOYMENTS, "web", namespace)
        value: str | None = (
            current["spec"]["template"]["metadata"].get("annotations", {}).get(CHECKSUM_ANNOTATION)
        )
        return value

    async with running_example(kube_api, namespace, "configmap-checksum", setup) as manager:
        await api.create(DEPLOYMENTS, deployment("web", namespace, source="settings"))
        await eventually(lambda: _equals(annotation(), MISSING), "the missing-source checksum", interval=0.1)
        configmap = await api.create(
            CONFIG_MAPS,
            {"metadata": {"name": "settings", "namespace": namespace}, "data": {"color": "blue"}},
        )
        await eventually(lambda: _equals(annotation(), checksum(configmap)), "the checksum", interval=0.1)
        changed = await api.patch(CONFIG_MAPS, "settings", {"data": {"color": "green"}}, namespace)
        await eventually(lambda: _equals(annotation(), checksum(changed)), "the new checksum", interval=0.1)
        assert manager.ready()


async def _equals(value: Awaitable[str | None], expected: str) -> bool | NotYet:
    seen = await value
    return seen == expected or NotYet(seen)
