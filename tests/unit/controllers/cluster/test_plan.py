"""The cluster planner, step by step (table-driven) and end to end against the simulator (hypothesis).

Every run goes through `planner_harness.one_pass`, which checks the SPEC 5
invariants against the simulator's ground truth before each plan is acted on.
"""

from __future__ import annotations

from collections import Counter

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_harness import Act, Chaos, Run, one_pass, run
from simulate import SimSettings, SimulatedCluster

from controllers.cluster.decision.actions import (
    AssignSlots,
    DeletePod,
    Forget,
    MarkMember,
    Meet,
    NewPod,
    Replicate,
)
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import (
    REQUEUE_ACTING,
    REQUEUE_FAILED,
    REQUEUE_STEADY,
    REQUEUE_WAITING,
    Plan,
    plan,
)
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.view import MAX_IN_SYNC_LAG_BYTES
from controllers.shared.observation import NodeObservation, Observation
from valkey_operator.api.cluster import DEGRADED, PROGRESSING, READY, ClusterState, NodeRole
from valkey_operator.valkey.slots import SlotRange, even_split, format_slot_ranges

IMAGE = "valkey/valkey:9.0.1"
ACTIVE = ClusterState.ACTIVE


def desired(
    shards: int = 3, replicas: int = 1, *, template_hash: str = "t1", paused: bool = False
) -> Desired:
    return Desired(
        shards=shards, replicas_per_shard=replicas, template_hash=template_hash, image=IMAGE, paused=paused
    )


def kinds(planned: Plan) -> dict[str, int]:
    return dict(Counter(type(action).__name__ for action in planned.actions))


def world_before(kind: type, wanted: Desired, settings_: SimSettings | None = None) -> SimulatedCluster:
    """A world advanced up to the pass that first plans `kind`, with that plan not acted on."""
    sim = SimulatedCluster(settings_)
    result = Run(sim, wanted)
    for index in range(40):
        observation = sim.observe()
        if any(isinstance(action, kind) for action in plan(observation, wanted, sim.context()).actions):
            return sim
        one_pass(result, index, Chaos())
    raise AssertionError(f"never planned {kind.__name__}")


def quiet(planned: Plan) -> bool:
    """Active with nothing left to do."""
    return planned.status.state is ACTIVE and not planned.actions


def active_world(wanted: Desired, settings_: SimSettings | None = None) -> Run:
    result = run(wanted, settings=settings_, until=quiet)
    assert result.last.status.state is ACTIVE
    return result


# --- the bootstrap sequence, pass by pass (calm world, every pod Ready one pass after creation) ----


@pytest.mark.parametrize(
    ("shards", "replicas", "passes"),
    [
        (1, 0, [{"NewPod": 1}, {"AssignSlots": 1}, {"MarkMember": 1}, {}]),
        (
            1,
            1,
            [
                {"NewPod": 2},
                {"SetConfig": 2, "Meet": 1, "AssignSlots": 1},
                {"MarkMember": 1, "Replicate": 1},
                {"MarkMember": 1},
                {},
            ],
        ),
        (
            3,
            1,
            [
                {"NewPod": 6},
                {"SetConfig": 6, "Meet": 5, "AssignSlots": 1},
                {"AssignSlots": 2, "Replicate": 1},
                {"MarkMember": 4, "Replicate": 2},
                {"MarkMember": 2},
                {},
            ],
        ),
        (
            2,
            2,
            [
                {"NewPod": 6},
                {"SetConfig": 6, "Meet": 5, "AssignSlots": 1},
                {"AssignSlots": 1, "Replicate": 2},
                {"MarkMember": 4, "Replicate": 2},
                {"MarkMember": 2},
                {},
            ],
        ),
    ],
)
def test_bootstrap_sequence(shards: int, replicas: int, passes: list[dict[str, int]]) -> None:
    """Active only once the client Service hands out every serving node: the pass after the labels."""
    result = run(desired(shards, replicas))
    assert [kinds(planned) for planned in result.plans] == passes
    assert [planned.status.state for planned in result.plans][-1] is ACTIVE
    assert all(planned.status.state is ClusterState.CREATING for planned in result.plans[:-1])


def test_a_1x0_cluster_reaches_active() -> None:
    result = active_world(desired(1, 0))
    status = result.last.status
    assert [(node.role, node.slots) for node in status.nodes] == [(NodeRole.PRIMARY, "0-16383")]
    assert (status.ready_shards, status.ready_nodes) == (1, 1)


def test_a_3x1_cluster_reaches_active_with_every_slot_covered_and_replicas_in_sync() -> None:
    result = active_world(desired(3, 1), SimSettings(ready_delays=(1, 3, 2), sync_delay=2))
    status = result.last.status
    primaries = sorted((node.shard, node.slots) for node in status.nodes if node.role is NodeRole.PRIMARY)
    assert primaries == [(0, "0-5460"), (1, "5461-10921"), (2, "10922-16383")]
    assert Counter(node.shard for node in status.nodes if node.role is NodeRole.REPLICA) == {0: 1, 1: 1, 2: 1}
    assert (status.ready_shards, status.ready_nodes) == (3, 6)
    for replica in result.sim.nodes.values():
        if replica.role is NodeRole.REPLICA:
            assert replica.link_up
            assert replica.repl_offset == result.sim.nodes[replica.primary_id or ""].repl_offset
    assert status.condition(READY).status and status.condition(READY).reason == Reason.READY
    assert not status.condition(PROGRESSING).status and not status.condition(DEGRADED).status
    assert result.last.actions == () and result.last.requeue_after == REQUEUE_STEADY


# --- step 1: pods ---------------------------------------------------------------------------------


def test_missing_pods_are_created_one_per_shard_per_replica_slot() -> None:
    planned = plan(Observation(pods=()), desired(3, 2), Context())
    assert planned.actions == tuple(NewPod(shard) for shard in range(3) for _ in range(3))
    assert planned.status.state is ClusterState.CREATING
    assert planned.status.condition(PROGRESSING).reason == Reason.WAITING_FOR_PODS
    assert planned.requeue_after == REQUEUE_ACTING


def test_pods_that_are_not_ready_are_waited_for_with_a_requeue() -> None:
    sim = SimulatedCluster(SimSettings(ready_delays=(5,)))
    sim.apply(plan(sim.observe(), desired(2, 0), sim.context()).actions)
    sim.advance()
    planned = plan(sim.observe(), desired(2, 0), sim.context())
    assert planned.actions == ()
    assert planned.requeue_after == REQUEUE_WAITING
    assert planned.status.message.startswith("0 of 2 pods Ready")


def test_a_pod_going_away_is_replaced_without_waiting_for_it() -> None:
    result = active_world(desired(1, 1))
    replica = next(node for node in result.sim.nodes.values() if node.role is NodeRole.REPLICA)
    result.sim.delete_pod(replica.pod)
    planned = plan(result.sim.observe(), desired(1, 1), result.sim.context(recorded_state=ACTIVE))
    assert planned.actions == (NewPod(0),)
    assert planned.status.state is ClusterState.UPDATING


def test_a_replacement_never_replicates_a_primary_whose_pod_is_going_away() -> None:
    """The replacement of a deleted primary's pod starts while the old server still hands over: told
    to replicate it, the old server would wait for its full sync before handing its slots over."""
    wanted = desired(2, 1)
    result = active_world(wanted, SimSettings(termination_delay=6))
    sim = result.sim
    primary = next(node for node in sim.nodes.values() if node.role is NodeRole.PRIMARY)
    sim.delete_pod(primary.pod)
    result.recorded = ACTIVE
    healed = run(wanted, sim=sim, max_passes=40)
    assert healed.last.status.state is ACTIVE, healed.last.status.message
    replicates = [a for p in healed.plans for a in p.actions if isinstance(a, Replicate)]
    assert replicates, "the replacement joined as a replica"
    assert all(action.primary_id != primary.node_id for action in replicates), replicates


# --- step 2: the version floor --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "found"),
    [((9, 0, 0), "Valkey 9.0.0"), ((8, 1, 8), "Valkey 8.1.8"), (None, "no valkey_version")],
)
def test_a_node_below_the_floor_fails_the_cluster_and_never_joins(
    version: tuple[int, int, int] | None, found: str
) -> None:
    wanted = desired(3, 1)
    result = run(wanted, settings=SimSettings(versions={"t1": version}), max_passes=8)
    status = result.last.status
    assert status.state is ClusterState.FAILED
    assert IMAGE in status.message and found in status.message and "9.0.1" in status.message
    assert status.condition(READY).reason == Reason.VERSION_BELOW_FLOOR
    assert not status.condition(PROGRESSING).status and status.condition(DEGRADED).status
    assert result.last.requeue_after == REQUEUE_FAILED
    joined = [p for p in result.plans if {"Meet", "AssignSlots", "Replicate"} & kinds(p).keys()]
    assert joined == []
    assert all(not node.known and not node.slots for node in result.sim.nodes.values())


def test_one_bad_binary_among_good_ones_keeps_every_node_from_joining_further() -> None:
    wanted = desired(2, 1)
    settings_ = SimSettings(version_overrides={3: (9, 0, 0)}, ready_delays=(1, 1, 1, 3))
    result = run(wanted, settings=settings_, max_passes=10)
    assert result.last.status.state is ClusterState.FAILED
    assert "vk-1-00003" in result.last.status.message
    bad = result.sim.node_of("vk-1-00003")
    assert bad is not None and not bad.known and not result.sim.members_known_by(bad.node_id)


def test_a_rejected_pod_of_an_outdated_template_is_replaced_once_the_image_is_fixed() -> None:
    broken = run(desired(1, 0), settings=SimSettings(versions={"t1": (9, 0, 0)}), max_passes=4)
    assert broken.last.status.state is ClusterState.FAILED
    broken.sim.template_hash = "t2"  # the user points the config at a good image
    fixed = run(desired(1, 0, template_hash="t2"), sim=broken.sim, max_passes=10)
    assert fixed.last.status.state is ACTIVE
    deletions = [a for p in fixed.plans for a in p.actions if isinstance(a, DeletePod)]
    assert [a.pod for a in deletions] == ["vk-0-00000"]


def test_a_rejected_pod_of_the_current_template_is_left_alone() -> None:
    broken = run(desired(1, 0), settings=SimSettings(versions={"t1": (9, 0, 0)}), max_passes=6)
    assert all(not isinstance(a, DeletePod) for p in broken.plans for a in p.actions)


# --- step 3: meet ---------------------------------------------------------------------------------


def test_one_seed_introduces_every_other_ready_node() -> None:
    sim = world_before(Meet, desired(2, 1))
    planned = plan(sim.observe(), desired(2, 1), sim.context())
    meets = [a for a in planned.actions if isinstance(a, Meet)]
    assert {a.node for a in meets} == {"vk-0-00000"}  # the oldest pod, as nobody knows anybody yet
    assert sorted(a.peer for a in meets) == ["vk-0-00001", "vk-1-00002", "vk-1-00003"]
    assert all(a.peer_ip == sim.pods[a.peer].ip for a in meets)


def test_a_handshake_under_way_is_not_repeated() -> None:
    sim = world_before(Meet, desired(1, 1))
    sim.apply(plan(sim.observe(), desired(1, 1), sim.context()).actions)
    assert not [a for a in plan(sim.observe(), desired(1, 1), sim.context()).actions if isinstance(a, Meet)]


def test_an_unreachable_node_is_a_fact_not_an_error() -> None:
    sim = world_before(Meet, desired(2, 0))
    planned = plan(sim.observe(unreachable={"vk-1-00001"}), desired(2, 0), sim.context())
    assert all("vk-1-00001" not in (getattr(a, "node", ""), getattr(a, "peer", "")) for a in planned.actions)
    degraded = planned.status.condition(DEGRADED)
    assert (
        degraded.status and degraded.reason == Reason.NODES_UNREACHABLE and "vk-1-00001" in degraded.message
    )


# --- step 4: slots --------------------------------------------------------------------------------


@pytest.mark.parametrize("shards", [1, 2, 3, 5, 6])
def test_slots_are_spread_evenly_over_one_primary_per_shard(shards: int) -> None:
    result = active_world(desired(shards, 0))
    sizes = sorted(result.sim.served().values())
    assert sorted(sizes) == sorted(even_split(shards))
    counts = [sum(r.size for r in ranges) for ranges in result.sim.served().values()]
    assert max(counts) - min(counts) <= 1


def test_slot_assignment_resumes_where_a_restarted_operator_left_it() -> None:
    wanted = desired(3, 0)
    sim = world_before(AssignSlots, wanted)
    sim.advance()  # every node met and known to each other
    sim.advance()
    planned = plan(sim.observe(), wanted, sim.context())
    first = [a for a in planned.actions if isinstance(a, AssignSlots)]
    sim.apply(first[:1])  # the operator dies after the first ADDSLOTSRANGE
    again = [a for a in plan(sim.observe(), wanted, sim.context()).actions if isinstance(a, AssignSlots)]
    assert again == first[1:]


def test_slots_are_never_assigned_while_a_pod_of_the_shard_does_not_answer() -> None:
    wanted = desired(1, 1)
    sim = world_before(AssignSlots, wanted)
    planned = plan(sim.observe(unreachable={"vk-0-00001"}), wanted, sim.context())
    assert not [a for a in planned.actions if isinstance(a, AssignSlots)]


# --- step 5: replicas -----------------------------------------------------------------------------


def test_replicas_attach_to_their_own_shards_primary_only_once_it_owns_slots() -> None:
    wanted = desired(2, 1)
    sim = world_before(Replicate, wanted)
    planned = plan(sim.observe(), wanted, sim.context())
    for action in planned.actions:
        if isinstance(action, Replicate):
            primary = sim.nodes[action.primary_id]
            assert primary.slots
            assert sim.pods[primary.pod].shard == sim.pods[action.node].shard


def test_membership_is_read_from_valkey_and_a_misplaced_replica_moves_to_its_shard() -> None:
    wanted = desired(2, 1)
    result = active_world(wanted)
    sim = result.sim
    primaries = {sim.pods[n.pod].shard: n for n in sim.nodes.values() if n.role is NodeRole.PRIMARY}
    replica_1 = next(
        n for n in sim.nodes.values() if n.role is NodeRole.REPLICA and sim.pods[n.pod].shard == 1
    )
    sim.apply([Replicate(replica_1.pod, primaries[0].node_id)])  # Valkey now says it serves shard 0
    planned = plan(sim.observe(), wanted, sim.context(recorded_state=ACTIVE))
    assert planned.status.state is ClusterState.UPDATING
    uid = sim.pods[replica_1.pod].uid
    # Syncing from its new primary, it is no longer handed to clients until it is in sync again.
    assert planned.actions == (
        MarkMember(replica_1.pod, uid, member=False),
        Replicate(replica_1.pod, primaries[1].node_id),
    )


def test_a_lagging_replica_is_not_in_sync() -> None:
    result = active_world(desired(1, 1))
    observation = result.sim.observe()
    lagging = {
        pod: attrs.evolve(node, repl_offset=node.repl_offset - MAX_IN_SYNC_LAG_BYTES - 1)
        if node.role is NodeRole.REPLICA
        else node
        for pod, node in observation.nodes.items()
    }
    planned = plan(attrs.evolve(observation, nodes=lagging), desired(1, 1), result.sim.context())
    assert planned.status.state is not ACTIVE
    assert planned.status.condition(PROGRESSING).reason == Reason.SYNCING_REPLICAS


def test_cluster_state_fail_on_any_node_keeps_the_cluster_from_active() -> None:
    result = active_world(desired(1, 1))
    observation = result.sim.observe()
    pod = sorted(observation.nodes)[0]
    nodes = {**observation.nodes, pod: attrs.evolve(observation.nodes[pod], cluster_ok=False)}
    planned = plan(attrs.evolve(observation, nodes=nodes), desired(1, 1), result.sim.context())
    assert planned.status.condition(PROGRESSING).reason == Reason.WAITING_FOR_CLUSTER_STATE


# --- step 6: forget -------------------------------------------------------------------------------


def replace_a_replica(wanted: Desired) -> tuple[Run, str]:
    """An Active cluster whose replica pod was deleted, run until its replacement joined."""
    result = active_world(wanted)
    replica = next(n for n in result.sim.nodes.values() if n.role is NodeRole.REPLICA)
    result.sim.delete_pod(replica.pod)
    result.recorded = ACTIVE
    return result, replica.node_id


def test_a_departed_node_is_forgotten_on_every_node_that_knows_it_at_once() -> None:
    wanted = desired(2, 1)
    result, gone = replace_a_replica(wanted)
    healed = run(wanted, sim=result.sim, max_passes=20)
    assert healed.last.status.state is ACTIVE
    forgets = [a for p in healed.plans for a in p.actions if isinstance(a, Forget)]
    assert [f.node_id for f in forgets] == [gone]
    knew = set(forgets[0].on)
    assert len(knew) == 3  # every surviving member, in one action
    assert not any(gone in node.known for node in result.sim.nodes.values() if node.alive)


def test_nothing_is_forgotten_while_some_pod_does_not_answer() -> None:
    wanted = desired(2, 1)
    result, _ = replace_a_replica(wanted)
    result.sim.advance()
    result.sim.advance()  # the pod is gone now
    silent = sorted(result.sim.pods)[0]
    planned = plan(result.sim.observe(unreachable={silent}), wanted, result.sim.context())
    assert not [a for a in planned.actions if isinstance(a, Forget)]
    assert [
        a for a in plan(result.sim.observe(), wanted, result.sim.context()).actions if isinstance(a, Forget)
    ]


def test_a_node_id_is_not_forgotten_while_its_pod_is_still_terminating() -> None:
    wanted = desired(2, 1)
    result, _ = replace_a_replica(wanted)
    planned = plan(result.sim.observe(), wanted, result.sim.context())
    assert not [a for a in planned.actions if isinstance(a, Forget)]


def test_a_dead_primary_is_forgotten_only_after_its_replica_took_over() -> None:
    wanted = desired(3, 1)
    result = active_world(wanted)
    sim = result.sim
    primary = next(n for n in sim.nodes.values() if n.role is NodeRole.PRIMARY)
    sim.delete_pod(primary.pod)  # by hand: the planner itself never deletes a slot owner
    result.recorded = ACTIVE
    forgot_at = None
    for index in range(30):
        planned = one_pass(result, index, Chaos())
        if any(isinstance(a, Forget) for a in planned.actions):
            forgot_at = forgot_at if forgot_at is not None else index
            assert not primary.slots, "forgot a node that still owned slots"
        if planned.status.state is ACTIVE:
            break
    assert forgot_at is not None and result.last.status.state is ACTIVE
    promoted = [n for n in sim.nodes.values() if n.alive and n.role is NodeRole.PRIMARY]
    assert len(promoted) == 3


# --- step 7: removal (one disruptive step at a time) ----------------------------------------------


def test_surplus_pods_are_removed_one_at_a_time_never_a_slot_owner() -> None:
    wanted = desired(1, 1)
    chaos = Chaos(acts=[(Act.TWICE, 0)])  # pods created twice: a replayed stale plan
    result = run(wanted, chaos=chaos, max_passes=40)
    assert result.last.status.state is ACTIVE
    deleted = [a for p in result.plans for a in p.actions if isinstance(a, DeletePod)]
    assert len(deleted) == 2
    assert all(len(p.disruptive) <= 1 for p in result.plans)


def test_a_surplus_replica_goes_only_while_its_primary_is_seen_serving() -> None:
    result = active_world(desired(1, 2))
    sim = result.sim
    primary = next(n for n in sim.nodes.values() if n.role is NodeRole.PRIMARY)
    fewer = desired(1, 1)
    planned = plan(sim.observe(), fewer, sim.context())
    removals = [a for a in planned.actions if isinstance(a, DeletePod)]
    assert len(removals) == 1 and removals[0].pod != primary.pod
    assert sim.nodes[sim.pods[removals[0].pod].node_id or ""].role is NodeRole.REPLICA
    blind = plan(sim.observe(unreachable={primary.pod}), fewer, sim.context())
    assert not [a for a in blind.actions if isinstance(a, DeletePod)]


def test_no_second_removal_while_a_pod_is_still_going_away() -> None:
    wanted = desired(1, 0)
    sim = SimulatedCluster(SimSettings(termination_delay=3))
    for shard in (0, 0, 0):
        sim.create_pod(shard)
    first = plan(sim.observe(), wanted, sim.context())
    removals = [a for a in first.actions if isinstance(a, DeletePod)]
    assert len(removals) == 1
    sim.apply(removals)
    assert not [a for a in plan(sim.observe(), wanted, sim.context()).actions if isinstance(a, DeletePod)]


# --- paused, status, determinism ------------------------------------------------------------------


def test_paused_plans_nothing_but_still_reports() -> None:
    wanted = desired(2, 1, paused=True)
    planned = plan(Observation(pods=()), wanted, Context())
    assert planned.actions == ()
    assert planned.status.message.startswith("paused:")
    assert planned.status.condition(PROGRESSING).reason == Reason.PAUSED
    assert planned.requeue_after == REQUEUE_STEADY
    result = active_world(desired(2, 1))
    paused = plan(result.sim.observe(), wanted, result.sim.context())
    assert paused.status.state is ACTIVE and paused.actions == ()


def test_creating_until_first_active_then_updating() -> None:
    wanted = desired(1, 1)
    result, _ = replace_a_replica(wanted)
    assert (
        plan(result.sim.observe(), wanted, result.sim.context(recorded_state=ACTIVE)).status.state
        is ClusterState.UPDATING
    )
    assert (
        plan(result.sim.observe(), wanted, result.sim.context(recorded_state=None)).status.state
        is ClusterState.CREATING
    )


def test_status_lists_every_pod_with_what_valkey_reported() -> None:
    result = active_world(desired(1, 1))
    nodes = {node.pod: node for node in result.last.status.nodes}
    for pod, truth in result.sim.pods.items():
        node = result.sim.node_of(pod)
        assert node is not None
        status = nodes[pod]
        assert (status.shard, status.node_id, status.ip, status.version) == (
            truth.shard,
            node.node_id,
            truth.ip,
            "9.0.1",
        )
        assert status.slots == (format_slot_ranges(node.slots) or None)


def test_uncovered_slots_are_named_with_the_reason() -> None:
    result = active_world(desired(2, 0))
    observation = result.sim.observe(unreachable={"vk-1-00001"})
    status = plan(observation, desired(2, 0), result.sim.context(recorded_state=ACTIVE)).status
    assert status.uncovered == (SlotRange(8192, 16383),)
    assert status.state is ClusterState.UPDATING
    degraded = status.condition(DEGRADED)
    assert degraded.status and "8192-16383" in degraded.message and "unreachable" in degraded.message


def test_an_observation_probe_failure_without_any_pod_is_harmless() -> None:
    planned = plan(
        Observation(pods=(), nodes={"ghost": NodeObservation.unreachable("timeout")}), desired(), Context()
    )
    assert kinds(planned) == {"NewPod": 6}


# --- hypothesis: random specs, delays, unreachable nodes, restarts ----------------------------------


FAULT_PASSES = 20


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Desired, SimSettings, Chaos]:
    shards = draw(st.integers(1, 6))
    replicas = draw(st.integers(0, 2))
    pods = shards * (1 + replicas)
    settings_ = SimSettings(
        ready_delays=tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))),
        readiness_lag=draw(st.integers(0, 3)),  # starting pods answer before they are Ready
        sync_delay=draw(st.integers(0, 3)),
        termination_delay=draw(st.integers(0, 2)),
        gossip_every=draw(st.integers(1, 3)),
    )
    passes = st.integers(0, FAULT_PASSES)
    seqs = st.integers(0, pods + 2)
    chaos = Chaos(
        acts=draw(st.lists(st.tuples(st.sampled_from(Act), st.integers(0, 5)), max_size=FAULT_PASSES)),
        unreachable=draw(st.frozensets(st.tuples(passes, seqs), max_size=12)),
        deletions=draw(st.frozensets(st.tuples(passes, seqs), max_size=2)),
        paused=draw(st.frozensets(passes, max_size=4)),
    )
    return desired(shards, replicas), settings_, chaos


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_any_spec_reaches_active_through_faults_and_restarts(
    scenario: tuple[Desired, SimSettings, Chaos],
) -> None:
    wanted, settings_, chaos = scenario
    result = run(wanted, settings=settings_, chaos=chaos, max_passes=FAULT_PASSES + 80, until=quiet)
    assert result.last.status.state is ACTIVE, result.last.status.message
    assert result.last.actions == ()


@settings(max_examples=40, deadline=None)
@given(
    shards=st.integers(1, 4),
    replicas=st.integers(0, 2),
    bad=st.frozensets(st.integers(0, 11), min_size=1, max_size=3),
    version=st.sampled_from([(9, 0, 0), (8, 1, 8), (7, 2, 4), None]),
    lag=st.integers(0, 2),
)
def test_nodes_below_the_floor_never_join(
    shards: int, replicas: int, bad: frozenset[int], version: tuple[int, int, int] | None, lag: int
) -> None:
    pods = shards * (1 + replicas)
    overrides = {seq % pods: version for seq in bad}
    settings_ = SimSettings(version_overrides=overrides, ready_delays=(1, 2, 3), readiness_lag=lag)
    result = run(desired(shards, replicas), settings=settings_, max_passes=12)
    assert result.last.status.state is ClusterState.FAILED
    for seq in overrides:
        name = next(pod.name for pod in result.sim.pods.values() if pod.seq == seq)
        assert name in result.last.status.message


@settings(max_examples=80, deadline=None)
@given(scenarios(), st.integers(0, 30))
def test_replanning_a_stale_observation_after_acting_is_safe(
    scenario: tuple[Desired, SimSettings, Chaos], stop: int
) -> None:
    """An operator restarted mid-bootstrap re-plans from whatever it sees: the run still converges."""
    wanted, settings_, chaos = scenario
    first = run(wanted, settings=settings_, chaos=chaos, max_passes=stop, until=lambda _: False)
    resumed = run(wanted, sim=first.sim, max_passes=80)
    assert resumed.last.status.state is ACTIVE
