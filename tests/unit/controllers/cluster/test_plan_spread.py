"""Primary spread in the planner: primaries leave crowded Kubernetes nodes and zones with coordinated
failovers where replicas allow; never a FORCE or TAKEOVER. The moves are chosen together (never two in
one shard, never two landing on one node beyond its share) and sent one per pass, the pass requeueing
within a fraction of a second while one is under way."""

from __future__ import annotations

import math
from collections import Counter

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_harness import Run, run
from simulate import SimSettings, SimulatedCluster

from controllers.cluster.decision import spread
from controllers.cluster.decision.actions import Failover, Promote
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.rollout import FAILOVER_ANNOTATION, FailoverRequest
from valkey_operator.api.cluster import ClusterState, NodeRole

REPLICAS_LATE = (1, 5)
"""SimSettings.ready_delays: each shard's second pod starts after PRIMARY_CHOICE_WAIT_S, so the
bootstrap gives each shard's slots to its first pod wherever that runs (as slow nodes, or a node
failure afterwards, leave them): the layouts below then need the spread."""


def desired(shards: int, replicas: int) -> Desired:
    return Desired(
        shards=shards, replicas_per_shard=replicas, template_hash="t1", image="valkey/valkey:9.1.2"
    )


def primaries_per_node(result: Run) -> Counter[str]:
    sim = result.sim
    counts: Counter[str] = Counter()
    for pod in sim.pods.values():
        node = sim.node_of(pod.name)
        if node is not None and node.role is NodeRole.PRIMARY and node.slots and pod.k8s_node:
            counts[pod.k8s_node] += 1
    return counts


def test_two_nodes_three_shards_end_with_at_most_two_primaries_per_node() -> None:
    # Round robin over two nodes puts every shard's first pod (its first primary) on node a.
    world = SimSettings(k8s_nodes=(("a", "z1"), ("b", "z2")), ready_delays=REPLICAS_LATE)
    result = run(desired(3, 1), settings=world, max_passes=120)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert max(primaries_per_node(result).values()) == 2
    assert result.last.status.max_primaries_per_node == 2
    moves = [a for p in result.plans for a in p.actions if isinstance(a, Failover)]
    assert len(moves) == 1
    assert not any(isinstance(a, Promote) for p in result.plans for a in p.actions)
    assert any(f.reason is Reason.BALANCING_PRIMARIES for p in result.plans for f in p.status.findings)


def test_a_shard_whose_replica_shares_its_node_stays() -> None:
    world = SimSettings(k8s_nodes=(("a", "z1"),))
    result = run(desired(2, 1), settings=world)
    assert result.last.status.state is ClusterState.ACTIVE
    assert not any(isinstance(a, Failover) for p in result.plans for a in p.actions)
    assert result.last.status.max_primaries_per_node == 2


def test_zones_are_balanced_too() -> None:
    # Three nodes, two of them in zone x: node caps allow 2+1+0, the zone cap 2 per zone.
    world = SimSettings(k8s_nodes=(("a", "x"), ("b", "x"), ("c", "y")))
    result = run(desired(4, 1), settings=world, max_passes=160)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    zones = {"a": "x", "b": "x", "c": "y"}
    per_zone = Counter(
        zones[node] for node, count in primaries_per_node(result).items() for _ in range(count)
    )
    assert max(per_zone.values()) <= 2, per_zone


@given(shards=st.integers(1, 5), replicas=st.integers(1, 2), hosts=st.integers(1, 4))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_where_replicas_allow_no_node_holds_more_than_its_share(
    shards: int, replicas: int, hosts: int
) -> None:
    world = SimSettings(k8s_nodes=tuple((f"n{i}", f"z{i}") for i in range(hosts)))
    result = run(desired(shards, replicas), settings=world, max_passes=200)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    used = {pod.k8s_node for pod in result.sim.pods.values()}
    cap = math.ceil(shards / len(used))
    counts = primaries_per_node(result)
    # Round robin gives every shard pods on min(hosts, 1 + replicas) distinct nodes: always room.
    assert max(counts.values()) <= cap, (counts, cap)
    assert_moves_are_safe(result)


def assert_moves_are_safe(result: Run) -> None:
    """Per pass: at most one failover (the harness's check_spread_caps checks that it is the first of
    a set that keeps every node within its share), and a pass that sends one requeues fast."""
    for plan in result.plans:
        sent = [a for a in plan.actions if isinstance(a, Failover)]
        assert len(sent) <= 1, sent
        if sent:
            assert plan.requeue_after <= spread.REQUEUE_MOVING, plan.requeue_after


def test_three_primaries_stacked_on_one_node_of_three_leave_it_one_pass_after_another() -> None:
    """A failed Kubernetes node leaves its shards' primaries on the node their replicas shared: here all
    three sit on n1, their replicas on n2, n3 and n2. The spread chooses both moves that are needed
    together (one per shard, never two onto n2), sends the first, and sends the second in the very
    next pass, once the first replica reports itself primary; each of those passes requeues within
    REQUEUE_MOVING."""
    # Pods are bound round robin over this list in creation order: (n1, n2), (n1, n3), (n1, n2).
    hosts = (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n3", "z3"), ("n1", "z1"), ("n2", "z2"))
    world = SimSettings(k8s_nodes=hosts, ready_delays=REPLICAS_LATE)
    result = run(desired(3, 1), settings=world, max_passes=200)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert max(primaries_per_node(result).values()) == 1, primaries_per_node(result)
    passes = [[a for a in p.actions if isinstance(a, Failover)] for p in result.plans]
    with_moves = [index for index, moves in enumerate(passes) if moves]
    assert [len(passes[index]) for index in with_moves] == [1, 1], passes
    first, second = with_moves
    assert second == first + 1, with_moves  # no pass's cadence lost between the two moves
    assert all(p.requeue_after <= spread.REQUEUE_MOVING for p in result.plans[first : second + 1])
    assert not any(isinstance(a, Promote) for p in result.plans for a in p.actions)
    assert_moves_are_safe(result)


def test_a_move_in_flight_requeues_fast_until_valkey_would_have_given_up() -> None:
    """The same layout, the first coordinated failover accepted but never done (Valkey aborts it): the
    passes after it send nothing (one disruptive step in flight) and requeue within REQUEUE_MOVING
    while the request is younger than MOVING_WINDOW_S, then at the usual cadence until the request
    times out and the move is retried."""
    hosts = (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n3", "z3"), ("n1", "z1"), ("n2", "z2"))
    world = SimSettings(k8s_nodes=hosts, failing_failovers=frozenset({0}), ready_delays=REPLICAS_LATE)
    result = run(desired(3, 1), settings=world, max_passes=200)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    passes = [[a for a in p.actions if isinstance(a, Failover)] for p in result.plans]
    with_moves = [index for index, moves in enumerate(passes) if moves]
    first, retried = with_moves[0], with_moves[1]
    assert passes[first] == passes[retried], (passes[first], passes[retried])  # the same move again
    waiting = result.plans[first + 1 : retried]
    # The simulator's pass is one second: the first MOVING_WINDOW_S passes are the fast ones.
    window = int(spread.MOVING_WINDOW_S)
    assert all(p.actions == () or not any(isinstance(a, Failover) for a in p.actions) for p in waiting)
    assert all(p.requeue_after <= spread.REQUEUE_MOVING for p in waiting[: window - 1]), [
        p.requeue_after for p in waiting
    ]
    assert all(p.requeue_after >= 1.0 for p in waiting[window + 1 :]), [p.requeue_after for p in waiting]
    assert max(primaries_per_node(result).values()) == 1, primaries_per_node(result)


@given(
    hosts=st.lists(st.sampled_from(["n0", "n1", "n2", "n3"]), min_size=2, max_size=12),
    shards=st.integers(2, 5),
    replicas=st.integers(1, 2),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_layout_moves_at_most_one_primary_per_shard_per_pass_within_the_caps(
    hosts: list[str], shards: int, replicas: int
) -> None:
    """Arbitrary bindings (the scheduler's choice, or what is left after a node fails). The harness checks
    every pass: failovers in distinct shards, and the moves together never take a node or zone beyond
    its share (check_spread_caps). Here: the run settles, and once it has, no pass moves anything."""
    world = SimSettings(k8s_nodes=tuple((name, f"z{name}") for name in hosts))
    result = run(desired(shards, replicas), settings=world, max_passes=200)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert_moves_are_safe(result)
    assert not any(isinstance(a, Failover) for a in result.last.actions)


def test_a_primary_moves_first_to_make_room_where_one_failover_cannot_do_it() -> None:
    """Seen on the real scheduler: shards 0 and 1 have their primaries on n1 and both replicas on
    n2, shard 2 its primary on n2 and its replica on n3. No single failover gets to one primary per
    node: shard 2 moves to n3 first, then shard 0 or 1 to n2."""
    # Pods are bound round robin over this list in creation order: (n1, n2), (n1, n2), (n2, n3).
    hosts = (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n2", "z2"), ("n2", "z2"), ("n3", "z3"))
    world = SimSettings(k8s_nodes=hosts, ready_delays=REPLICAS_LATE)
    result = run(desired(3, 1), settings=world, max_passes=200)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert max(primaries_per_node(result).values()) == 1, primaries_per_node(result)
    assert result.last.status.max_primaries_per_node == 1
    moves = [a for p in result.plans for a in p.actions if isinstance(a, Failover)]
    assert len(moves) == 2
    assert not any(isinstance(a, Promote) for p in result.plans for a in p.actions)


def test_a_node_crowded_again_right_after_the_spread_is_relieved_at_once() -> None:
    """The spread's targets are crowded back onto n1 (failovers by hand, as the placement e2e test
    does, or Valkey's after a node failure) well within their requests' retry window. The requests
    were marked done once their replicas were seen primary, so they hold nothing: the two moves go
    out in the next two passes, not after the retry time (about 20 s) as when a fulfilled request
    still counted as in flight."""
    hosts = (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n3", "z3"), ("n1", "z1"), ("n2", "z2"))
    result = run(desired(3, 1), settings=SimSettings(k8s_nodes=hosts), max_passes=200)
    sim = result.sim
    run(result.desired, sim=sim, max_passes=3, until=lambda plan: plan.actions == ())  # marks written
    for pod in list(sim.pods.values()):
        node = sim.node_of(pod.name)
        if pod.k8s_node == "n1" and node is not None and node.role is NodeRole.REPLICA:
            assert sim.apply([Failover(pod.name)])[0].error is None  # by hand: no annotation written
    assert primaries_per_node(result)["n1"] == 3
    crowded = run(result.desired, sim=sim, max_passes=10, until=lambda plan: plan.actions == ())
    moves = [[a for a in p.actions if isinstance(a, Failover)] for p in crowded.plans]
    assert [len(found) for found in moves[:2]] == [1, 1], moves
    assert max(primaries_per_node(crowded).values()) == 1, primaries_per_node(crowded)


def test_a_request_marked_done_holds_nothing_and_keeps_its_attempt() -> None:
    sim = SimulatedCluster(SimSettings())
    sim.create_pod(0)
    pod = attrs.evolve(sim.observe().pods[0], annotations={FAILOVER_ANNOTATION: "1000,3"})
    request = FailoverRequest.of(pod)
    assert request is not None and not request.done and request.pending(1001.0)
    done = FailoverRequest.of(attrs.evolve(pod, annotations={FAILOVER_ANNOTATION: "1000,3,done"}))
    assert done is not None and done.done and done.attempt == 3 and not done.pending(1001.0)


def test_a_bootstrap_chooses_each_shard_s_primary_by_node_and_leaves_the_spread_nothing_to_move() -> None:
    """The layouts above, every pod starting at once: each shard's slots go to the pod on the zone and
    node holding the fewest primaries so far, so the cluster is Active with one primary per node and
    no failover was ever sent (one whose pod was deleted right after would have had a replica still
    catching up: the handover at shutdown then found none ready)."""
    layouts = [
        (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n3", "z3"), ("n1", "z1"), ("n2", "z2")),
        (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n2", "z2"), ("n2", "z2"), ("n3", "z3")),
        (("n1", "z1"), ("n1", "z1"), ("n1", "z1"), ("n2", "z2"), ("n3", "z3"), ("n2", "z2")),
        # one shard after another, shard 0 would take n1 (a tie, the older pod) and shard 2 find
        # n1 and n3 both taken: only the shards chosen together fit one per node
        (("n1", "z1"), ("n2", "z2"), ("n1", "z1"), ("n3", "z3"), ("n1", "z1"), ("n3", "z3")),
    ]
    for hosts in layouts:
        result = run(desired(3, 1), settings=SimSettings(k8s_nodes=hosts), max_passes=200)
        assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
        assert max(primaries_per_node(result).values()) == 1, (hosts, primaries_per_node(result))
        assert not any(isinstance(a, Failover) for p in result.plans for a in p.actions), hosts


def test_an_active_cluster_that_one_node_could_leave_without_a_majority_is_looked_at_often() -> None:
    """Such a node's failure shows in no watch event for tens of seconds (the node monitor's grace),
    and Valkey cannot elect without a majority: the operator must see it itself, soon."""
    three = (("a", "z1"), ("b", "z2"), ("c", "z3"))
    spread_out = run(desired(3, 1), settings=SimSettings(k8s_nodes=three), max_passes=120)
    two_shards = run(desired(2, 1), settings=SimSettings(k8s_nodes=three), max_passes=120)
    four_shards = run(desired(4, 1), settings=SimSettings(k8s_nodes=three), max_passes=120)
    no_replicas = run(desired(2, 0), settings=SimSettings(k8s_nodes=three), max_passes=120)
    for result in (spread_out, two_shards, four_shards, no_replicas):
        assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert max(primaries_per_node(spread_out).values()) == 1
    assert spread_out.last.requeue_after > spread.FRAGILE_PROBE_S
    assert two_shards.last.requeue_after == spread.FRAGILE_PROBE_S
    assert max(primaries_per_node(four_shards).values()) == 2
    assert four_shards.last.requeue_after == spread.FRAGILE_PROBE_S
    # Without replicas there is nobody to take over: nothing to look for.
    assert no_replicas.last.requeue_after > spread.FRAGILE_PROBE_S
