"""decide() with persistence, on the simulator: durable nodes come back on their own claims (SPEC 1.6).

The simulated claim keeps what a real one does: the node persisted on it (its
id, slots, role and peers). Each story loses pods the way production does and
checks the operator's side of the promise: the replacement starts on the lost
node's claim and comes back as that node, its id is never forgotten meanwhile,
planned removals take their claims with them, a volume that came back empty is
reported and repaired, and the claims grow but never shrink.
"""

from __future__ import annotations

from decide_harness import World, config, run, step, world
from simulate import SimSettings

from controllers.cluster.decision.actions import CreatePod, DeleteClaim, DeletePod, Forget, PatchClaim
from controllers.cluster.decision.report import Reason
from controllers.shared.names import MODE_ANNOTATION, NODE_ID_ANNOTATION
from valkey_operator.api.cluster import ClusterState
from valkey_operator.valkey.slots import subtract

ACTIVE = ClusterState.ACTIVE.value


def durable(shards: int = 2, replicas: int = 1, size: str = "1Gi", **sim: object) -> World:
    found = world(shards, replicas, SimSettings(cluster="vk", **sim))  # type: ignore[arg-type]
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": size})
    run(found, passes=120)
    assert found.state == ACTIVE, found.status.get("message")
    run(found, passes=3, until=lambda w: False)  # the claims record their node ids
    return found


def identities(found: World) -> dict[str, str]:
    """claim -> the node id its live pod's server runs (every pod runs on a claim)."""
    found_ids = {}
    for pod in found.sim.pods.values():
        assert pod.claim is not None, pod
        if pod.node_id is not None and found.sim.nodes[pod.node_id].alive:
            found_ids[pod.claim] = pod.node_id
    return found_ids


def forgotten(found: World, since: int) -> set[str]:
    return {
        action.node_id
        for decision in found.decisions[since:]
        for action in decision.actions
        if isinstance(action, Forget)
    }


def test_every_pod_runs_on_its_own_claim_and_the_claim_records_its_node_id() -> None:
    found = durable()
    claims = found.sim.claims
    assert len(claims) == 4 == len(found.sim.pods)
    assert sorted(pod.claim for pod in found.sim.pods.values()) == sorted(claims)
    for pod in found.sim.pods.values():
        assert claims[pod.claim or ""].annotations[NODE_ID_ANNOTATION] == pod.node_id
    assert {claim.requested for claim in claims.values()} == {1 << 30}


def test_a_deleted_pod_comes_back_on_its_claim_as_the_same_node_and_its_id_is_never_forgotten() -> None:
    found = durable()
    before = identities(found)
    lost = next(pod for pod in found.sim.pods.values() if found.sim.node_of(pod.name).slots)  # type: ignore[union-attr]
    since = len(found.decisions)
    found.sim.delete_pod(lost.name)
    run(found, passes=2, until=lambda w: False)
    run(found, passes=120)
    assert found.state == ACTIVE, found.status.get("message")
    assert lost.name not in found.sim.pods
    assert identities(found) == before, "every claim runs its old node again"
    assert not forgotten(found, since) & set(before.values())
    created = [a for d in found.decisions[since:] for a in d.actions if isinstance(a, CreatePod)]
    assert [action.claim for action in created] == [lost.claim]
    assert all(action.claim_body is None for action in created), "the claim existed: no new claim"


def test_a_crashed_server_comes_back_on_its_claim_while_its_failed_pod_stays_as_evidence() -> None:
    found = durable()
    before = identities(found)
    crashed = sorted(found.sim.pods)[0]
    found.sim.crash_pod(crashed)
    run(found, passes=2, until=lambda w: False)
    run(found, passes=120)
    assert found.state == ACTIVE, found.status.get("message")
    assert identities(found) == before
    assert crashed in found.sim.pods, "the Failed pod is kept"


def test_every_pod_lost_at_once_comes_back_whole_and_nothing_is_reported_lost() -> None:
    found = durable(shards=3)
    before = identities(found)
    since = len(found.decisions)
    for pod in list(found.sim.pods):
        found.sim.delete_pod(pod)
    run(found, passes=3, until=lambda w: False)
    run(found, passes=200)
    assert found.state == ACTIVE, found.status.get("message")
    assert identities(found) == before
    assert not forgotten(found, since)
    reasons = {
        finding.reason for d in found.decisions[since:] if d.plan for finding in d.plan.status.findings
    }
    assert Reason.DATA_LOST not in reasons


def test_a_claim_that_came_back_empty_is_reported_and_its_node_rejoins_as_a_new_replica() -> None:
    found = durable()
    before = identities(found)
    victim = sorted(found.sim.pods)[0]
    claim = found.sim.pods[victim].claim or ""
    found.sim.lose_volume(claim)
    found.sim.crash_pod(victim)
    since = len(found.decisions)
    run(found, passes=2, until=lambda w: False)
    run(found, passes=200)
    assert found.state == ACTIVE, found.status.get("message")
    after = identities(found)
    assert after[claim] != before[claim] and after.items() - {(claim, after[claim])} <= before.items()
    assert found.sim.claims[claim].annotations[NODE_ID_ANNOTATION] == after[claim]
    assert before[claim] in forgotten(found, since), "the old identity is departed for good"
    events = [event for d in found.decisions[since:] for event in d.events]
    assert [event.reason for event in events if event.reason == Reason.VOLUME_LOST] == [Reason.VOLUME_LOST]


def test_a_roll_retires_each_old_pod_with_its_claim() -> None:
    found = durable(shards=1, replicas=1)
    old = set(found.sim.claims)
    found.images["v9b"] = {
        "metadata": {"name": "v9b"},
        "spec": {"repository": "valkey/valkey", "tag": "9.1.3"},
    }
    found.configs["cfg"] = config(image="v9b", persistence={"mode": "aof", "size": "1Gi"})
    run(found, passes=2, until=lambda w: False)
    run(found, passes=200)
    assert found.state == ACTIVE and found.status.get("currentImage", "").endswith("9.1.3"), found.status
    deleted = [a for d in found.decisions for a in d.actions if isinstance(a, DeletePod)]
    assert deleted and all(action.claim in old for action in deleted), deleted
    assert not old & set(found.sim.claims), "the retired pods' claims are gone"
    assert len(found.sim.claims) == 2


def test_scaling_in_deletes_the_leaving_shard_claims_with_its_pods() -> None:
    found = durable(shards=3, replicas=1)
    found.edit(shards=2)
    run(found, passes=2, until=lambda w: False)
    run(found, passes=300)
    assert found.state == ACTIVE, found.status.get("message")
    assert {claim.shard for claim in found.sim.claims.values()} == {0, 1}
    assert len(found.sim.claims) == 4


def test_a_larger_size_grows_the_claims_and_a_smaller_one_is_reported_not_applied() -> None:
    found = durable(shards=1, replicas=1)
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": "2Gi"})
    run(found, passes=3, until=lambda w: False)
    assert {claim.requested for claim in found.sim.claims.values()} == {2 << 30}
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": "1Gi"})
    step(found)
    step(found)
    assert found.state == ACTIVE
    assert Reason.CLAIM_SHRINK_REFUSED in found.reasons
    assert not [a for a in found.decisions[-1].actions if isinstance(a, PatchClaim | DeleteClaim)]
    assert {claim.requested for claim in found.sim.claims.values()} == {2 << 30}


def test_a_class_that_cannot_expand_is_reported_and_the_cluster_stays_active() -> None:
    """No patch the API server would refuse, no roll, nothing in progress: only the reason (a GitOps
    tool must not see the cluster progressing forever)."""
    found = durable(shards=1, replicas=1, expandable=False)
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": "2Gi"})
    step(found)
    step(found)
    assert found.state == ACTIVE, found.status
    assert Reason.CLAIM_GROWTH_REFUSED in found.reasons
    assert "does not allow volume expansion" in found.status.get("message", "") or any(
        "does not allow volume expansion" in str(c.get("message")) for c in found.status.get("conditions", [])
    )
    assert not [a for a in found.decisions[-1].actions if isinstance(a, PatchClaim)]
    assert {claim.requested for claim in found.sim.claims.values()} == {1 << 30}


def test_after_a_mode_change_no_pod_starts_on_a_claim_written_in_the_other_mode() -> None:
    found = durable(shards=1, replicas=1)
    aof_claims = set(found.sim.claims)
    found.configs["cfg"] = config(persistence={"mode": "rdb", "size": "1Gi"})
    since = len(found.decisions)
    for pod in sorted(found.sim.pods):  # lost as the roll begins: their aof claims must not be reused
        found.sim.delete_pod(pod)
    run(found, passes=2, until=lambda w: False)
    run(found, passes=300)
    assert found.state == ACTIVE, found.status.get("message")
    created = [a for d in found.decisions[since:] for a in d.actions if isinstance(a, CreatePod)]
    assert created and not [action for action in created if action.claim in aof_claims], created
    assert not aof_claims & set(found.sim.claims), "the aof claims are gone"
    modes = {claim.annotations.get(MODE_ANNOTATION) for claim in found.sim.claims.values()}
    assert modes == {"rdb"}


def test_a_claim_no_server_can_start_on_is_replaced_once_its_data_is_served_elsewhere() -> None:
    found = durable(shards=1, replicas=1)
    primary = next(name for name, pod in found.sim.pods.items() if found.sim.nodes[pod.node_id or ""].slots)
    claim = found.sim.pods[primary].claim or ""
    old_id = found.sim.pods[primary].node_id
    old_uid = found.sim.claims[claim].uid
    found.sim.lose_volume(claim, unusable=True)
    found.sim.crash_pod(primary)
    since = len(found.decisions)
    run(found, passes=3, until=lambda w: False)
    run(found, passes=300)
    assert found.state == ACTIVE, found.status.get("message")
    uids = {claim.uid for claim in found.sim.claims.values()}
    assert old_uid not in uids, "the unusable claim is replaced"
    assert len(found.sim.claims) == 2 and old_id in forgotten(found, since)
    assert Reason.VOLUME_LOST in found.reasons
    promoted = [a for d in found.decisions[since:] for a in d.actions if type(a).__name__ == "Promote"]
    assert promoted, "a single shard has no vote: the operator promotes the replica"


def _first_pass_starting_on(found: World, claim: str, since: int) -> int | None:
    for index, decision in enumerate(found.decisions[since:]):
        if any(isinstance(a, CreatePod) and a.claim == claim for a in decision.actions):
            return index
    return None


def crash_a_primary(appendfsync: str) -> tuple[World, str, str, int]:
    """A 2x1 aof cluster whose primary's server crashed, run until Active again: the world, the
    primary's claim and node id, and the index of the first decision after the crash."""
    found = world(2, 1, SimSettings(cluster="vk", node_timeout=4))
    found.configs["cfg"] = config(persistence={"mode": "aof", "appendfsync": appendfsync, "size": "1Gi"})
    run(found, passes=120)
    run(found, passes=3, until=lambda w: False)
    primary = next(name for name, pod in found.sim.pods.items() if found.sim.nodes[pod.node_id or ""].slots)
    claim, node_id = found.sim.pods[primary].claim or "", found.sim.pods[primary].node_id or ""
    found.sim.crash_pod(primary)
    since = len(found.decisions)
    run(found, passes=2, until=lambda w: False)
    run(found, passes=120)
    assert found.state == ACTIVE, found.status.get("message")
    return found, claim, node_id, since


def test_a_crashed_primary_comes_back_only_once_its_replica_serves_its_slots() -> None:
    """rdb and aof everysec: its files may hold less than its replica acknowledged."""
    found, claim, node_id, since = crash_a_primary("everysec")
    started = _first_pass_starting_on(found, claim, since)
    assert started is not None
    view = found.decisions[since + started].plan.view  # type: ignore[union-attr]
    assert not subtract(view.claims.get(node_id, ()), view.served), "its slots were served by its replica"
    unserved = [d for d in found.decisions[since : since + started] if d.plan and d.plan.view.stranded]
    assert unserved, "its slots were unserved for a while, and no pod started on its claim meanwhile"
    assert found.sim.nodes[node_id].role.value == "replica" and not found.sim.nodes[node_id].slots
    assert identities(found)[claim] == node_id


def test_with_aof_always_a_crashed_primary_comes_back_at_once() -> None:
    """Its own file holds every write it acknowledged: the best copy of its shard."""
    found, claim, _, since = crash_a_primary("always")
    assert _first_pass_starting_on(found, claim, since) == 0
