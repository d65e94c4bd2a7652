"""The second example (an index and a finalizer, as the operator's image protection) on the real
API server: a mounted, labelled ConfigMap survives `delete` until its last pod is gone."""

from __future__ import annotations

import pytest
from example_manager import running_example
from kubernetes_asyncio import client as k8s

from examples.configmap_protection.operator import ENABLED_LABEL, FINALIZER, configmaps_mounted, setup
from valkey_operator.core import CONFIG_MAPS, PODS, Manager, Reconciler, Request, Result
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def pod(name: str, namespace: str, configmap: str) -> Obj:
    volume = {"name": "settings", "projected": {"sources": [{"configMap": {"name": configmap}}]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "app", "image": "example/app:1"}],  # never runs: only mounts count
            "volumes": [volume],
        },
    }


class Observed:
    """The example's own reconciler, recording (name, whether the cache showed it Terminating when the
    reconcile began) once each reconcile has succeeded."""

    def __init__(self, inner: Reconciler, manager: Manager, seen: list[tuple[str, bool]]) -> None:
        self.inner, self.cache, self.seen = inner, manager.cache, seen

    async def reconcile(self, request: Request) -> Result:
        current = self.cache.get(CONFIG_MAPS, request.name, request.namespace)
        deleting = bool(current and current["metadata"].get("deletionTimestamp"))
        result = await self.inner.reconcile(request)  # one that failed is retried: not recorded
        self.seen.append((request.name, deleting))
        return result


def test_the_index_finds_direct_and_projected_mounts() -> None:
    direct = {
        "metadata": {"namespace": "a"},
        "spec": {"volumes": [{"name": "v", "configMap": {"name": "x"}}]},
    }
    assert configmaps_mounted(direct) == ["a/x"]
    assert configmaps_mounted(pod("p", "a", "y")) == ["a/y"]
    assert configmaps_mounted({"metadata": {"namespace": "a"}, "spec": {}}) == []


async def test_a_mounted_configmap_waits_for_its_last_pod(kube_api: k8s.ApiClient, namespace: str) -> None:
    api = Client(RestClient(kube_api), field_manager="test")

    async def finalizers(name: str) -> list[str] | None:
        current = await api.get_or_none(CONFIG_MAPS, name, namespace)
        return None if current is None else list(current["metadata"].get("finalizers") or [])

    seen: list[tuple[str, bool]] = []

    def observed(manager: Manager) -> None:
        setup(manager)
        controller = manager.controllers[-1]
        controller.reconciler = Observed(controller.reconciler, manager, seen)

    async with running_example(kube_api, namespace, "configmap-protection", observed):
        labels = {ENABLED_LABEL: "true"}
        for name, metadata in (("guarded", {"labels": labels}), ("plain", {})):
            await api.create(CONFIG_MAPS, {"metadata": {"name": name, "namespace": namespace, **metadata}})
            await api.create(PODS, pod(f"uses-{name}", namespace, name))

        async def guarded() -> bool | NotYet:
            seen = await finalizers("guarded")
            return seen == [FINALIZER] or NotYet(seen)

        await eventually(guarded, "the finalizer on the mounted, labelled ConfigMap", 30, interval=0.1)
        assert await finalizers("plain") == []  # not labelled: never protected

        await api.delete(CONFIG_MAPS, "guarded", namespace)

        def passed_while_deleting() -> bool | NotYet:
            return ("guarded", True) in seen or NotYet(seen[-3:])

        # A reconcile that read the deletion from the cache has finished: it had its chance to let go.
        await eventually(passed_while_deleting, "a reconcile of the Terminating ConfigMap", 30, interval=0.05)
        assert await finalizers("guarded") == [FINALIZER]
        await api.delete(PODS, "uses-guarded", namespace, grace_period_seconds=0)

        async def gone() -> bool | NotYet:
            seen = await finalizers("guarded")
            return seen is None or NotYet(seen)

        await eventually(gone, "the ConfigMap deleted once its last pod is gone", 60, interval=0.2)
