"""The third example on the real API server: labelled Secrets of a namespace that is not the
manager's (for_(SECRETS, namespace=source), read through the cache) mirrored into the target, under
a finalizer and a Lease."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from example_manager import running_example
from kubernetes_asyncio import client as k8s

from examples.secret_mirror.operator import ENABLED_LABEL, FINALIZER, leader_election, setup
from valkey_operator.core import LEASES, NAMESPACES, SECRETS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest_asyncio.fixture
async def source(kube_api: k8s.ApiClient) -> AsyncIterator[str]:
    kube, name = Client(RestClient(kube_api), "test"), f"mirror-src-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    await kube.delete(NAMESPACES, name)


def secret(name: str, namespace: str, value: str, labels: dict[str, str]) -> Obj:
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "stringData": {"password": value}}


async def test_labelled_secrets_are_mirrored_kept_equal_and_cleaned_up(
    kube_api: k8s.ApiClient, namespace: str, source: str
) -> None:
    api, target = Client(RestClient(kube_api), "test"), namespace
    labels = {ENABLED_LABEL: "true"}

    async def copied(name: str) -> dict[str, str] | None:
        found = await api.get_or_none(SECRETS, name, target)
        return None if found is None else found.get("data")

    async def copy_is(name: str, data: dict[str, str] | None) -> bool | NotYet:
        seen = await copied(name)
        return seen == data or NotYet(seen)

    election = leader_election(target)
    wiring = lambda manager: setup(manager, source, target)  # noqa: E731
    async with running_example(kube_api, target, "secret-mirror", wiring, election):
        await api.create(SECRETS, secret("db", source, "one", labels))
        await api.create(SECRETS, secret("plain", source, "x", {}))
        await eventually(lambda: copy_is("db", {"password": "b25l"}), "the labelled Secret copied", 30)
        held = await api.get(SECRETS, "db", source)
        assert held["metadata"]["finalizers"] == [FINALIZER]
        lease = await api.get(LEASES, "secret-mirror", target)
        assert lease["spec"]["holderIdentity"] == election.identity

        await api.patch(SECRETS, "db", {"stringData": {"password": "two"}}, source)  # no generation
        await eventually(lambda: copy_is("db", {"password": "dHdv"}), "the data change mirrored", 30)
        await api.delete(SECRETS, "db", target)  # a copy deleted by hand is put back
        await eventually(lambda: copy_is("db", {"password": "dHdv"}), "the deleted copy restored", 30)
        assert await copied("plain") is None  # after positive signals: never labelled, never copied

        await api.create(SECRETS, secret("api", source, "k", labels))
        await eventually(lambda: copy_is("api", {"password": "aw=="}), "the second Secret copied", 30)
        await api.patch(SECRETS, "api", {"metadata": {"labels": {ENABLED_LABEL: None}}}, source)
        await eventually(lambda: copy_is("api", None), "the copy of the unlabelled Secret deleted", 30)

        async def released() -> bool | NotYet:
            finalizers = (await api.get(SECRETS, "api", source))["metadata"].get("finalizers")
            return not finalizers or NotYet(finalizers)

        await eventually(released, "the finalizer removed from the unlabelled Secret", 30)

        await api.delete(SECRETS, "db", source)  # held by the finalizer until the copy is gone
        await eventually(lambda: copy_is("db", None), "the copy deleted with its source", 30)

        async def source_gone() -> bool | NotYet:
            found = await api.get_or_none(SECRETS, "db", source)
            return found is None or NotYet(found["metadata"].get("finalizers"))

        await eventually(source_gone, "the source released by the finalizer", 30)
