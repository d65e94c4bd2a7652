"""Scoped caches against the real API server: metadata-only informers and per-resource label selectors.

The Valkey operator caches whole only the Secrets it owns (by label) and
watches every other Secret metadata-only; these tests prove the two cache
features that plan rests on, with Secrets, on the test bed's kube-apiserver.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from informer_running import holding, running
from kubernetes_asyncio import client

from valkey_operator.core.builder import build_controller
from valkey_operator.core.informer import SharedInformer, SharedInformerFactory
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import (
    JSON,
    MERGE_PATCH,
    PARTIAL_OBJECT_METADATA,
    PARTIAL_OBJECT_METADATA_LIST,
    Obj,
    Query,
    RestClient,
)
from valkey_operator.core.store import DeletedFinalStateUnknown, unwrap_tombstone
from valkey_testbed.wait import eventually

pytestmark = pytest.mark.integration

PREFIX = "s-"
OWNED = {"cache-scoping/owned": "yes"}
OWNED_SELECTOR = "cache-scoping/owned=yes"


# -- helpers ---------------------------------------------------------------------


class AcceptRecordingRestClient(RestClient):
    """Records the Accept header of every LIST and WATCH; the API server answers them all."""

    def __init__(self, api_client: client.ApiClient) -> None:
        super().__init__(api_client)
        self.list_accepts: list[str] = []
        self.watch_accepts: list[str] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = 30.0,
        accept: str = JSON,
    ) -> Obj:
        if method == "GET":
            self.list_accepts.append(accept)
        return await super().request(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout, accept=accept
        )

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Query | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
        accept: str = JSON,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        self.watch_accepts.append(accept)
        async with super().stream(path, query=query, timeout=timeout, accept=accept) as response:
            yield response


class Recorder:
    """Records (event, name, resourceVersion) for Secrets named PREFIX*, and the objects handed over."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.objects: list[Obj | DeletedFinalStateUnknown] = []

    @staticmethod
    def _relevant(obj: Obj) -> bool:
        return str(obj["metadata"]["name"]).startswith(PREFIX)

    def on_add(self, obj: Obj) -> None:
        if self._relevant(obj):
            self.events.append(("add", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))
            self.objects.append(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        if self._relevant(new):
            rvs = f"{old['metadata']['resourceVersion']}->{new['metadata']['resourceVersion']}"
            self.events.append(("update", new["metadata"]["name"], rvs))
            self.objects.append(new)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        final = unwrap_tombstone(obj)
        if self._relevant(final):
            kind = "tombstone" if isinstance(obj, DeletedFinalStateUnknown) else "delete"
            self.events.append((kind, final["metadata"]["name"], final["metadata"]["resourceVersion"]))
            self.objects.append(obj)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


class Secrets:
    """Writes Secrets straight to the API server."""

    def __init__(self, rest: RestClient, namespace: str) -> None:
        self.rest = rest
        self.namespace = namespace

    async def create(self, name: str, value: str, labels: Mapping[str, str] | None = None) -> Obj:
        body = {"metadata": {"name": name, "labels": dict(labels or {})}, "data": {"v": b64(value)}}
        return await self.rest.request("POST", SECRETS.path(self.namespace), body=body)

    async def patch(self, name: str, body: Obj) -> Obj:
        return await self.rest.request(
            "PATCH", SECRETS.path(self.namespace, name), body=body, content_type=MERGE_PATCH
        )

    async def set_value(self, name: str, value: str) -> Obj:
        return await self.patch(name, {"data": {"v": b64(value)}})

    async def delete(self, name: str) -> Obj:
        return await self.rest.request("DELETE", SECRETS.path(self.namespace, name))


def rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


def names(informer: SharedInformer) -> set[str]:
    return {o["metadata"]["name"] for o in informer.store.list() if o["metadata"]["name"].startswith(PREFIX)}


@pytest.fixture
def secrets(kube_api: client.ApiClient, namespace: str) -> Secrets:
    return Secrets(RestClient(kube_api), namespace)


# -- metadata-only informers ---------------------------------------------------------


@pytest.mark.timeout(60)
async def test_metadata_only_informer_caches_no_data_yet_sees_every_change(
    kube_api: client.ApiClient, namespace: str, secrets: Secrets
) -> None:
    listed = await secrets.create("s-listed", "before", labels={"app": "x"})
    rest = AcceptRecordingRestClient(kube_api)
    recorder = Recorder()
    informer = SharedInformer(rest, SECRETS, namespace=namespace, metadata_only=True)
    informer.add_event_handler(recorder)
    async with running(informer):
        assert rest.list_accepts == [PARTIAL_OBJECT_METADATA_LIST]
        await eventually(lambda: rest.watch_accepts == [PARTIAL_OBJECT_METADATA], "the watch")

        # The initial LIST may be served from the API server's watch cache, a moment behind the
        # create (seen in CI under load): then the object arrives by the watch.
        cached = await eventually(
            lambda: informer.store.get_by_key(f"{namespace}/s-listed"), "s-listed in the cache", 20
        )
        assert set(cached) == {"apiVersion", "kind", "metadata"}, "no data, no type: metadata only"
        assert (cached["apiVersion"], cached["kind"]) == ("v1", "Secret"), "not PartialObjectMetadata"
        assert cached["metadata"]["labels"] == {"app": "x"}
        assert cached["metadata"]["uid"] == listed["metadata"]["uid"]
        assert rv(cached) == rv(listed)
        assert "managedFields" not in cached["metadata"], "the default transform still applies"

        # A change of the payload alone is an update: it moves the resourceVersion.
        changed = await secrets.set_value("s-listed", "after")
        assert rv(changed) != rv(listed)
        created = await secrets.create("s-live", "1")
        await secrets.delete("s-live")
        await eventually(lambda: len(recorder.events) >= 4, "four events")
        assert recorder.events[:3] == [
            ("add", "s-listed", rv(listed)),
            ("update", "s-listed", f"{rv(listed)}->{rv(changed)}"),
            ("add", "s-live", rv(created)),
        ]
        assert recorder.events[3][:2] == ("delete", "s-live")
        assert len(recorder.events) == 4
        for obj in recorder.objects:
            assert isinstance(obj, dict), "the real DELETED event, not a tombstone"
            assert "data" not in obj
            assert obj["kind"] == "Secret"
        updated = informer.store.get_by_key(f"{namespace}/s-listed")
        assert updated is not None
        assert rv(updated) == rv(changed)
        assert "data" not in updated
        assert names(informer) == {"s-listed"}


# -- label selectors per resource ------------------------------------------------------


@pytest.mark.timeout(60)
async def test_factory_label_selector_limits_the_full_informer_not_the_metadata_one(
    kube_api: client.ApiClient, namespace: str, secrets: Secrets
) -> None:
    await secrets.create("s-owned", "mine", labels=OWNED)
    await secrets.create("s-foreign", "theirs")
    factory = SharedInformerFactory(
        RestClient(kube_api), namespace=namespace, label_selectors={SECRETS: OWNED_SELECTOR}
    )
    full = factory.informer_for(SECRETS)
    metadata = factory.informer_for(SECRETS, metadata_only=True)
    assert full is not metadata
    assert factory.informer_for(SECRETS, namespace, metadata_only=True) is metadata
    assert (full.label_selector, full.metadata_only) == (OWNED_SELECTOR, False)
    assert (metadata.label_selector, metadata.metadata_only) == (None, True)
    full_events = Recorder()
    full.add_event_handler(full_events)
    factory.start()
    try:
        async with asyncio.timeout(20):
            await factory.wait_for_cache_sync()
        await holding(full, f"{namespace}/s-owned")
        await holding(metadata, f"{namespace}/s-owned", f"{namespace}/s-foreign")
        assert names(full) == {"s-owned"}
        owned = full.store.get_by_key(f"{namespace}/s-owned")
        assert owned is not None
        assert owned["data"] == {"v": b64("mine")}, "the selected Secret is cached whole"
        assert names(metadata) == {"s-owned", "s-foreign"}
        assert all("data" not in o for o in metadata.store.list())

        # Labelling a Secret brings it into the full cache; unlabelling takes it out again.
        await secrets.patch("s-foreign", {"metadata": {"labels": OWNED}})
        await eventually(lambda: names(full) == {"s-owned", "s-foreign"}, "s-foreign selected")
        foreign = full.store.get_by_key(f"{namespace}/s-foreign")
        assert foreign is not None
        assert foreign["data"] == {"v": b64("theirs")}
        await secrets.patch("s-owned", {"metadata": {"labels": {"cache-scoping/owned": None}}})
        await eventually(lambda: names(full) == {"s-foreign"}, "s-owned deselected")
        assert [(e[0], e[1]) for e in full_events.events] == [
            ("add", "s-owned"),
            ("add", "s-foreign"),
            ("delete", "s-owned"),
        ]
        assert names(metadata) == {"s-owned", "s-foreign"}
    finally:
        await factory.stop()


class Reconciles:
    """Counts reconciles per Secret name."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request.name)
        return Result()


@pytest.mark.timeout(90)
async def test_manager_label_selectors_and_builder_metadata_only_watch(
    kube_api: client.ApiClient, namespace: str, secrets: Secrets
) -> None:
    await secrets.create("s-owned", "1", labels=OWNED)
    await secrets.create("s-foreign", "1")
    manager = Manager(
        kube_api,
        field_manager="tests",
        namespace=namespace,
        label_selectors={SECRETS: OWNED_SELECTOR},
        metrics_bind_address="0",
        health_probe_bind_address="0",
    )
    reconciles = Reconciles()

    def same_name(obj: Obj) -> list[Request]:
        name = obj["metadata"]["name"]
        return [Request(name, namespace)] if name.startswith(PREFIX) else []

    # The primary is the full (label-selected) Secrets informer; every Secret's change
    # reaches the controller through the metadata-only one.
    build_controller(manager, "secrets").for_(SECRETS).watches(
        SECRETS, same_name, metadata_only=True
    ).complete(reconciles)
    full = manager.informer(SECRETS)
    metadata = manager.informer(SECRETS, metadata_only=True)
    assert {(i.metadata_only, i.label_selector) for i in manager.informers.informers} == {
        (False, OWNED_SELECTOR),
        (True, None),
    }
    run = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: {"s-owned", "s-foreign"} <= set(reconciles.calls), "initial reconciles")
        assert names(full) == {"s-owned"}
        assert names(metadata) == {"s-owned", "s-foreign"}
        reconciles.calls.clear()
        await secrets.set_value("s-foreign", "2")
        await eventually(lambda: "s-foreign" in reconciles.calls, "a reconcile for a data change")
        foreign = metadata.store.get_by_key(f"{namespace}/s-foreign")
        assert foreign is not None
        assert "data" not in foreign
    finally:
        manager.stop()
        async with asyncio.timeout(30):
            await run
