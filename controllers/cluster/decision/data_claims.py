"""The data claims of a persistent cluster (SPEC 1.6): which claim a new pod starts on, and the
claims' upkeep (pure, read by the planner and the report).

A claim belongs to one node identity: the node id its server reported
(render/claims.py NODE_ID_ANNOTATION). Rules:
- a claim no running pod uses ("free") is a node away: the next pod its
  shard misses starts on it and comes back as that node, with its data;
- its id is "dormant", not departed: never forgotten, never taken over for,
  while the claim waits (the pod coming back is the repair);
- a planned removal deletes the pod's claim with the pod (decide.py), so only
  unplanned losses leave free claims;
- a server on a claim that reports another id than the claim records started
  without its data (the volume died with its node): the claim records the new
  id, the old one becomes an ordinary departed node, and an Event says so;
- a claim no server can start on (every recent failure of a shard in a crash
  loop ran on it: a volume that came back unusable) holds no dormant node: its
  node is departed (its replica is promoted), and once nothing needs its data
  the claim is deleted, so the next pod starts on a new one as a new replica;
- a claim written in another persistence mode is never started on again
  (an rdb claim started in aof mode comes back empty under its old id and
  slots): its node is departed, and the claim goes once free;
- free claims nobody will need (their shard left the spec, another mode, or
  the shard has its pods on other claims and all of them serve) are deleted;
- a larger size is patched onto the claims (the storage class decides whether
  it can grow: a refusal is a failed action in status); a smaller one is
  reported and never applied.
"""

from __future__ import annotations

from collections.abc import Iterable

from controllers.cluster.decision.actions import DeleteClaim, PatchClaim
from controllers.cluster.decision.view import View
from controllers.shared.names import NODE_ID_ANNOTATION
from controllers.shared.observation import ClaimObservation
from valkey_operator.valkey.slots import subtract


def in_use(view: View) -> set[str]:
    """Claims a pod that may still run a server mounts (an ended pod's server is gone)."""
    return {pod.claim for pod in view.pods if pod.claim and not pod.ended}


def usable(view: View, claim: ClaimObservation) -> bool:
    """A claim a pod may start on: not going away, and written in the mode the config asks for."""
    return not claim.deleting and claim.mode == view.desired.claim_mode


def free_claims(view: View, shard: int) -> list[ClaimObservation]:
    """The shard's claims waiting for a pod, oldest first."""
    used = in_use(view)
    return sorted(
        (
            claim
            for claim in view.data_claims.values()
            if claim.shard == shard and usable(view, claim) and claim.name not in used
        ),
        key=lambda claim: claim.order,
    )


def startable(view: View, shard: int) -> list[str]:
    """The shard's free claims a pod may start on now: not those of a held primary (view.held)."""
    return [claim.name for claim in free_claims(view, shard) if claim.node_id not in view.held]


def waiting(view: View, shard: int) -> int:
    """Free claims of held primaries: no pod on a new claim is created in their place meanwhile."""
    return sum(1 for claim in free_claims(view, shard) if claim.node_id in view.held)


def returning(view: View, shard: int) -> int:
    """The shard's claims whose pod is going away without them (deleted by someone else, not by a
    planned removal, which deletes the claim too): their node comes back on them once the pod is
    gone, so no pod is created on a new claim in their place meanwhile."""
    staying = {pod.claim for pod in view.pods if pod.claim and not pod.ended and not pod.deleting}
    going = {pod.claim for pod in view.pods if pod.claim and not pod.ended and pod.deleting}
    return sum(
        1
        for claim in view.data_claims.values()
        if claim.shard == shard and usable(view, claim) and claim.name in going - staying
    )


def replaceable(view: View) -> list[ClaimObservation]:
    """Failing claims (view.failing_claims) whose data the cluster does not need: the node recorded
    on it is not the only holder of any slot (its replica serves them now, or it served none). One
    still holding the only copy stays, its shard reported PodsFailing, for a person to decide."""
    found = []
    for name in sorted(view.failing_claims):
        claim = view.data_claims.get(name)
        if claim is None or claim.deleting:
            continue
        owned = view.claims.get(claim.node_id or "", ())
        if not subtract(owned, view.served) and not any(
            node.obs.primary_id == claim.node_id for node in view.nodes.values() if claim.node_id
        ):
            found.append(claim)
    return found


def identity_lost(view: View) -> list[tuple[str, str, str]]:
    """(claim, recorded id, reported id) for servers that came up on a claim without its data."""
    lost = []
    for node in view.nodes.values():
        claim = view.data_claims.get(node.pod.claim or "")
        if claim is not None and claim.node_id and claim.node_id != node.node_id:
            lost.append((claim.name, claim.node_id, node.node_id))
    return lost


def upkeep(view: View) -> Iterable[PatchClaim | DeleteClaim]:
    """Record reported node ids, grow the claims to the desired size, delete unneeded free claims."""
    for claim in sorted(view.data_claims.values(), key=lambda claim: claim.name):
        if claim.deleting:
            continue
        reported = _reported_id(view, claim)
        if reported is not None and reported != claim.node_id:
            yield PatchClaim(claim.name, claim.uid, ((NODE_ID_ANNOTATION, reported),))
        if claim in growing(view):
            yield PatchClaim(claim.name, claim.uid, storage=view.desired.claim_size)
    if view.context.awaiting or view.unidentified:
        return
    for claim in _unneeded(view):
        yield DeleteClaim(claim.name, claim.uid, _why_unneeded(view, claim))
    for claim in replaceable(view):
        yield DeleteClaim(claim.name, claim.uid, "no server starts on it and its data is served elsewhere")


def smaller(view: View) -> list[ClaimObservation]:
    """Claims that would grow to persistence.size."""
    wanted = view.desired.claim_bytes
    return [
        claim
        for claim in view.data_claims.values()
        if not claim.deleting
        and wanted is not None
        and claim.requested is not None
        and wanted > claim.requested
    ]


def growing(view: View) -> list[ClaimObservation]:
    """Smaller claims whose StorageClass allows expansion (or was not found: the API server decides)."""
    return [claim for claim in smaller(view) if view.expandable.get(claim.storage_class or "", True)]


def fixed_size(view: View) -> dict[str, list[str]]:
    """StorageClass -> the smaller claims it will not expand (allowVolumeExpansion false or unset)."""
    found: dict[str, list[str]] = {}
    for claim in smaller(view):
        if not view.expandable.get(claim.storage_class or "", True):
            found.setdefault(claim.storage_class or "", []).append(claim.name)
    return found


def shrinking(view: View) -> list[str]:
    """Claims larger than the desired size (a claim never shrinks: reported, not applied)."""
    wanted = view.desired.claim_bytes
    return sorted(
        claim.name
        for claim in view.data_claims.values()
        if wanted is not None
        and claim.requested is not None
        and wanted < claim.requested
        and not claim.deleting
    )


def _reported_id(view: View, claim: ClaimObservation) -> str | None:
    for node in view.nodes.values():
        if node.pod.claim == claim.name and not node.pod.deleting:
            return node.node_id
    return None


def _unneeded(view: View) -> Iterable[ClaimObservation]:
    used = in_use(view)
    for claim in view.data_claims.values():
        if claim.deleting or claim.name in used:
            continue
        if not usable(view, claim) or claim.shard is None or not 0 <= claim.shard < view.desired.shards:
            yield claim  # no pod will start on it: its node (if any) is departed
            continue
        serving = [
            pod
            for pod in view.shard_pods(claim.shard)
            if pod.claim and pod.claim != claim.name and pod.name in view.members and pod.ready
        ]
        if len(serving) >= view.desired.pods_per_shard:
            yield claim


def _why_unneeded(view: View, claim: ClaimObservation) -> str:
    if not view.desired.persistent:
        return "the config no longer asks for persistence"
    if claim.mode != view.desired.claim_mode:
        return f"written in persistence mode {claim.mode}, the config asks for {view.desired.claim_mode}"
    if claim.shard is None or not 0 <= claim.shard < view.desired.shards:
        return f"shard {claim.shard} is beyond spec.shards"
    return f"shard {claim.shard} serves from its pods' own claims"
