"""The chaos run's invariants and the record of their violations.

1. Every write acknowledged with WAIT by at least one replica is readable
   afterwards (checked at each settle and at the end, from a fresh connection).
2. The operator process never dies unless the schedule killed it.
3. After the last fault the cluster converges to Active, every slot served and
   every shard with its replicas, within CONVERGE_BOUND seconds, judged by the
   nodes themselves.
4. The status never claims what the nodes do not run: while it says Active for
   the current generation, its shard count, node ids, roles, slots, versions,
   image and runtime setting must match what the nodes report. A status is an
   observation, so a claim may be stale for one steady requeue (30 s) plus a
   pass; it is a violation only if it stays false for CLAIM_GRACE seconds.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from valkey_operator.core.rest import Obj
from valkey_operator.valkey.slots import format_slot_ranges, parse_slot_ranges
from valkey_testbed.chaos.nodes import NodeFacts, uncovered

CONVERGE_BOUND = 300.0
"""Seconds from the last fault (or a settle step) to a converged cluster: a 3x1 roll takes ~70 s on 2
shared cores, a scale with slot migration less; the bound leaves room for one of each after a fault."""
STEADY_PROBE_MAX = 30
"""The operator under chaos runs with --steady-probe-max-seconds at this (no back-off): a paused
server's failover shows in no Kubernetes event, only in the next probe."""
CLAIM_GRACE = STEADY_PROBE_MAX + 15.0
"""Seconds a status claim may disagree with the nodes: the steady requeue (30 s) plus a pass."""

ACKED = "acknowledged-writes"
OPERATOR = "operator-alive"
CONVERGED = "converged"
STATUS = "status-truth"


@attrs.frozen
class Violation:
    invariant: str
    step: int
    """The schedule step during or after which it was seen (-1: before the first step)."""
    at: float
    message: str


@attrs.define
class Violations:
    seed: int
    found: list[Violation] = attrs.Factory(list)

    def add(self, invariant: str, step: int, at: float, message: str) -> Violation:
        violation = Violation(invariant, step, at, message)
        self.found.append(violation)
        return violation

    def reproduce(self, violation: Violation, minutes: float) -> str:
        return (
            f"VIOLATION {violation.invariant} at step {violation.step} (t={violation.at:.1f}s): "
            f"{violation.message}\n  reproduce: python -m valkey_testbed chaos --seed {self.seed} "
            f"--minutes {minutes:g}  (step {violation.step} of seed {self.seed})"
        )


def current_and_active(cluster: Obj) -> bool:
    """The status describes the current spec and says Active: only then does it claim the nodes run it."""
    status = cluster.get("status") or {}
    return (
        status.get("state") == "Active"
        and status.get("observedGeneration") == cluster["metadata"]["generation"]
        and status.get("shards") == cluster["spec"]["shards"]
    )


def status_claims(cluster: Obj, facts: Mapping[str, NodeFacts], policy: str) -> list[str]:
    """What an Active, current status claims that the nodes contradict; [] when it claims nothing."""
    if not current_and_active(cluster):
        return []
    status: Obj = cluster["status"]
    false: list[str] = []
    primaries = [node for node in facts.values() if node.serving_primary]
    if len(primaries) != status["shards"]:
        false.append(f"status says {status['shards']} shards, {len(primaries)} primaries serve slots")
    missing = uncovered(facts)
    if missing:
        false.append(f"status says Active, slots {format_slot_ranges(missing)} are not served")
    image_version = str(status.get("currentImage") or "").rpartition(":")[2]
    listed = {node.get("ip") for node in status.get("nodes") or []}
    for ip in facts:
        if ip not in listed:
            false.append(f"pod {ip} runs but is not in status.nodes")
    for claim in status.get("nodes") or []:
        node = facts.get(claim.get("ip") or "")
        name = claim.get("pod")
        if node is None or not node.reachable:
            false.append(f"status lists {name} at {claim.get('ip')}, no node answers there")
            continue
        if claim.get("nodeId") != node.node_id:
            false.append(f"{name}: status nodeId {claim.get('nodeId')}, node is {node.node_id}")
        if claim.get("role") != node.role:
            false.append(f"{name}: status role {claim.get('role')}, node is a {node.role}")
        if claim.get("version") != node.version:
            false.append(f"{name}: status version {claim.get('version')}, node runs {node.version}")
        if image_version and node.version != image_version:
            false.append(f"{name}: currentImage {status.get('currentImage')}, node runs {node.version}")
        if parse_slot_ranges(claim.get("slots") or "") != node.slots:
            false.append(
                f"{name}: status slots {claim.get('slots')}, node serves {format_slot_ranges(node.slots)}"
            )
        if node.policy != policy:
            false.append(f"{name}: Active for the current config, node has maxmemory-policy {node.policy}")
    node_count = len(status.get("nodes") or [])
    if node_count != status["shards"] * (1 + cluster["spec"]["replicasPerShard"]):
        false.append(f"status lists {node_count} nodes for {status['shards']} shards")
    for node in facts.values():
        if node.reachable and node.cluster_state != "ok":
            false.append(f"status says Active, {node.ip} reports cluster_state {node.cluster_state}")
    return false
