"""Status writes on the real API server: a key the decision drops goes away at any depth, and an
unchanged status writes nothing (controllers/status.py)."""

from __future__ import annotations

import pytest

from controllers.status import status_patch
from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60), pytest.mark.usefixtures("valkey_crds")]


def cluster(namespace: str) -> Obj:
    return {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": "status", "namespace": namespace},
        "spec": {"configRef": "absent", "shards": 3, "replicasPerShard": 1},
    }


async def write(kube: Client, namespace: str, desired: Obj) -> Obj:
    """What a reconciler does: patch only when the stored status differs; the stored object."""
    stored = await kube.get(VALKEY_CLUSTERS, "status", namespace)
    patch = status_patch(stored.get("status") or {}, desired)
    if patch is not None:
        await kube.patch_status(VALKEY_CLUSTERS, "status", patch, namespace)
    return await kube.get(VALKEY_CLUSTERS, "status", namespace)


async def test_a_dropped_nested_key_is_removed_and_a_quiet_write_writes_nothing(
    kube: Client, namespace: str
) -> None:
    await kube.create(VALKEY_CLUSTERS, cluster(namespace))
    loading = {"phase": "Loading", "backupName": "nightly", "message": "loading 3 shards", "shards": 3}
    first = await write(kube, namespace, {"state": "Creating", "restore": loading})
    assert first["status"]["restore"] == loading

    # The next decision no longer says message or shards: they must go from the stored status, or
    # every later pass would see a difference and patch again.
    verified = {"phase": "Verified", "backupName": "nightly"}
    second = await write(kube, namespace, {"state": "Creating", "restore": verified})
    assert second["status"] == {"state": "Creating", "restore": verified}

    # The same status again: no request, so the object does not change.
    third = await write(kube, namespace, {"state": "Creating", "restore": verified})
    assert third["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]

    # A whole nested object dropped goes too.
    fourth = await write(kube, namespace, {"state": "Active"})
    assert fourth["status"] == {"state": "Active"}
