"""A quiet cluster is probed less and less often; anything that changes brings the 30 s pass back."""

from __future__ import annotations

import attrs
from decide_harness import World, run, step, world

from controllers.cluster.decision.cadence import FIRST, Quiet, next_quiet, signature
from controllers.cluster.decision.plan import REQUEUE_ACTING, REQUEUE_STEADY
from controllers.options import ControllerOptions
from controllers.shared.observation import NodeObservation, Observation
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.replies import KnownNode


def test_quiet_passes_back_off_by_four_up_to_the_cap() -> None:
    intervals = []
    quiet: Quiet | None = None
    for _ in range(5):
        quiet = next_quiet(quiet, "same", maximum=300.0)
        intervals.append(quiet.interval)
    assert intervals == [30.0, 120.0, 300.0, 300.0, 300.0]


def test_a_different_signature_starts_again_at_the_first_interval() -> None:
    backed_off = Quiet(signature="before", interval=300.0)
    assert next_quiet(backed_off, "after", maximum=300.0) == Quiet(signature="after", interval=FIRST)


def test_a_cap_of_thirty_seconds_keeps_the_old_steady_interval() -> None:
    quiet = next_quiet(None, "same", maximum=30.0)
    assert next_quiet(quiet, "same", maximum=30.0).interval == 30.0


def _node(**changes: object) -> NodeObservation:
    node = NodeObservation(
        reachable=True,
        node_id="a" * 40,
        role=NodeRole.PRIMARY,
        slots=((0, 16383),),
        repl_offset=100,
        cluster_ok=True,
        known_nodes=(KnownNode(node_id="b" * 40, ip="127.0.0.9", pong_received_ms=1000),),
        config={"maxmemory-policy": "noeviction"},
    )
    return attrs.evolve(node, **changes)


def _signature(node: NodeObservation, version: str = "1") -> str:
    return signature(Observation(pods=(), nodes={"vk-0": node}), version)


def test_offsets_pong_times_and_key_counts_are_not_changes() -> None:
    moved = _node(
        repl_offset=5000,
        keys=12_345,
        known_nodes=(KnownNode(node_id="b" * 40, ip="127.0.0.9", pong_received_ms=99_000),),
    )
    assert _signature(moved) == _signature(_node())


def test_what_the_nodes_report_and_the_cluster_object_are_changes() -> None:
    base = _signature(_node())
    assert _signature(_node(role=NodeRole.REPLICA)) != base
    assert _signature(_node(config={"maxmemory-policy": "allkeys-lru"})) != base
    assert _signature(_node(cluster_ok=False)) != base
    assert _signature(NodeObservation.unreachable("refused")) != base
    failing = (KnownNode(node_id="b" * 40, ip="127.0.0.9", flags=frozenset({"fail"})),)
    assert _signature(_node(known_nodes=failing)) != base
    assert _signature(_node(), version="2") != base


def _settle(found: World) -> World:
    run(found)
    while found.last.requeue_after != REQUEUE_STEADY or found.last.quiet is None:
        step(found)
    return found


def test_an_active_cluster_backs_off_while_passes_observe_the_same_cluster() -> None:
    found = _settle(world(1, 1))
    intervals = [step(found).requeue_after for _ in range(3)]
    assert intervals == [120.0, 300.0, 300.0]


def test_a_node_reporting_something_else_brings_the_first_interval_back() -> None:
    found = _settle(world(1, 1))
    step(found)
    step(found)
    assert found.last.requeue_after == 300.0

    def other_config(observation: Observation) -> Observation:
        name = sorted(observation.nodes)[0]
        node = observation.nodes[name]
        config = {**(node.config or {}), "maxmemory-policy": "volatile-lru"}
        return attrs.evolve(observation, nodes={**observation.nodes, name: attrs.evolve(node, config=config)})

    # A human's CONFIG SET: the pass sets it back (acting), and the next quiet pass starts at 30 s.
    assert step(found, hands=other_config).requeue_after == REQUEUE_ACTING
    assert found.last.quiet is None
    while found.last.quiet is None:
        step(found)
    assert found.last.requeue_after == FIRST


def test_an_unreachable_node_is_not_quiet() -> None:
    found = _settle(world(1, 1))
    step(found)
    unreachable = sorted(found.sim.pods)[0]
    decision = step(found, unreachable=[unreachable])
    assert decision.quiet is None and decision.requeue_after < FIRST


def test_a_spec_edit_is_not_quiet_and_nothing_is_remembered_across_it() -> None:
    found = _settle(world(1, 0))
    step(found)
    found.edit(replicasPerShard=1)
    decision = step(found)
    assert decision.quiet is None and decision.requeue_after <= REQUEUE_ACTING


def test_the_cap_comes_from_the_options() -> None:
    found = world(1, 0)
    found.options = ControllerOptions(secret_sync_seconds=2.0, steady_probe_max_seconds=30.0)
    _settle(found)
    assert [step(found).requeue_after for _ in range(3)] == [30.0, 30.0, 30.0]
