"""How soon a quiet cluster is probed again: back off while nothing changes (pure).

An Active cluster is re-observed without any watch event because Valkey
changes raise none. Probing every node of every cluster every 30 s makes an
idle operator's cost grow with the fleet, so a quiet pass stretches the next
interval: 30 s after anything changed, then x4 per pass that observed the same
cluster again (30, 120, 300 s with the default cap). Quiet means: Active (or
paused), no action, no finding, no failure, no crash-loop retry pending, and
the same signature as the previous pass. Anything else (a watch event whose
object changed, a probe error, a difference in what the nodes report) starts
again at 30 s. A watch event always starts a pass at once, whatever the
interval: failures the API shows (a deleted pod, a killed server's pod going
unready or restarting) are seen without waiting. Only changes no event shows
(inside Valkey: a manual CONFIG SET, ACL or CLUSTER command, a gossip-only
failure) wait up to the cap. A cluster that one Kubernetes node's failure would leave without
a majority is never quiet: plan.py requeues it every spread.FRAGILE_PROBE_S.
"""

from __future__ import annotations

import hashlib

import attrs

from controllers.shared.observation import NodeObservation, Observation

FIRST = 30.0
"""The first interval once quiet (the operator's steady requeue before back-off existed)."""
FACTOR = 4.0
"""Each quiet pass with the same signature multiplies the interval by this much."""


@attrs.frozen(kw_only=True)
class Quiet:
    """What a quiet pass leaves for the next: its signature and the interval it chose."""

    signature: str
    interval: float


def next_quiet(previous: Quiet | None, signature: str, maximum: float) -> Quiet:
    """The interval after a quiet pass: FIRST after a change (or none before), else x FACTOR, capped."""
    if previous is None or previous.signature != signature:
        return Quiet(signature=signature, interval=min(FIRST, maximum))
    return Quiet(signature=signature, interval=min(max(previous.interval, FIRST) * FACTOR, maximum))


def _node_part(node: NodeObservation) -> str:
    """A node's observation without what moves while nothing changes (offsets, PONG times, how long
    a replica's link has been down, how many keys the clients' writes left)."""
    steady = attrs.evolve(
        node,
        repl_offset=0,
        keys=None,
        link_down_seconds=None,
        known_nodes=tuple(
            sorted((attrs.evolve(known, pong_received_ms=0) for known in node.known_nodes), key=repr)
        ),
    )
    return repr(steady)


def signature(observation: Observation, cluster_version: str) -> str:
    """A digest of everything a pass observed that a change would show in: the cluster object's
    resourceVersion, each owned pod, object and data claim as cached, each node's report."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(cluster_version.encode())
    for pod in sorted(observation.pods, key=lambda pod: pod.name):
        digest.update(repr(pod).encode())
    for name in sorted(observation.objects):
        found = observation.objects[name]
        version = (found or {}).get("metadata", {}).get("resourceVersion") if found is not None else None
        digest.update(f"{name}={version}".encode())
    for claim in sorted(observation.claims, key=repr):
        digest.update(repr(claim).encode())
    for name in sorted(observation.nodes):
        digest.update(f"{name}:{_node_part(observation.nodes[name])}".encode())
    return digest.hexdigest()
