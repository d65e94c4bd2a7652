"""Selectors on for_ and watches on the real API server: the informers hold only matching objects,
one that stops matching arrives as a delete, and data_changed passes a ConfigMap's data change."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from valkey_operator.core import CONFIG_MAPS, Manager, Request, Result, build_controller, data_changed
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


class Records:
    """Each reconcile's (name, what the cache held: its data, or None)."""

    def __init__(self, manager: Manager) -> None:
        self.cache = manager.cache
        self.seen: list[tuple[str, dict[str, str] | None]] = []

    async def reconcile(self, request: Request) -> Result:
        found = self.cache.get(CONFIG_MAPS, request.name, request.namespace)
        self.seen.append((request.name, None if found is None else dict(found.get("data") or {})))
        return Result()


def config_map(name: str, namespace: str, labels: dict[str, str], data: dict[str, str]) -> Obj:
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


async def test_selected_informers_hold_only_matching_objects_and_see_them_leave(
    kube_api: client.ApiClient, namespace: str
) -> None:
    kube = Client(RestClient(kube_api), "test")
    manager = Manager(
        kube_api,
        field_manager="selectors",
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    reconciler = Records(manager)
    named: list[str] = []
    builder = build_controller(manager, "selected").for_(
        CONFIG_MAPS, label_selector="mirror=yes", update_filter=data_changed
    )
    builder.watches(
        CONFIG_MAPS,
        lambda o: named.append(o["metadata"]["name"]) or [],
        field_selector="metadata.name=picked",
    ).complete(reconciler)
    by_label = manager.informers.existing(CONFIG_MAPS, label_selector="mirror=yes")
    by_field = manager.informers.existing(CONFIG_MAPS, field_selector="metadata.name=picked")
    assert by_label is not None and by_field is not None
    running = asyncio.create_task(manager.run())
    try:
        await kube.create(CONFIG_MAPS, config_map("labelled", namespace, {"mirror": "yes"}, {"k": "1"}))
        await kube.create(CONFIG_MAPS, config_map("picked", namespace, {}, {"k": "1"}))

        def reconciled(entry: tuple[str, dict[str, str] | None]) -> bool | NotYet:
            return entry in reconciler.seen or NotYet(reconciler.seen)

        await eventually(
            lambda: reconciled(("labelled", {"k": "1"})), "the labelled ConfigMap's reconcile", 30
        )
        await eventually(lambda: "picked" in named, "the field-selected watch's event", 30)
        assert by_label.store.list_keys() == [f"{namespace}/labelled"]  # no picked, no kube-root-ca.crt
        assert by_field.store.list_keys() == [f"{namespace}/picked"]
        assert all(name == "labelled" for name, _ in reconciler.seen)

        await kube.patch(CONFIG_MAPS, "labelled", {"data": {"k": "2"}}, namespace)  # no generation
        await eventually(lambda: reconciled(("labelled", {"k": "2"})), "the reconcile of the data change", 30)

        await kube.patch(CONFIG_MAPS, "labelled", {"metadata": {"labels": {"mirror": "no"}}}, namespace)
        await eventually(
            lambda: reconciled(("labelled", None)), "the unlabelled ConfigMap leaving the cache", 30
        )
        assert by_label.store.list_keys() == []
    finally:
        manager.stop()
        await asyncio.wait_for(running, 30)
