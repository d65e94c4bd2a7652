"""The client facade, finalizers, conditions and events on the real API server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s

from valkey_operator.core.client import Client, retry_on_conflict
from valkey_operator.core.events import WARNING, EventRecorder
from valkey_operator.core.finalizers import add_finalizer, has_finalizer, remove_finalizer
from valkey_operator.core.resource import CONFIG_MAPS, EVENTS
from valkey_operator.core.rest import ApiError, RestClient

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def api(kube_api: k8s.ApiClient) -> AsyncIterator[Client]:
    yield Client(RestClient(kube_api), field_manager="core-tests")


def config_map(name: str, namespace: str, **data: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


async def test_crud_and_server_side_apply(api: Client, namespace: str) -> None:
    created = await api.create(CONFIG_MAPS, config_map("a", namespace, x="1"))
    assert created["metadata"]["uid"]
    assert (await api.get(CONFIG_MAPS, "a", namespace))["data"] == {"x": "1"}
    patched = await api.patch(CONFIG_MAPS, "a", {"data": {"y": "2"}}, namespace)
    assert patched["data"] == {"x": "1", "y": "2"}
    applied = await api.apply(
        CONFIG_MAPS, {"metadata": {"name": "b", "namespace": namespace}, "data": {"z": "3"}}
    )
    assert applied["data"] == {"z": "3"}
    managers = {entry["manager"] for entry in applied["metadata"]["managedFields"]}
    assert "core-tests" in managers
    names = {item["metadata"]["name"] for item in await api.list(CONFIG_MAPS, namespace, page_size=1)}
    assert {"a", "b"} <= names
    await api.delete(CONFIG_MAPS, "a", namespace)
    assert await api.get_or_none(CONFIG_MAPS, "a", namespace) is None
    await api.delete(CONFIG_MAPS, "a", namespace)  # missing is fine by default
    with pytest.raises(ApiError) as missing:
        await api.delete(CONFIG_MAPS, "a", namespace, missing_ok=False)
    assert missing.value.not_found


async def test_stale_update_conflicts_and_retry_helper_converges(api: Client, namespace: str) -> None:
    await api.create(CONFIG_MAPS, config_map("counter", namespace, n="0"))
    stale = await api.get(CONFIG_MAPS, "counter", namespace)
    await api.patch(CONFIG_MAPS, "counter", {"data": {"n": "1"}}, namespace)
    stale["data"]["n"] = "100"
    with pytest.raises(ApiError) as conflict:
        await api.replace(CONFIG_MAPS, stale)
    assert conflict.value.conflict

    attempts = 0

    async def increment() -> dict[str, object]:
        nonlocal attempts
        attempts += 1
        current = await api.get(CONFIG_MAPS, "counter", namespace)
        if attempts == 1:  # someone else writes between our read and our write
            await api.patch(CONFIG_MAPS, "counter", {"data": {"n": "5"}}, namespace)
        current["data"]["n"] = str(int(current["data"]["n"]) + 1)
        return await api.replace(CONFIG_MAPS, current)

    result = await retry_on_conflict(increment)
    assert attempts == 2
    assert result["data"]["n"] == "6"


async def test_finalizers_are_added_and_removed_without_clobbering(api: Client, namespace: str) -> None:
    obj = await api.create(CONFIG_MAPS, config_map("f", namespace))
    obj = await add_finalizer(api, CONFIG_MAPS, obj, "example.com/other")
    obj = await add_finalizer(api, CONFIG_MAPS, obj, "example.com/ours")
    assert obj["metadata"]["finalizers"] == ["example.com/other", "example.com/ours"]
    await api.delete(CONFIG_MAPS, "f", namespace)
    marked = await api.get(CONFIG_MAPS, "f", namespace)
    assert "deletionTimestamp" in marked["metadata"]
    marked = await remove_finalizer(api, CONFIG_MAPS, marked, "example.com/ours")
    assert marked["metadata"]["finalizers"] == ["example.com/other"]
    assert has_finalizer(marked, "example.com/other")
    await remove_finalizer(api, CONFIG_MAPS, marked, "example.com/other")
    assert await api.get_or_none(CONFIG_MAPS, "f", namespace) is None
    # A cache lagging the deletion still shows the finalizer: removing it from the gone object succeeds.
    assert await remove_finalizer(api, CONFIG_MAPS, marked, "example.com/other") is None
    with pytest.raises(ApiError) as raised:
        await remove_finalizer(api, CONFIG_MAPS, marked, "example.com/other", ignore_not_found=False)
    assert raised.value.not_found


async def test_event_recorder_creates_then_counts_a_series(api: Client, namespace: str) -> None:
    obj = await api.create(CONFIG_MAPS, config_map("evented", namespace))
    recorder = EventRecorder(api, "core-tests", "test-instance")
    await recorder.event(obj, WARNING, "Broken", "it broke")
    await recorder.event(obj, WARNING, "Broken", "it broke")
    events = [e for e in await api.list(EVENTS, namespace) if e["regarding"]["name"] == "evented"]
    assert len(events) == 1
    event = events[0]
    assert (event["reason"], event["type"], event["note"]) == ("Broken", "Warning", "it broke")
    assert event["reportingController"] == "core-tests"
    assert event["series"]["count"] == 2
