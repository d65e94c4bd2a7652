"""The observer's pure parts: a NodeObservation from replies; which pods are owned and probed."""

from __future__ import annotations

from controllers.shared.names import MEMBER, MEMBER_LABEL
from controllers.shared.observation import NodeObservation, PodObservation, PodPhase
from controllers.shared.probe import node_from_replies, owned_pods, should_probe, version_text_of
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.slots import SlotRange

PRIMARY = "a" * 40
REPLICA = "b" * 40

NODES = (
    f"{PRIMARY} 127.0.0.10:6379@16379,p0 myself,master - 0 0 1 connected 0-8191\n"
    f"{REPLICA} 127.0.0.11:6379@16379,p1 slave {PRIMARY} 0 0 1 connected\n"
)
NODES_FROM_REPLICA = NODES.replace("myself,master", "master").replace("slave", "myself,slave")


def test_a_primary_reports_its_slots_offset_and_cluster_state() -> None:
    info = {"valkey_version": "9.1.2", "role": "master", "master_repl_offset": "1234"}
    node = node_from_replies(info, {"cluster_state": "ok"}, PRIMARY, "s" * 40, NODES)
    assert node.reachable and node.version == (9, 1, 2) and node.role is NodeRole.PRIMARY
    assert node.slots == (SlotRange(0, 8191),)
    assert node.repl_offset == 1234 and node.link_up is None and node.cluster_ok is True
    assert node.primary_id is None and node.shard_id == "s" * 40
    assert {known.node_id for known in node.peers} == {REPLICA}


def test_a_replica_reports_its_primary_link_and_processed_offset() -> None:
    info = {
        "valkey_version": "9.1.2",
        "role": "slave",
        "master_link_status": "up",
        "slave_repl_offset": "1200",
        "master_repl_offset": "1234",
    }
    node = node_from_replies(info, {"cluster_state": "fail"}, REPLICA, None, NODES_FROM_REPLICA)
    assert node.role is NodeRole.REPLICA and node.primary_id == PRIMARY
    assert node.link_up is True and node.repl_offset == 1200
    assert node.slots == () and node.cluster_ok is False


def test_a_replica_whose_link_is_down_says_since_when_and_never_is_minus_one() -> None:
    info = {"valkey_version": "9.1.2", "role": "slave", "master_link_status": "down"}
    dropped = node_from_replies(
        {**info, "master_link_down_since_seconds": "7"}, {}, REPLICA, None, NODES_FROM_REPLICA
    )
    never = node_from_replies(
        {**info, "master_link_down_since_seconds": "-1"}, {}, REPLICA, None, NODES_FROM_REPLICA
    )
    up = node_from_replies({**info, "master_link_status": "up"}, {}, REPLICA, None, NODES_FROM_REPLICA)
    assert (dropped.link_up, dropped.link_down_seconds) == (False, 7)
    assert never.link_down_seconds == -1
    assert (up.link_up, up.link_down_seconds) == (True, None)


def test_migrations_are_parsed_and_malformed_entries_skipped() -> None:
    info = {"valkey_version": "9.1.2", "role": "master"}
    entry = {
        "name": "m1",
        "operation": "EXPORT",
        "slot_ranges": "0-10",
        "source_node": PRIMARY,
        "target_node": REPLICA,
        "state": "in_progress",
        "last_update_time": "5",
    }
    node = node_from_replies(info, {}, PRIMARY, None, NODES, [entry, {"operation": "bogus"}])
    assert len(node.migrations) == 1 and node.migrations[0].active


def test_version_text_names_what_a_non_valkey_server_reports() -> None:
    assert version_text_of({"valkey_version": "8.1.8"}) == "8.1.8"
    assert version_text_of({"redis_version": "7.2.4"}) == "redis_version 7.2.4"
    assert version_text_of({}) is None


def pod(
    name: str, *, uid: str = "u1", cluster: str = "c", ready: bool = True, deleting: bool = False
) -> dict:
    metadata: dict = {
        "name": name,
        "namespace": "ns",
        "labels": {"valkey.gomomento.com/cluster": cluster, "valkey.gomomento.com/shard": "0"},
        "ownerReferences": [{"uid": uid, "controller": True}],
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    status = {
        "phase": "Running",
        "podIP": "127.0.0.9",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    return {"metadata": metadata, "status": status}


def test_only_pods_controlled_by_this_incarnation_are_owned() -> None:
    pods = [pod("a"), pod("b", uid="old"), pod("c", cluster="other")]
    assert [p["metadata"]["name"] for p in owned_pods(pods, "c", "u1")] == ["a"]


def test_ready_terminating_or_starting_pods_with_an_ip_are_probed() -> None:
    assert should_probe(PodObservation.from_pod(pod("a")))
    assert should_probe(PodObservation.from_pod(pod("a", ready=False, deleting=True)))
    starting = PodObservation.from_pod(pod("a", ready=False))
    assert starting.starting and should_probe(starting)  # MET before its readiness probe passes
    member = pod("a", ready=False)
    member["metadata"]["labels"][MEMBER_LABEL] = MEMBER
    assert not PodObservation.from_pod(member).starting and not should_probe(PodObservation.from_pod(member))
    shardless = pod("a", ready=False)
    del shardless["metadata"]["labels"]["valkey.gomomento.com/shard"]
    assert not should_probe(PodObservation.from_pod(shardless))
    pending = PodObservation.from_pod({"metadata": {"name": "p"}, "status": {"phase": "Pending"}})
    assert pending.phase is PodPhase.PENDING and not should_probe(pending)


def test_unreachable_is_a_fact() -> None:
    node = NodeObservation.unreachable("refused")
    assert not node.reachable and node.error == "refused"
