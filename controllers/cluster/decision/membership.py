"""Which pods the client Service hands to clients (SPEC 1.8): cluster members that serve.

The client Service (`status.endpoint`) selects pods carrying the member label
and, not publishing not-ready addresses, only Ready ones. A client that
bootstraps from a node that has not joined gets an empty slot map, and one that
bootstraps from a node about to go gets a closed connection, so the label is on
exactly the pods whose node:
- is a member of the cluster (met by the seed) and reports cluster_state ok;
- is a primary serving slots, or a replica in sync with such a primary;
- is not removed in this pass (the label goes, first, in the same pass as the
  DeletePod, so the Service drops it before the server stops);
- runs in a Ready pod: a starting pod (PodObservation.starting) joins and may
  serve before its readiness probe passes, but the Service would not hand it
  out yet, and the label would end its being probed as a starting pod (a
  labelled pod that is not Ready is not probed until it is Ready again). The
  pass that sees it Ready (a watch event) labels it.
Surge pods, scale-out pods, nodes below the version floor and drained primaries
therefore never carry it. A pod whose node did not answer this pass keeps what
it has: the operator losing sight of a node is no reason to take it from
clients (the kubelet's readiness probe still removes a dead one).

The peer Service (`{cluster}`, the pods' subdomain) keeps selecting every pod
and publishing not-ready addresses, so every node keeps its DNS name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controllers.cluster.decision.actions import DeletePod, MarkMember, Planned
from controllers.cluster.decision.view import Node, View
from controllers.shared.observation import PodObservation


def serving(view: View, node: Node) -> bool | None:
    """Whether a member node serves clients; None when this pass could not tell."""
    if node.obs.cluster_ok is None:
        return None
    if not node.obs.cluster_ok:
        return False
    if node.is_primary:
        return bool(node.obs.slots)
    primary = view.by_id.get(node.obs.primary_id or "")
    if primary is None:
        return None  # its primary did not answer this pass: the replica's sync is unknown
    return primary.is_primary and bool(primary.obs.slots) and view.in_sync(node, primary)


def wanted(view: View, pod: PodObservation, leaving: frozenset[str]) -> bool | None:
    """Whether pod should carry the member label; None to leave it as it is."""
    if pod.name in leaving:
        return False
    if pod.starting:
        return None  # labelled once Ready (module docstring)
    node = view.members.get(pod.name)
    if node is not None:
        return serving(view, node)
    if pod.name in view.nodes or any(rejected.pod.name == pod.name for rejected in view.rejected):
        return False  # answered, but has not joined (or never will: below the floor)
    return None


def mark(view: View, actions: Sequence[Planned]) -> Iterable[MarkMember]:
    """The label changes this pass needs, for live pods only (an ending pod leaves every Service)."""
    leaving = frozenset(action.pod for action in actions if isinstance(action, DeletePod))
    for pod in view.pods:
        if not pod.live:
            continue
        member = wanted(view, pod, leaving)
        if member is not None and member != pod.member:
            yield MarkMember(pod.name, pod.uid, member)


def first(view: View, actions: Sequence[Planned]) -> tuple[Planned, ...]:
    """The pass's actions, label changes first: a pod leaves the client Service before it goes."""
    return (*mark(view, actions), *actions)
