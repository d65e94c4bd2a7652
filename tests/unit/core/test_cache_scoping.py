"""Cache scoping without a server: which Accept headers and selectors reach the API, and what is cached.

The API server's side (that it really answers with metadata only, and filters
by label) is proven in tests/integration/core/test_informer_scoping.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from valkey_operator.core.builder import build_controller
from valkey_operator.core.informer import FuncHandler, SharedInformer, SharedInformerFactory
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.resource import CONFIG_MAPS, NAMESPACES, SECRETS
from valkey_operator.core.rest import PARTIAL_OBJECT_METADATA, PARTIAL_OBJECT_METADATA_LIST, Obj, RestClient

PARTIAL = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata"}


def partial(name: str, resource_version: str) -> Obj:
    """A Secret as the API server sends it for the PartialObjectMetadata Accept headers."""
    return {**PARTIAL, "metadata": {"name": name, "namespace": "ns", "resourceVersion": resource_version}}


class _Content:
    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    async def iter_any(self) -> AsyncIterator[bytes]:
        for line in self._lines:
            yield line
        if not self._lines:
            await asyncio.Event().wait()  # a later watch: quiet until cancelled


class _Response:
    def __init__(self, lines: list[bytes]) -> None:
        self.content = _Content(lines)


class ScriptedRest(RestClient):
    """Answers one LIST page, then one WATCH with the given events; later watches stay quiet.

    Records the keyword arguments of each call, so a missing `accept` shows.
    """

    def __init__(self, items: list[Obj], events: list[Obj]) -> None:
        super().__init__(api_client=None)  # never used: no HTTP here
        self.items = items
        self.events = events
        self.list_kwargs: list[dict[str, Any]] = []
        self.watch_kwargs: list[dict[str, Any]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Obj:
        self.list_kwargs.append(kwargs)
        return {**PARTIAL, "items": self.items, "metadata": {"resourceVersion": "10"}}

    @contextlib.asynccontextmanager
    async def stream(self, path: str, **kwargs: Any) -> AsyncIterator[Any]:
        self.watch_kwargs.append(kwargs)
        lines = [orjson.dumps(event) + b"\n" for event in self.events] if len(self.watch_kwargs) == 1 else []
        yield _Response(lines)


async def run_until(informer: SharedInformer, done: asyncio.Event) -> None:
    informer.start()
    try:
        async with asyncio.timeout(5):
            await done.wait()
    finally:
        await informer.stop()


async def test_metadata_only_informer_asks_for_partial_metadata_and_caches_the_real_kind() -> None:
    rest = ScriptedRest(
        [partial("a", "5")],
        [
            {"type": "MODIFIED", "object": partial("a", "11")},
            {"type": "ADDED", "object": partial("b", "12")},
            {"type": "DELETED", "object": partial("b", "13")},
        ],
    )
    informer = SharedInformer(rest, SECRETS, namespace="ns", metadata_only=True)
    seen: list[tuple[str, str, str, str]] = []
    done = asyncio.Event()

    def record(event: str, obj: Any) -> None:
        seen.append((event, obj["metadata"]["name"], obj["apiVersion"], obj["kind"]))
        if event == "delete":
            done.set()

    informer.add_event_handler(
        FuncHandler(
            on_add=lambda obj: record("add", obj),
            on_update=lambda _old, new: record("update", new),
            on_delete=lambda obj: record("delete", obj),
        )
    )
    await run_until(informer, done)
    assert [kw.get("accept") for kw in rest.list_kwargs] == [PARTIAL_OBJECT_METADATA_LIST]
    assert rest.watch_kwargs[0]["accept"] == PARTIAL_OBJECT_METADATA
    assert seen == [
        ("add", "a", "v1", "Secret"),
        ("update", "a", "v1", "Secret"),
        ("add", "b", "v1", "Secret"),
        ("delete", "b", "v1", "Secret"),
    ]
    cached = informer.store.get_by_key("ns/a")
    assert cached is not None
    assert (cached["kind"], cached["metadata"]["resourceVersion"]) == ("Secret", "11")


async def test_full_informer_sends_no_accept_so_older_rest_clients_keep_working() -> None:
    rest = ScriptedRest([{"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5"}}], [])
    informer = SharedInformer(rest, CONFIG_MAPS, namespace="ns", label_selector="x=y")
    synced = asyncio.Event()
    informer.add_event_handler(FuncHandler(on_add=lambda _obj: synced.set()))
    await run_until(informer, synced)
    assert "accept" not in rest.list_kwargs[0]
    assert rest.list_kwargs[0]["query"]["labelSelector"] == "x=y"
    cached = informer.store.get_by_key("ns/a")
    assert cached is not None
    assert (cached["apiVersion"], cached["kind"]) == ("v1", "ConfigMap")


def test_factory_keys_informers_by_metadata_only_and_selects_only_full_ones() -> None:
    factory = SharedInformerFactory(
        ScriptedRest([], []), namespace="ns", label_selectors={SECRETS: "owned=yes"}
    )
    full = factory.informer_for(SECRETS)
    metadata = factory.informer_for(SECRETS, metadata_only=True)
    assert full is factory.informer_for(SECRETS, "ns")
    assert metadata is factory.informer_for(SECRETS, "ns", metadata_only=True)
    assert metadata is not full
    assert (full.label_selector, full.metadata_only) == ("owned=yes", False)
    assert (metadata.label_selector, metadata.metadata_only) == (None, True)
    assert factory.informer_for(CONFIG_MAPS).label_selector is None
    assert factory.informer_for(NAMESPACES, "x", metadata_only=True) is factory.informer_for(
        NAMESPACES, metadata_only=True
    )


class NoOp:
    async def reconcile(self, request: Request) -> Result:
        return Result()


def test_builder_watches_through_the_metadata_only_informer() -> None:
    manager = Manager(
        None,  # never started: no HTTP here
        field_manager="tests",
        namespace="ns",
        label_selectors={SECRETS: "owned=yes"},
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    build_controller(manager, "c").for_(SECRETS).watches(
        CONFIG_MAPS, lambda _obj: [], metadata_only=True
    ).watches(SECRETS, lambda _obj: [], metadata_only=True).complete(NoOp())
    assert sorted(
        (str(i.resource), i.metadata_only, i.label_selector) for i in manager.informers.informers
    ) == [
        ("configmaps", True, None),
        ("secrets", False, "owned=yes"),
        ("secrets", True, None),
    ]
    assert manager.informer(CONFIG_MAPS, metadata_only=True) in manager.informers.informers
