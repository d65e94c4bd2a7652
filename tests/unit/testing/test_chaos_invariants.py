"""The chaos run's judgement of the nodes and the status: pure functions of what nodes reported."""

from __future__ import annotations

from typing import Any

from valkey_operator.valkey.slots import SlotRange, format_slot_ranges
from valkey_testbed.chaos.invariants import status_claims
from valkey_testbed.chaos.nodes import (
    NodeFacts,
    convergence_problems,
    hosts_holding_a_whole_shard,
    shards_without_replica,
    uncovered,
)

HALVES = ((SlotRange(0, 8191),), (SlotRange(8192, 16383),))


def healthy() -> dict[str, NodeFacts]:
    """Two shards with one replica each, as their nodes report themselves."""
    facts = {}
    for shard, slots in enumerate(HALVES):
        primary, replica = f"127.0.1.{shard * 2 + 1}", f"127.0.1.{shard * 2 + 2}"
        facts[primary] = NodeFacts(
            primary, node_id=f"p{shard}", role="primary", slots=slots, version="9.1.2",
            cluster_state="ok", replicas_online=1, policy="allkeys-lru",
        )  # fmt: skip
        facts[replica] = NodeFacts(
            replica, node_id=f"r{shard}", role="replica", primary_id=f"p{shard}", version="9.1.2",
            cluster_state="ok", policy="allkeys-lru",
        )  # fmt: skip
    return facts


def cluster_for(facts: dict[str, NodeFacts], **status: Any) -> dict[str, Any]:
    nodes = [
        {
            "pod": f"pod-{ip}",
            "ip": ip,
            "nodeId": node.node_id,
            "role": node.role,
            "version": node.version,
            "slots": format_slot_ranges(node.slots) or None,
        }
        for ip, node in facts.items()
    ]
    body: dict[str, Any] = {
        "state": "Active", "observedGeneration": 4, "shards": 2, "currentImage": "valkey/valkey:9.1.2",
        "nodes": nodes,
    }  # fmt: skip
    body.update(status)
    return {"metadata": {"generation": 4}, "spec": {"shards": 2, "replicasPerShard": 1}, "status": body}


def test_a_healthy_cluster_converged_and_its_true_status_claims_nothing_false() -> None:
    facts = healthy()
    assert convergence_problems(facts, 2, 1) == []
    assert status_claims(cluster_for(facts), facts, "allkeys-lru") == []
    assert uncovered(facts) == ()


def test_a_dead_primary_uncovers_its_slots_and_an_active_status_then_lies() -> None:
    facts = healthy()
    facts["127.0.1.1"] = NodeFacts("127.0.1.1", error="connection refused")
    assert format_slot_ranges(uncovered(facts)) == "0-8191"
    problems = convergence_problems(facts, 2, 1)
    assert any("unreachable" in problem for problem in problems)
    assert any("0-8191 not served" in problem for problem in problems)
    false = status_claims(cluster_for(healthy()), facts, "allkeys-lru")
    assert any("no node answers" in claim for claim in false), false
    assert any("not served" in claim for claim in false), false


def test_a_status_claiming_the_wrong_version_shards_or_setting_is_caught() -> None:
    facts = healthy()
    assert any(
        "currentImage" in c
        for c in status_claims(cluster_for(facts, currentImage="valkey/valkey:9.1.0"), facts, "allkeys-lru")
    )
    wrong_shards = cluster_for(facts, shards=3)
    wrong_shards["spec"]["shards"] = 3
    assert any("3 shards" in c for c in status_claims(wrong_shards, facts, "allkeys-lru"))
    assert any("maxmemory-policy" in c for c in status_claims(cluster_for(facts), facts, "noeviction"))


def test_a_status_that_is_not_active_or_not_current_claims_nothing() -> None:
    facts = healthy()
    facts["127.0.1.1"] = NodeFacts("127.0.1.1", error="down")
    assert status_claims(cluster_for(healthy(), state="Updating"), facts, "allkeys-lru") == []
    assert status_claims(cluster_for(healthy(), observedGeneration=3), facts, "allkeys-lru") == []


def test_a_shard_without_an_online_replica_is_named_and_not_converged() -> None:
    facts = healthy()
    facts["127.0.1.3"] = NodeFacts(
        "127.0.1.3", node_id="p1", role="primary", slots=HALVES[1], version="9.1.2", cluster_state="ok",
        replicas_online=0, policy="allkeys-lru",
    )  # fmt: skip
    assert shards_without_replica(facts) == ["8192-16383"]
    assert any("0 online replicas" in problem for problem in convergence_problems(facts, 2, 1))


def test_a_host_with_both_copies_of_a_shard_is_unsafe_to_fail() -> None:
    facts = healthy()
    spread = {"127.0.1.1": "a", "127.0.1.2": "b", "127.0.1.3": "b", "127.0.1.4": "c"}
    assert hosts_holding_a_whole_shard(facts, spread) == set()
    crowded = {**spread, "127.0.1.2": "a"}
    assert hosts_holding_a_whole_shard(facts, crowded) == {"a"}
