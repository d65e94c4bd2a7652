"""What the real Valkey nodes report, and what follows from it (coverage, redundancy, convergence).

The chaos run never takes the operator's word for the cluster's state: it asks
every pod's valkey-server itself (INFO, CLUSTER NODES, CLUSTER INFO, CONFIG GET)
as the operator's admin user. `probe` talks to nodes; everything else here is a
pure function of the facts it gathered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

import attrs

from valkey_operator.valkey.admin import AdminClient, ValkeyAdminError
from valkey_operator.valkey.replies import parse_cluster_nodes
from valkey_operator.valkey.slots import ALL_SLOTS, SlotRanges, format_slot_ranges, subtract, union

PRIMARY = "primary"
REPLICA = "replica"


@attrs.frozen
class NodeFacts:
    """One node as it describes itself; `error` set when it could not be asked."""

    ip: str
    error: str = ""
    node_id: str = ""
    role: str = ""
    primary_id: str | None = None
    slots: SlotRanges = ()
    version: str = ""
    cluster_state: str = ""
    replicas_online: int = 0
    """For a primary: replicas INFO replication lists as state=online."""
    policy: str = ""
    """maxmemory-policy from CONFIG GET: the runtime setting the schedule changes."""

    @property
    def reachable(self) -> bool:
        return not self.error

    @property
    def serving_primary(self) -> bool:
        return self.reachable and self.role == PRIMARY and bool(self.slots)


async def probe(admin: AdminClient, ips: Iterable[str]) -> dict[str, NodeFacts]:
    """Ask every node at once; an unreachable node is a fact, not an exception."""
    ordered = sorted(set(ips))
    found = await asyncio.gather(*(_probe_one(admin, ip) for ip in ordered))
    return dict(zip(ordered, found, strict=True))


async def _probe_one(admin: AdminClient, ip: str) -> NodeFacts:
    try:
        async with asyncio.timeout(10), admin.connect(ip) as node:
            info = await node.info("server", "replication")
            cluster = await node.cluster_info()
            known = parse_cluster_nodes(await node.cluster_nodes())
            config = await node.config_get("maxmemory-policy")
    except (ValkeyAdminError, TimeoutError, OSError) as exc:
        return NodeFacts(ip, error=str(exc) or type(exc).__name__)
    myself = next((entry for entry in known if entry.myself), None)
    if myself is None:
        return NodeFacts(ip, error="CLUSTER NODES has no myself line")
    online = sum(
        1
        for key, value in info.items()
        if key.startswith("slave") and key[5:].isdigit() and "state=online" in value
    )
    return NodeFacts(
        ip,
        node_id=myself.node_id,
        role=PRIMARY if info.get("role") == "master" else REPLICA,
        primary_id=myself.primary_id,
        slots=myself.slots,
        version=info.get("valkey_version", ""),
        cluster_state=cluster.get("cluster_state", ""),
        replicas_online=online,
        policy=config.get("maxmemory-policy", ""),
    )


def uncovered(facts: Mapping[str, NodeFacts]) -> SlotRanges:
    """Slots no reachable primary claims."""
    return subtract(ALL_SLOTS, union(*(node.slots for node in facts.values() if node.serving_primary)))


def shards_without_replica(facts: Mapping[str, NodeFacts]) -> list[str]:
    """Serving primaries (by their slots) with no online replica: a fault there could lose data."""
    return [
        format_slot_ranges(node.slots)
        for node in facts.values()
        if node.serving_primary and node.replicas_online < 1
    ]


def convergence_problems(facts: Mapping[str, NodeFacts], shards: int, replicas: int) -> list[str]:
    """Why the nodes are not (yet) a healthy shards x replicas cluster serving every slot; [] if they are."""
    problems = [f"{ip} unreachable: {node.error}" for ip, node in facts.items() if not node.reachable]
    reachable = [node for node in facts.values() if node.reachable]
    if len(facts) != shards * (1 + replicas):
        problems.append(f"{len(facts)} pods, want {shards * (1 + replicas)}")
    primaries = [node for node in reachable if node.serving_primary]
    if len(primaries) != shards:
        problems.append(f"{len(primaries)} primaries serve slots, want {shards}")
    missing = uncovered(facts)
    if missing:
        problems.append(f"slots {format_slot_ranges(missing)} not served")
    for node in primaries:
        if node.replicas_online != replicas:
            problems.append(f"primary {node.ip} has {node.replicas_online} online replicas, want {replicas}")
    ids = {node.node_id for node in primaries}
    for node in reachable:
        if node.role == REPLICA and node.primary_id not in ids:
            problems.append(f"replica {node.ip} follows {node.primary_id}, not a serving primary")
        if node.cluster_state != "ok":
            problems.append(f"{node.ip} cluster_state {node.cluster_state}")
    return problems


def hosts_holding_a_whole_shard(facts: Mapping[str, NodeFacts], host_of: Mapping[str, str]) -> set[str]:
    """Kubernetes nodes on which some shard has every copy (failing one would lose that shard's data).

    host_of maps a pod IP to its Kubernetes node; a shard is a serving primary and its replicas.
    """
    by_primary: dict[str, set[str]] = {}
    for node in facts.values():
        if node.serving_primary:
            by_primary.setdefault(node.node_id, set()).add(host_of.get(node.ip, "?"))
    for node in facts.values():
        if node.reachable and node.role == REPLICA and node.primary_id in by_primary:
            by_primary[node.primary_id].add(host_of.get(node.ip, "?"))
    return {next(iter(hosts)) for hosts in by_primary.values() if len(hosts) == 1}
