"""Which node each shard's RDB is taken from, and whether the cluster can be backed up now (pure).

One RDB per shard, from an in-sync replica where the shard has one: the fork
and the transfer then load a node that serves no writes. A replica is in sync
when its link to the primary is up and it trails by at most IN_SYNC_BYTES; the
one furthest ahead wins. A shard with no such replica is read from its
primary. The cluster must be settled: every slot served by exactly one
reachable primary and no slot migration under way, or a slot's keys could be
in two shards' files (or in none).
"""

from __future__ import annotations

import attrs

from controllers.shared.observation import NodeObservation, Observation, PodObservation
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.slots import SlotRanges, coverage, format_slot_ranges

IN_SYNC_BYTES = 1024 * 1024
"""A replica this close to its primary's offset is a faithful copy of the shard."""


@attrs.frozen(kw_only=True)
class ShardSource:
    index: int
    """The shard label of the primary's pod: the shard's place in the manifest."""
    pod: str
    ip: str
    role: NodeRole
    slots: SlotRanges
    version: str
    primary_pod: str
    primary_ip: str
    """The shard's primary (the source itself when role is primary): a OneInstant backup pauses it."""

    @property
    def slots_text(self) -> str:
        return format_slot_ranges(self.slots)


@attrs.frozen
class NotSettled:
    """Why the cluster cannot be backed up right now (a wait, not a failure)."""

    message: str


def sources(observation: Observation) -> tuple[ShardSource, ...] | NotSettled:
    """One source per shard, ordered by shard, or why not now."""
    pods = {pod.name: pod for pod in observation.pods if pod.live and pod.ip}
    nodes = {name: node for name, node in observation.nodes.items() if name in pods}
    unreachable = sorted(name for name, node in nodes.items() if not node.reachable)
    if unreachable:
        return NotSettled(f"nodes not reachable: {', '.join(unreachable)}")
    if any(node.migrations is None or any(job.active for job in node.jobs) for node in nodes.values()):
        return NotSettled("slot migrations are under way")
    primaries = [(pods[name], node) for name, node in nodes.items() if _primary(node)]
    if not coverage(node.slots for _, node in primaries).complete:
        return NotSettled("not every slot is served by exactly one reachable primary")
    found: list[ShardSource] = []
    for pod, node in primaries:
        if pod.shard is None:
            return NotSettled(f"pod {pod.name} has no shard label")
        replica = _best_replica(node, [(pods[name], other) for name, other in nodes.items()])
        source_pod, source_node = replica or (pod, node)
        role = NodeRole.PRIMARY if replica is None else NodeRole.REPLICA
        found.append(
            ShardSource(
                index=pod.shard,
                pod=source_pod.name,
                ip=source_pod.ip or "",
                role=role,
                slots=node.slots,
                version=str(source_node.version_text or ""),
                primary_pod=pod.name,
                primary_ip=pod.ip or "",
            )
        )
    found.sort(key=lambda source: source.index)
    if len({source.index for source in found}) != len(found):
        return NotSettled("two primaries carry the same shard label")
    return tuple(attrs.evolve(source, index=position) for position, source in enumerate(found))


def _primary(node: NodeObservation) -> bool:
    return node.role is NodeRole.PRIMARY and bool(node.slots)


def _best_replica(
    primary: NodeObservation, candidates: list[tuple[PodObservation, NodeObservation]]
) -> tuple[PodObservation, NodeObservation] | None:
    in_sync = [
        (pod, node)
        for pod, node in candidates
        if node.role is NodeRole.REPLICA
        and node.primary_id == primary.node_id
        and node.link_up
        and primary.repl_offset - node.repl_offset <= IN_SYNC_BYTES
    ]
    return max(in_sync, key=lambda pair: (pair[1].repl_offset, pair[0].name), default=None)
