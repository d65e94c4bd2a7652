"""A bootstrap forms the cluster while the readiness probes have not passed yet (docs/performance.md
"Bootstrap").

A new pod's server answers well before the kubelet's tcp readiness probe (every
2 s, its first try before the server listens) marks it Ready, and Valkey's
writable delay and the replica's diskless sync delay run from MEET, ADDSLOTS and
REPLICATE, not from readiness. So a starting pod whose server answers is MET (by
a starting seed when no pod is Ready yet), takes its shard's unowned slots and
replicates its primary; every pod that may run a server must still have answered
before any slot is assigned. What clients see still waits for Kubernetes: no
member label (client Service) on a pod that is not Ready, readyNodes counts
Ready pods only, and the status is Active only once every pod is Ready.

The simulated world here has a readiness lag (SimSettings.readiness_lag): pods
run and answer for some passes before they are Ready; every pass goes through
the harness, which checks SPEC 5's invariants against the world's ground truth.
"""

from __future__ import annotations

import attrs
from planner_harness import run
from simulate import SimSettings, SimulatedCluster

from controllers.cluster.decision.actions import AssignSlots, MarkMember, Meet, Replicate
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import JOIN_WINDOW_S, REQUEUE_FAST, plan, settling
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.view import View
from controllers.shared.observation import Observation
from valkey_operator.api.cluster import ClusterState, NodeRole

LAG = 4
"""Passes from a server answering to its pod being Ready: longer than forming the cluster takes."""


def desired(shards: int = 3, replicas: int = 1) -> Desired:
    return Desired(
        shards=shards, replicas_per_shard=replicas, template_hash="t1", image="valkey/valkey:9.0.1"
    )


def lagging(**changes: object) -> SimSettings:
    return attrs.evolve(SimSettings(readiness_lag=LAG), **changes)


def kinds(sim: SimulatedCluster, observation: Observation, wanted: Desired) -> set[str]:
    return {type(action).__name__ for action in plan(observation, wanted, sim.context()).actions}


def test_the_cluster_forms_before_any_pod_is_ready_and_is_active_only_once_every_pod_is() -> None:
    wanted = desired()
    result = run(wanted, settings=lagging())
    assert result.last.status.state is ClusterState.ACTIVE
    sim = result.sim
    running = min(pod.running_tick for pod in sim.pods.values())
    first_ready = running + LAG
    actions = [(index, action) for index, planned in enumerate(result.plans) for action in planned.actions]
    topology = [index for index, action in actions if isinstance(action, Meet | AssignSlots | Replicate)]
    assert topology and max(topology) < first_ready, "MEET, slots and replicas wait for readiness"
    assert {type(action) for _, action in actions if isinstance(action, AssignSlots | Replicate)} == {
        AssignSlots,
        Replicate,
    }
    states = [planned.status.state for planned in result.plans]
    assert ClusterState.ACTIVE not in states[:-1]
    last_ready = max(pod.running_tick for pod in sim.pods.values()) + LAG
    assert result.passes > last_ready, "Active before every pod is Ready"
    status = result.last.status
    assert (status.ready_shards, status.ready_nodes) == (3, 6)
    assert all(pod.member for pod in sim.pods.values())


def test_a_formed_cluster_of_pods_not_yet_ready_is_not_active_nor_labelled_nor_counted_ready() -> None:
    """Valkey serves every slot with replicas in sync, but no pod passed its readiness probe yet."""
    wanted = desired(2, 1)
    sim = SimulatedCluster(lagging(readiness_lag=50))
    result = run(wanted, sim=sim, max_passes=20, until=lambda planned: False)
    planned = plan(sim.observe(), wanted, sim.context())
    assert all(node.alive for node in sim.nodes.values())
    assert sum(1 for node in sim.nodes.values() if node.role is NodeRole.REPLICA and node.link_up) == 2
    assert sum(1 for node in sim.nodes.values() if node.slots) == 2
    assert planned.status.state is ClusterState.CREATING
    assert Reason.WAITING_FOR_PODS in {finding.reason for finding in planned.status.findings}
    assert planned.status.ready_nodes == 0
    assert not any(isinstance(action, MarkMember) for plan_ in result.plans for action in plan_.actions)
    assert not any(pod.member for pod in sim.pods.values())


def after_pod_creation(wanted: Desired) -> SimulatedCluster:
    """The world one pass after the pods were created: every server answers, no pod is Ready."""
    sim = SimulatedCluster(lagging())
    run(wanted, sim=sim, max_passes=1, until=lambda planned: False)
    observation = sim.observe()
    assert len(observation.nodes) == len(observation.pods) == 4
    assert not any(pod.ready for pod in observation.pods)
    return sim


def test_a_starting_seed_meets_the_others_when_no_pod_is_ready() -> None:
    wanted = desired(2, 1)
    sim = after_pod_creation(wanted)
    observation = sim.observe()
    meets = [
        action for action in plan(observation, wanted, sim.context()).actions if isinstance(action, Meet)
    ]
    oldest = min(observation.pods, key=lambda pod: pod.order).name
    assert {action.node for action in meets} == {oldest}
    assert len(meets) == 3


def test_no_slot_is_assigned_while_a_starting_pod_has_not_answered_yet() -> None:
    """A pod that may run a server and did not answer could hold slots: assigning any would risk two
    owners (the rule holds for starting pods as for Ready ones)."""
    wanted = desired(2, 1)
    sim = after_pod_creation(wanted)
    silent = max(sim.pods.values(), key=lambda pod: pod.seq).name
    assert "AssignSlots" not in kinds(sim, sim.observe(unreachable={silent}), wanted)
    assigned = [
        action
        for action in plan(sim.observe(), wanted, sim.context()).actions
        if isinstance(action, AssignSlots)
    ]
    assert [action.node for action in assigned] == [min(sim.pods.values(), key=lambda pod: pod.seq).name]


def test_a_young_replica_waiting_for_its_first_sync_is_polled_closely() -> None:
    """The sync (Valkey's diskless sync delay, then the transfer) ends with no watch event; the
    status is Active as soon as the link is up, so the pass after it should come soon."""
    wanted = desired(1, 1)
    sim = SimulatedCluster(lagging(readiness_lag=0, sync_delay=6))
    run(
        wanted,
        sim=sim,
        max_passes=30,
        until=lambda planned: any(node.primary_id for node in sim.nodes.values()),
    )
    replica = next(node for node in sim.nodes.values() if node.role is NodeRole.REPLICA)
    assert not replica.link_up
    observation = sim.observe()
    assert settling(View(observation, wanted, sim.context()))
    assert plan(observation, wanted, sim.context()).requeue_after == REQUEUE_FAST
    old = attrs.evolve(
        observation,
        pods=tuple(
            attrs.evolve(pod, created_at=(pod.created_at or 0) - JOIN_WINDOW_S - 1)
            for pod in observation.pods
        ),
    )
    assert not settling(View(old, wanted, sim.context()))


GOSSIP = 20
"""Passes between two gossip rounds of the simulated world in the next test (slow gossip)."""


def test_a_replica_gossip_has_not_told_about_its_primary_meets_it_itself_and_attaches_next() -> None:
    """Gossip tells each node about the others about one peer a second; a replica's own handshake with
    its shard's primary takes a tenth of a second, and the replica attaches the pass after."""
    wanted = desired(2, 1)
    result = run(wanted, settings=lagging(gossip_every=GOSSIP))
    assert result.last.status.state is ClusterState.ACTIVE
    seed = min(result.sim.pods.values(), key=lambda pod: pod.seq).name
    direct = [
        (index, action)
        for index, planned in enumerate(result.plans)
        for action in planned.actions
        if isinstance(action, Meet) and action.node != seed
    ]
    assert direct, "no replica introduced itself to its primary"
    for index, meet in direct:
        assert meet.node.split("-")[1] == meet.peer.split("-")[1], "a MEET across shards"
        attached = [
            action
            for planned in result.plans[index + 1 : index + 3]
            for action in planned.actions
            if isinstance(action, Replicate) and action.node == meet.node
        ]
        assert attached, f"{meet.node} did not attach within two passes of meeting {meet.peer}"
    replicated = [
        index
        for index, planned in enumerate(result.plans)
        for action in planned.actions
        if isinstance(action, Replicate)
    ]
    assert len(replicated) == 2 and max(replicated) < GOSSIP, "the replicas waited for gossip"
