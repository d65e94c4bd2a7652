"""The ValkeyRole reconciler on the real API server: its InUse condition names the clusters that use
the role, which is what keeps a delete waiting on the protection finalizer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from cluster_scoped import ClusterScoped
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s

from controllers.role import IN_USE
from valkey_operator.api.resources import ROLE_PROTECTION_FINALIZER, VALKEY_CLUSTERS, VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.rest import Obj
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.usefixtures("valkey_crds")]


@pytest_asyncio.fixture
async def operator(kube_api: k8s.ApiClient, namespace: str) -> AsyncIterator[Operator]:
    running = Operator(kube_api, namespace, workers={"image": 1, "config": 1, "role": 1})
    await running.start()
    yield running
    await running.stop()


@pytest_asyncio.fixture
async def names(kube: Client, namespace: str) -> AsyncIterator[ClusterScoped]:
    created = ClusterScoped(kube, namespace[-6:])
    yield created
    await created.cleanup()


def cluster(name: str, namespace: str, role: str) -> Obj:
    """A cluster whose one user takes its commands from `role` (its config does not exist: the
    cluster stays blocked and runs no pod, which the role's reconciler does not care about)."""
    user = {
        "username": "app",
        "passwordHashes": ["a" * 64],
        "permissions": [{"roleRef": role, "keys": [{"pattern": "*", "access": "readwrite"}]}],
    }
    return {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configRef": "absent", "shards": 1, "replicasPerShard": 0, "acl": [user]},
    }


async def in_use(kube: Client, role: str, status: str, message: str) -> Obj:
    """The role once its InUse condition has that status and message, for its current generation."""

    async def done() -> Obj | NotYet:
        current = await kube.get(VALKEY_ROLES, role)
        seen = current.get("status") or {}
        condition = find_condition(seen.get("conditions"), IN_USE) or {}
        generation = current["metadata"]["generation"]
        ok = (
            condition.get("status") == status
            and condition.get("message") == message
            and condition.get("observedGeneration") == generation
            and seen.get("observedGeneration") == generation
        )
        return current if ok else NotYet(condition)

    return await eventually(done, f"{role} InUse={status}: {message}", 60, interval=0.2)


async def test_in_use_names_the_clusters_that_use_a_role_and_why_its_delete_waits(
    operator: Operator, kube: Client, names: ClusterScoped, namespace: str
) -> None:
    role = names("reader")
    await names.create(VALKEY_ROLES, {"metadata": {"name": role}, "spec": {"categories": [{"name": "read"}]}})
    unused = await in_use(kube, role, "False", "no cluster uses this role")
    assert (find_condition(unused["status"]["conditions"], IN_USE) or {}).get("reason") == "Unused"

    await kube.create(VALKEY_CLUSTERS, cluster("c1", namespace, role))
    await in_use(kube, role, "True", f"used by 1 cluster: {namespace}/c1; a delete waits until none uses it")
    await kube.create(VALKEY_CLUSTERS, cluster("c2", namespace, role))
    both = f"used by 2 clusters: {namespace}/c1, {namespace}/c2; a delete waits until none uses it"
    used = await in_use(kube, role, "True", both)
    assert (find_condition(used["status"]["conditions"], IN_USE) or {}).get("reason") == "UsedByClusters"

    # A delete waits on the finalizer, and the condition says for whom.
    await kube.delete(VALKEY_ROLES, role)
    waiting = await in_use(kube, role, "True", both)
    assert "deletionTimestamp" in waiting["metadata"]
    assert ROLE_PROTECTION_FINALIZER in waiting["metadata"]["finalizers"]
    # A cluster that stops naming the role is dropped from the message; the last one releases it.
    await kube.patch(VALKEY_CLUSTERS, "c1", {"spec": {"acl": None}}, namespace)
    await in_use(kube, role, "True", f"used by 1 cluster: {namespace}/c2; a delete waits until none uses it")
    await kube.delete(VALKEY_CLUSTERS, "c2", namespace)

    async def gone() -> bool | NotYet:
        current = await kube.get_or_none(VALKEY_ROLES, role)
        return current is None or NotYet(current["metadata"])

    await eventually(gone, f"{role} released and deleted", 60)
