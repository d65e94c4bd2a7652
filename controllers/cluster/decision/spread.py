"""Primary spread (pure): move primaries so one lost Kubernetes node or zone costs as few as possible.

Where the scheduler puts pods decides nothing about which of a shard's pods is
primary: a bootstrap, a repair or a roll can leave most primaries on one node,
and losing that node then stops most shards until their replicas are elected.
So once the cluster is otherwise settled (no roll, no migration, every node
answering), the planner moves primaries with the rolling update's coordinated
`CLUSTER FAILOVER` to an in-sync replica (never FORCE or TAKEOVER), until:
- no Kubernetes node hosting the cluster holds more than
  ceil(primaries / nodes hosting it) primaries, and
- no zone more than ceil(primaries / zones hosting it),
where the replicas allow it: a primary moves only to a replica on a node (and
zone) that stays within its share, so a shard whose replicas share its node
stays as it is. Each pass chooses every move that is needed (`next_moves`, one
per shard, the shares counted over the moves together) but sends only the
first (`next_move`): one disruptive step in flight per cluster (SPEC 5), and a
primary grants one vote per epoch, so two coordinated failovers started
together split the votes and one shard stalls until its retry. While a move is
in flight (`moving`) the pass requeues within REQUEUE_MOVING, so the next move
goes out as soon as the previous replica reports itself primary: after a node
failure that left several primaries on one node, they leave it within about a
second each, not one pass's cadence each. When no crowded primary has such a
replica, a primary on a full node that does have one moves first to make room
(two failovers where one cannot do it: the scheduler may stack two shards'
replicas on one node); the move it makes room for is chosen the pass after.
Each request is recorded on the replica's pod first (the rollout's failover
annotation) and is not repeated before it times out. A switchover a user asked
for (switchover.py) holds the spread while it is pending, and the primary it
made stays where it is: the spread may move other shards' primaries around it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import attrs

from controllers.cluster.decision.actions import Failover
from controllers.cluster.decision.rollout import FailoverRequest, may_take_over, settled_for_a_step
from controllers.cluster.decision.view import Node, View
from valkey_operator.api.cluster import NodeRole

REQUEUE_MOVING = 0.3
"""Seconds to the next pass while a spread move is under way (`moving`). A coordinated failover takes
well under a second here and the next move waits for it; a short requeue (never a sleep in the pass)
sends the next one soon after the previous replica reports itself primary."""

FRAGILE_PROBE_S = 5.0
"""How often an Active cluster that one Kubernetes node's failure would leave without a majority is
observed (`fragile`): what a takeover waits for after Valkey flags the primary, at most."""

MOVING_WINDOW_S = 6.0
"""How long after a request the short requeue goes on. Valkey gives a manual failover 5 s: after that
the request can only time out (rollout.FAILOVER_TIMEOUT_S) and the usual cadence will do."""


@attrs.frozen
class Spread:
    """How the slot-serving primaries sit on Kubernetes nodes and zones this pass."""

    per_node: Counter[str]
    per_zone: Counter[str]
    node_cap: int
    zone_cap: int

    @property
    def worst(self) -> int:
        """The most primaries one Kubernetes node holds."""
        return max(self.per_node.values(), default=0)

    def fits(self, node: str, zone: str | None) -> bool:
        """One more primary on node (in zone) stays within both shares."""
        return self.per_node[node] + 1 <= self.node_cap and (
            zone is None or self.per_zone[zone] + 1 <= self.zone_cap
        )

    def moved(self, source: str, source_zone: str | None, target: str, target_zone: str | None) -> Spread:
        """The spread after one primary moves from source to target."""
        per_node, per_zone = Counter(self.per_node), Counter(self.per_zone)
        per_node[source] -= 1
        per_node[target] += 1
        if source_zone is not None:
            per_zone[source_zone] -= 1
        if target_zone is not None:
            per_zone[target_zone] += 1
        return attrs.evolve(self, per_node=per_node, per_zone=per_zone)

    def overloaded(self, node: str, zone: str | None) -> bool:
        busy_zone = zone is not None and self.per_zone[zone] > self.zone_cap
        return self.per_node[node] > self.node_cap or busy_zone


def spread(view: View) -> Spread | None:
    """None when the pods' Kubernetes nodes are not known (a pod not scheduled, or a test world)."""
    return view.once("spread", lambda: _spread(view))


def _spread(view: View) -> Spread | None:
    members = [node for node in view.members.values() if not node.pod.deleting]
    if not members or any(node.pod.node_name is None for node in members):
        return None
    hosts = {node.pod.node_name for node in members if node.pod.node_name}
    zones = {zone for host in hosts if (zone := view.node_zones.get(host)) is not None}
    primaries = [node for node in members if node.is_primary and node.obs.slots]
    per_node = Counter(node.pod.node_name or "" for node in primaries)
    per_zone = Counter(zone for node in primaries if (zone := _zone(view, node)) is not None)
    return Spread(
        per_node=per_node,
        per_zone=per_zone,
        node_cap=math.ceil(len(primaries) / len(hosts)),
        zone_cap=math.ceil(len(primaries) / len(zones)) if zones else len(primaries),
    )


def primary_load(view: View, chosen: Sequence[Node] = ()) -> Callable[[Node], tuple[int, int]]:
    """For a node that could become a primary: how many slot-serving primaries (and primaries
    `chosen` this pass) already sit in its zone and on its Kubernetes node, in that order. A new
    shard's primary goes where this is least, so bootstrap leaves the spread nothing to move."""
    primaries = [
        node for node in view.members.values() if node.is_primary and node.obs.slots and not node.pod.deleting
    ]
    primaries += [node for node in chosen if node not in primaries]
    per_node = Counter(node.pod.node_name for node in primaries if node.pod.node_name)
    per_zone = Counter(zone for node in primaries if (zone := _zone(view, node)) is not None)

    def load(node: Node) -> tuple[int, int]:
        zone = _zone(view, node)
        return (per_zone[zone] if zone is not None else 0, per_node[node.pod.node_name or ""])

    return load


def crowding(view: View, chosen: Sequence[Node]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """How crowded the primaries would be with `chosen` made primaries too: the zones' and then the
    Kubernetes nodes' counts of primaries, largest first (a smaller tuple is a better spread)."""
    primaries = [
        node for node in view.members.values() if node.is_primary and node.obs.slots and not node.pod.deleting
    ]
    primaries += [node for node in chosen if node not in primaries]
    per_node = Counter(node.pod.node_name for node in primaries if node.pod.node_name)
    per_zone = Counter(zone for node in primaries if (zone := _zone(view, node)) is not None)
    return tuple(sorted(per_zone.values(), reverse=True)), tuple(sorted(per_node.values(), reverse=True))


def _zone(view: View, node: Node) -> str | None:
    return view.node_zones.get(node.pod.node_name or "")


Move = tuple[Failover, FailoverRequest | None]
"""One coordinated failover of the spread, and the replica's earlier request (for its attempt count)."""


def next_moves(view: View) -> list[Move]:
    """Every coordinated failover that improves the spread now, at most one per shard, in the order
    they go out (the pass sends the first: `next_move`).

    A failed Kubernetes node can leave several shards' primaries stacked on one
    node. Each move is checked against the spread as it is after the moves chosen
    before it, so the set never takes a node (or zone) beyond its share, and the
    first move is one of a set that gets the whole way there: the next pass, once
    it has happened, chooses the rest again from what the nodes report. The
    make-room step is planned alone: the move it makes room for targets the node
    it empties, which only holds once that failover has happened.
    """
    facts = spread(view)
    if facts is None or view.desired.spread_held or not settled_for_a_step(view) or view.transfers():
        return []
    if sum(1 for node in view.members.values() if node.is_primary and node.obs.slots) != view.desired.shards:
        return []  # a scale is under way
    if request_in_flight(view):
        return []
    overloaded = _crowded(view, facts)
    moves: list[Move] = []
    after = facts
    for primary in overloaded:
        if not after.overloaded(primary.pod.node_name or "", _zone(view, primary)):
            continue  # the moves chosen so far already relieved its node and zone
        replica = _best_replica(view, after, primary)
        if replica is None or replica.pod.node_name is None:
            continue
        moves.append((Failover(replica.pod.name), FailoverRequest.of(replica.pod)))
        after = after.moved(
            primary.pod.node_name or "", _zone(view, primary), replica.pod.node_name, _zone(view, replica)
        )
    if moves:
        return moves
    room = _making_room(view, facts, overloaded)
    return [] if room is None else [(Failover(room.pod.name), FailoverRequest.of(room.pod))]


def next_move(view: View) -> Move | None:
    """The one failover this pass sends: the first of `next_moves` (one disruptive step in flight)."""
    moves = next_moves(view)
    return moves[0] if moves else None


def moving(view: View) -> bool:
    """A spread move is under way: a failover was asked for within MOVING_WINDOW_S, and its replica has
    not taken over yet or a primary still sits beyond its node's (or zone's) share (the next move is
    due once the nodes report the last one done). The planner then requeues within REQUEUE_MOVING."""
    facts = spread(view)
    if facts is None or view.desired.spread_held:
        return False
    recent = [
        (node, request)
        for node in view.members.values()
        if (request := FailoverRequest.of(node.pod)) is not None
        and 0.0 <= view.now - request.at < MOVING_WINDOW_S
    ]
    if not recent:
        return False
    taking_over = any(node.obs.role is NodeRole.REPLICA and not request.done for node, request in recent)
    return taking_over or bool(_crowded(view, facts))


def _crowded(view: View, facts: Spread) -> list[Node]:
    """Slot-serving primaries on a node (or zone) beyond its share, the busiest node first, then the
    lowest shard: a deterministic order across passes. A switchover's pinned primary stays."""
    overloaded = [
        node
        for node in view.members.values()
        if node.is_primary
        and node.obs.slots
        and node.pod.name != view.desired.pinned_primary
        and facts.overloaded(node.pod.node_name or "", _zone(view, node))
    ]
    overloaded.sort(key=lambda node: (-facts.per_node[node.pod.node_name or ""], node.pod.order))
    return overloaded


def _making_room(view: View, facts: Spread, overloaded: list[Node]) -> Node | None:
    """A replica to take over from a primary on a full node where a crowded primary has an in-sync
    replica, so that this move lets that one follow next pass."""
    for crowded in overloaded:
        for blocked in view.followers(crowded):
            host = blocked.pod.node_name
            if host is None or host == crowded.pod.node_name or not view.in_sync(blocked, crowded):
                continue
            for resident in view.members.values():
                if not (resident.is_primary and resident.obs.slots and resident.pod.node_name == host):
                    continue
                if resident.pod.name == view.desired.pinned_primary:
                    continue
                replica = _best_replica(view, facts, resident)
                if replica is None or replica.pod.node_name is None:
                    continue
                after = facts.moved(host, _zone(view, resident), replica.pod.node_name, _zone(view, replica))
                if after.fits(host, _zone(view, blocked)):
                    return replica
    return None


def _best_replica(view: View, facts: Spread, primary: Node) -> Node | None:
    candidates = [
        node
        for node in view.followers(primary)
        if view.in_sync(node, primary)
        and node.pod.node_name is not None
        and node.pod.node_name != primary.pod.node_name
        and facts.fits(node.pod.node_name, _zone(view, node))
        and may_take_over(view, node)
    ]
    return min(
        candidates,
        key=lambda node: (facts.per_node[node.pod.node_name or ""], -node.obs.repl_offset, node.pod.order),
        default=None,
    )


def fragile(view: View) -> bool:
    """One Kubernetes node holds at least half of the slot-serving primaries (every 1- and 2-shard
    cluster; 4 shards on 3 nodes), and shards have replicas: that node's failure leaves Valkey no
    majority to elect with, and only the operator's takeover (plan._cut_off) serves those slots
    again. No watch event tells of it until Kubernetes marks the node's pods not Ready (the node
    monitor's grace period, 40 s by default), so such a cluster is looked at every FRAGILE_PROBE_S."""
    facts = spread(view)
    if facts is None or view.desired.replicas_per_shard < 1:
        return False
    primaries = sum(facts.per_node.values())
    return primaries > 0 and facts.worst * 2 >= primaries


def request_in_flight(view: View) -> bool:
    """A replica asked to take over that has not yet, and whose request has not timed out with backoff."""
    for node in view.members.values():
        request = FailoverRequest.of(node.pod)
        if request is not None and node.obs.role is NodeRole.REPLICA and request.pending(view.now):
            return True
    return False


def describe(view: View) -> str | None:
    """What the spread does this pass, for the status; None when nothing is to move."""
    facts = spread(view)
    if facts is None or view.desired.spread_held:
        return None  # a switchover's request in flight is the switchover's (status.switchover)
    if not next_moves(view) and not request_in_flight(view):
        return None
    busiest = max(facts.per_node, key=lambda name: (facts.per_node[name], name))
    return (
        f"moving primaries off busy Kubernetes nodes ({busiest} holds {facts.per_node[busiest]}; "
        f"at most {facts.node_cap} per node, {facts.zone_cap} per zone)"
    )
