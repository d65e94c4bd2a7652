"""decide() with spec.backup.pointInTime, on the simulator: status.pointInTime and the metric are the
oldest mark of the slot-serving primaries' archivers; a primary without one, a config without an
AOF, an unknown operator image or unreadable storage each say why and report no mark."""

from __future__ import annotations

import attrs
from decide_harness import OPTIONS, World, config, run, world
from simulate import SimSettings

from controllers.cluster.decision.actions import CreatePod
from controllers.cluster.decision.archive import STATUS_REFRESH_S, ArchiveProgress, NodeProgress, topology
from controllers.cluster.render import archiver
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.core.clock import rfc3339

IMAGE = "registry.example/valkey-operator:1.2.3"
BACKUP = {
    "schedule": "0 3 * * *",
    "keep": 3,
    "destination": {"endpoint": "https://s3.example", "bucket": "backups", "credentialsSecretName": "s3"},
    "pointInTime": {},
}
T = 1_790_000_000.0


def archiving(mode: str = "aof", image: str = IMAGE) -> World:
    found = world(2, 1, SimSettings(cluster="vk"), backup=BACKUP)
    found.configs["cfg"] = config(persistence={"mode": mode, "size": "1Gi"})
    found.options = attrs.evolve(OPTIONS, operator_image=image)
    run(found, passes=120)
    assert found.state == ClusterState.ACTIVE.value, found.status.get("message")
    return found


def nodes(found: World, role: NodeRole) -> list[str]:
    return sorted(
        node.node_id
        for node in found.sim.nodes.values()
        if node.alive and node.role is role and (node.slots or role is NodeRole.REPLICA)
    )


def point_in_time(found: World) -> dict[str, str]:
    run(found, passes=1, until=lambda w: False)
    return dict(found.status.get("pointInTime") or {})


def test_the_mark_is_the_oldest_primarys_and_replicas_do_not_count() -> None:
    found = archiving()
    first, second = nodes(found, NodeRole.PRIMARY)
    replicas = nodes(found, NodeRole.REPLICA)
    progress = {first: NodeProgress(T + 7.9), second: NodeProgress(T + 3.2)}
    found.archive = ArchiveProgress(nodes={**progress, **{r: NodeProgress(T - 600) for r in replicas}})
    assert point_in_time(found) == {"archivedUntil": rfc3339(T + 3)}
    assert found.last.metrics.archived_until == T + 3.2
    assert found.last.requeue_after <= STATUS_REFRESH_S
    created = [a.body for d in found.decisions for a in d.actions if isinstance(a, CreatePod)]
    assert len(created) == 4
    for body in created:
        assert archiver.CONTAINER_NAME in {c["name"] for c in body["spec"].get("initContainers", [])}


def test_a_blocked_cluster_keeps_its_recorded_mark_as_the_metric() -> None:
    found = archiving()
    found.archive = ArchiveProgress(
        nodes={node: NodeProgress(T + 7.9) for node in nodes(found, NodeRole.PRIMARY)}
    )
    assert point_in_time(found) == {"archivedUntil": rfc3339(T + 7)}
    del found.configs["cfg"]  # blocked: nothing is observed, the archivers run on
    run(found, passes=1, until=lambda w: False)
    assert found.last.status.message.startswith("ConfigNotFound"), found.last.status.message
    assert found.last.metrics.archived_until == T + 7, "the series stays while the cluster is blocked"


def test_a_primary_without_a_mark_means_no_mark_and_names_its_pod() -> None:
    found = archiving()
    first, second = nodes(found, NodeRole.PRIMARY)
    replicas = nodes(found, NodeRole.REPLICA)
    found.archive = ArchiveProgress(nodes={first: NodeProgress(T), **{r: NodeProgress(T) for r in replicas}})
    status = point_in_time(found)
    assert status["reason"] == "ArchiveNotStarted" and "archivedUntil" not in status
    [pod] = [p.name for p in found.sim.pods.values() if p.node_id == second]
    assert pod in status["message"]
    assert found.last.metrics.archived_until is None


def test_a_gap_is_reported_with_the_mark() -> None:
    found = archiving()
    first, second = nodes(found, NodeRole.PRIMARY)
    found.archive = ArchiveProgress(nodes={first: NodeProgress(T, (1,)), second: NodeProgress(T + 1)})
    status = point_in_time(found)
    assert status["archivedUntil"] == rfc3339(T) and status["reason"] == "ArchiveGap"
    assert "files 1" in status["message"]


def test_unreadable_storage_says_why() -> None:
    found = archiving()
    found.archive = ArchiveProgress(reason="CredentialsMissing", message="Secret vk/s3 not found")
    status = point_in_time(found)
    assert status["reason"] == "CredentialsMissing" and "Secret vk/s3 not found" in status["message"]


def test_without_an_aof_or_the_image_nothing_is_archived_and_the_status_says_why() -> None:
    for mode, image, reason in (("rdb", IMAGE, "NeedsAppendOnly"), ("aof", "", "OperatorImageUnknown")):
        found = archiving(mode, image)
        status = point_in_time(found)
        assert status["reason"] == reason and "archivedUntil" not in status, status
        created = [a.body for d in found.decisions for a in d.actions if isinstance(a, CreatePod)]
        assert created and all("initContainers" not in body["spec"] for body in created)


def test_a_cluster_that_does_not_archive_has_no_point_in_time_status() -> None:
    found = world(1, 0, SimSettings(cluster="vk"))
    run(found, passes=60)
    assert "pointInTime" not in found.status
    assert found.last.metrics.archived_until is None


def test_the_topology_record_names_each_slot_ranges_primary_and_its_replicas() -> None:
    found = archiving()
    run(found, passes=1, until=lambda w: False)
    decision = found.last
    assert decision.context is not None and decision.facts is not None
    shape = topology(decision.context, decision.facts.observation)
    assert shape is not None and decision.topology == shape, "the pass hands the map to the reconciler"
    shards = shape["shards"]
    assert [s["slots"] for s in shards] == ["0-8191", "8192-16383"]
    for shard in shards:
        primary = found.sim.nodes[shard["primary"]]
        assert primary.role is NodeRole.PRIMARY
        assert [found.sim.nodes[r].primary_id for r in shard["replicas"]] == [shard["primary"]]
    observation = decision.facts.observation
    assert observation is not None
    half = {pod: node for pod, node in observation.nodes.items() if node.slots and node.slots[0].start == 0}
    assert topology(decision.context, attrs.evolve(observation, nodes=half)) is None, "half the slots: no map"
    off = archiving("rdb")
    run(off, passes=1, until=lambda w: False)
    assert off.last.context is not None and topology(off.last.context, off.last.facts.observation) is None  # type: ignore[union-attr]
