"""The simulator refuses what Valkey would, so "the world accepted every planned action" means something."""

from __future__ import annotations

from simulate import SimNode, SimSettings, SimulatedCluster

from controllers.cluster.decision.actions import AssignSlots, DeletePod, Forget, Meet, NewPod, Replicate
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.slots import ALL_SLOTS, SlotRange


def started(count: int, **settings: int) -> tuple[SimulatedCluster, list[SimNode]]:
    sim = SimulatedCluster(SimSettings(ready_delays=(1,), **settings))  # type: ignore[arg-type]
    sim.apply([NewPod(index) for index in range(count)])
    sim.advance()
    nodes = [node for pod in sorted(sim.pods) if (node := sim.node_of(pod)) is not None]
    assert len(nodes) == count
    return sim, nodes


def meet_all(sim: SimulatedCluster, nodes: list[SimNode]) -> None:
    seed = nodes[0]
    assert all(
        outcome.error is None
        for outcome in sim.apply([Meet(seed.pod, node.pod, node.ip) for node in nodes[1:]])
    )
    sim.advance()
    sim.advance()


def test_pods_start_after_their_delay_and_stop_after_the_grace_period() -> None:
    sim = SimulatedCluster(SimSettings(ready_delays=(2,), termination_delay=2))
    sim.apply([NewPod(0)])
    (name,) = sim.pods
    sim.advance()
    assert sim.observe().pods[0].phase == "Pending" and not sim.observe().nodes
    sim.advance()
    assert sim.observe().pods[0].ready and sim.node_of(name) is not None
    assert sim.apply([DeletePod(name, "test")])[0].error is None
    sim.advance()
    pod = sim.observe().pods[0]
    assert pod.deleting and not pod.ready and name in sim.observe().nodes  # still probed while going away
    sim.advance()
    assert not sim.pods and sim.apply([DeletePod(name, "test")])[0].error == "NotFound"


def test_meet_completes_by_handshake_and_gossip_spreads_membership() -> None:
    sim, nodes = started(3)
    sim.apply([Meet(nodes[0].pod, nodes[1].pod, nodes[1].ip), Meet(nodes[0].pod, nodes[2].pod, nodes[2].ip)])
    seed_view = sim.observe().nodes[nodes[0].pod]
    assert seed_view.handshaking_with(nodes[1].ip) and not seed_view.peers
    sim.advance()  # handshakes finish (both sides learn each other), then one gossip hop
    assert nodes[0].known == {nodes[1].node_id, nodes[2].node_id}
    assert nodes[1].known == {nodes[0].node_id, nodes[2].node_id}


def test_gossip_can_lag_the_operator() -> None:
    sim, nodes = started(3, gossip_every=3)
    sim.apply([Meet(nodes[0].pod, nodes[1].pod, nodes[1].ip), Meet(nodes[0].pod, nodes[2].pod, nodes[2].ip)])
    sim.advance()
    assert nodes[1].known == {nodes[0].node_id}  # the handshake only
    sim.advance()
    sim.advance()
    assert nodes[1].known == {nodes[0].node_id, nodes[2].node_id}


def test_slots_already_owned_anywhere_the_node_can_see_are_refused() -> None:
    sim, nodes = started(2)
    meet_all(sim, nodes)
    first = AssignSlots(nodes[0].pod, (SlotRange(0, 99),))
    assert sim.apply([first])[0].error is None
    again = sim.apply([AssignSlots(nodes[1].pod, (SlotRange(50, 60),))])[0]
    assert again.error == "Slot is already busy" and not nodes[1].slots


def test_replicate_needs_a_known_primary_and_an_empty_node() -> None:
    sim, nodes = started(3)
    unknown = sim.apply([Replicate(nodes[1].pod, nodes[0].node_id)])[0]
    assert unknown.error is not None and unknown.error.startswith("Unknown node")
    meet_all(sim, nodes)
    sim.apply([AssignSlots(nodes[0].pod, ALL_SLOTS), AssignSlots(nodes[1].pod, ())])
    busy = sim.apply([Replicate(nodes[0].pod, nodes[2].node_id)])[0]
    assert busy.error is not None and "empty" in busy.error
    assert sim.apply([Replicate(nodes[1].pod, nodes[0].node_id)])[0].error is None
    assert nodes[1].role is NodeRole.REPLICA and nodes[1].shard_id == nodes[0].shard_id
    of_replica = sim.apply([Replicate(nodes[2].pod, nodes[1].node_id)])[0]
    assert of_replica.error == "I can only replicate a master, not a replica."
    sim.advance()
    assert nodes[1].link_up and nodes[1].repl_offset == nodes[0].repl_offset


def test_forget_refuses_myself_and_my_primary_and_bans_the_id_for_the_window() -> None:
    sim, nodes = started(3, forget_window=3)
    meet_all(sim, nodes)
    sim.apply([AssignSlots(nodes[0].pod, ALL_SLOTS)])
    sim.apply([Replicate(nodes[1].pod, nodes[0].node_id)])
    (outcome,) = sim.apply([Forget(nodes[0].node_id, (nodes[0].pod, nodes[1].pod))])
    assert outcome.error is not None and "myself" in outcome.error and "master" in outcome.error
    assert sim.apply([Forget(nodes[2].node_id, (nodes[0].pod,))])[0].error is None
    sim.advance()
    assert nodes[2].node_id not in nodes[0].known  # banned: gossip from nodes[1] does not bring it back
    for _ in range(3):
        sim.advance()
    assert nodes[2].node_id in nodes[0].known  # the window passed: a live node is re-learned


def test_a_dead_primary_fails_over_to_its_synced_replica_only_with_a_majority() -> None:
    sim, nodes = started(4)
    meet_all(sim, nodes)
    sim.apply([AssignSlots(nodes[0].pod, (SlotRange(0, 8191),))])
    sim.apply([AssignSlots(nodes[2].pod, (SlotRange(8192, 16383),))])
    sim.advance()
    sim.apply([Replicate(nodes[1].pod, nodes[0].node_id), Replicate(nodes[3].pod, nodes[2].node_id)])
    sim.advance()
    sim.delete_pod(nodes[0].pod)
    for _ in range(4):
        sim.advance()
    assert not nodes[0].alive and nodes[0].slots == (SlotRange(0, 8191),)  # 1 of 2 owners left: no majority
    assert nodes[1].role is NodeRole.REPLICA and not nodes[1].link_up


def test_failover_promotes_the_replica_when_a_majority_survives() -> None:
    sim, nodes = started(4)
    meet_all(sim, nodes)
    thirds = ((SlotRange(0, 5460),), (SlotRange(5461, 10922),), (SlotRange(10923, 16383),))
    sim.apply([AssignSlots(node.pod, share) for node, share in zip(nodes[:3], thirds, strict=True)])
    sim.advance()
    sim.apply([Replicate(nodes[3].pod, nodes[0].node_id)])
    sim.advance()
    sim.delete_pod(nodes[0].pod)
    for _ in range(4):
        sim.advance()
    assert nodes[3].role is NodeRole.PRIMARY and nodes[3].slots == thirds[0] and not nodes[0].slots
    assert all(sim.cluster_ok(node) for node in nodes[1:])


def test_the_same_inputs_give_the_same_world() -> None:
    def world() -> SimulatedCluster:
        sim, nodes = started(3)
        meet_all(sim, nodes)
        return sim

    assert world().observe() == world().observe()
