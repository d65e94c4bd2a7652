"""Status writes on the real API server: a key the decision drops goes away at any depth, and an
unchanged status writes nothing (controllers/status.py)."""

from __future__ import annotations

import attrs
import pytest

from controllers.status import status_patch
from valkey_operator.api.backup import RestorePhase, RestoreStatus
from valkey_operator.api.cluster import (
    ClusterState,
    NodeRole,
    NodeStatus,
    RolloutStatus,
    SwitchoverPhase,
    SwitchoverStatus,
    TlsStatus,
    ValkeyClusterStatus,
)
from valkey_operator.api.meta import Condition, ConditionStatus
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


FULL = ValkeyClusterStatus(
    state=ClusterState.UPDATING,
    message="rolling shard 1 of 3",
    endpoint="status-client.ns.svc.cluster.local:6379",
    observed_generation=4,
    shards=3,
    ready_shards=2,
    ready_nodes=5,
    ready="5/6",
    current_image="valkey/valkey:9.1.2",
    config_hash="abc",
    nodes=(
        NodeStatus(
            pod="status-0-a", shard=0, role=NodeRole.PRIMARY, node_id="n0", ip="10.0.0.1", slots="0-5460"
        ),
        NodeStatus(pod="status-0-b", shard=0, role=NodeRole.REPLICA, in_sync=False),
    ),
    rollout=RolloutStatus(shards_updated=0, shards=3, shard=0, step="", started_at="2026-12-04T10:00:00Z"),
    max_primaries_per_node=1,
    tls=TlsStatus(secret_hash="h", changed_at="2026-12-04T09:00:00Z"),
    restore=RestoreStatus(
        backup_name="nightly", phase=RestorePhase.VERIFIED, reason="RestoreVerified", keys=0
    ),
    last_backup="status-20261204",
    switchover=SwitchoverStatus(
        request="0", phase=SwitchoverPhase.SUCCEEDED, from_="status-0-a", to="status-0-b"
    ),
    conditions=(
        Condition(
            type="Ready",
            status=ConditionStatus.FALSE,
            reason="Updating",
            last_transition_time="2026-12-04T10:00:00Z",
        ),
        Condition(
            type="Progressing",
            status=ConditionStatus.TRUE,
            observed_generation=4,
            reason="UpdatePending",
            message="m",
            last_transition_time="2026-12-04T10:00:00Z",
        ),
    ),
)
"""Every field of the status, zeros and empty strings included (they are values, not absent)."""


async def test_the_typed_status_reads_back_as_written_and_a_second_pass_writes_nothing(
    kube: Client, namespace: str
) -> None:
    """The reconciler renders the decided model once and patches the stored document into it; the
    next pass parses the stored document into the model decide reads. The server keeps every field
    as rendered, so the parsed model is the decided one and deciding it again patches nothing."""
    await kube.create(VALKEY_CLUSTERS, cluster(namespace))
    first = await write(kube, namespace, FULL.to_dict())
    assert ValkeyClusterStatus.from_dict(first["status"]) == FULL
    assert status_patch(first["status"], FULL.to_dict()) is None

    # The roll ends and the switchover's record goes: both nested objects leave the server, and the
    # rendered dict holds no null or empty value the server could store differently.
    done = attrs.evolve(FULL, state=ClusterState.ACTIVE, rollout=None, switchover=None)
    second = await write(kube, namespace, done.to_dict())
    assert "rollout" not in second["status"] and "switchover" not in second["status"]
    assert ValkeyClusterStatus.from_dict(second["status"]) == done
    third = await write(kube, namespace, done.to_dict())
    assert third["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]
