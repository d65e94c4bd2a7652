"""The status a planning pass reports: findings (what stands between the cluster and Active),
conditions, per-node status, from the pass's View and the actions planned."""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Sequence

import attrs

from controllers.cluster.decision import certificates, data_claims, external, spread, stalled, upkeep
from controllers.cluster.decision.actions import (
    CreatePod,
    DeletePod,
    Failover,
    Failure,
    MarkMember,
    NewPod,
    Planned,
    Promote,
    ReloadTls,
    SetConfig,
    SyncAcl,
)
from controllers.cluster.decision.rebalance import (
    trouble,
)
from controllers.cluster.decision.rollout import FAILOVER_TIMEOUT_S, Rollout
from controllers.cluster.decision.view import Node, View
from controllers.shared.observation import PodObservation
from controllers.shared.versions import format_version, meets_floor
from valkey_operator.api.cluster import (
    DEGRADED,
    PROGRESSING,
    READY,
    STALLED,
    ClusterState,
    NodeRole,
    NodeStatus,
)
from valkey_operator.api.external import ExternalEndpoint
from valkey_operator.api.resources import VERSION_FLOOR_TEXT
from valkey_operator.api.tunables import TLS_AUTH_CLIENTS
from valkey_operator.core.clock import rfc3339
from valkey_operator.valkey.slots import (
    ALL_SLOTS,
    SlotRanges,
    coverage,
    format_slot_ranges,
    intersect,
    slot_count,
    subtract,
    union,
)


class Reason(enum.StrEnum):
    """Condition reasons; the first finding of a pass names the condition's reason."""

    READY = "ClusterReady"
    RECONCILED = "Reconciled"
    PAUSED = "Paused"
    AS_EXPECTED = "AsExpected"
    VERSION_BELOW_FLOOR = "VersionBelowFloor"
    WAITING_FOR_PODS = "WaitingForPods"
    JOINING_NODES = "JoiningNodes"
    ASSIGNING_SLOTS = "AssigningSlots"
    ATTACHING_REPLICAS = "AttachingReplicas"
    SYNCING_REPLICAS = "SyncingReplicas"
    WAITING_FOR_CLUSTER_STATE = "WaitingForClusterState"
    WAITING_FOR_GOSSIP = "WaitingForGossip"
    FORGETTING_NODES = "ForgettingNodes"
    REMOVING_PODS = "RemovingPods"
    UPDATE_PENDING = "UpdatePending"
    SCALE_DOWN_PENDING = "ScaleDownPending"
    NODES_UNREACHABLE = "NodesUnreachable"
    SLOTS_UNCOVERED = "SlotsUncovered"
    SLOTS_CONTESTED = "SlotsContested"
    SHARD_CONFLICT = "ShardConflict"
    UNLABELLED_PODS = "UnlabelledPods"
    MIGRATING_SLOTS = "MigratingSlots"
    REBALANCING_SLOTS = "RebalancingSlots"
    MIGRATION_FAILED = "SlotMigrationFailed"
    PROMOTING_REPLICA = "PromotingReplica"
    DATA_LOST = "DataLost"
    PODS_FAILING = "PodsFailing"
    PODS_UNSCHEDULABLE = "PodsUnschedulable"
    FAILOVER_FAILED = "FailoverFailed"
    APPLYING_SETTINGS = "ApplyingSettings"
    APPLYING_OBJECTS = "ApplyingObjects"
    PATCHING_PODS = "PatchingPods"
    APPLYING_ACL = "ApplyingAcl"
    UNKNOWN_COMMAND = "UnknownCommand"
    CONFIG_REJECTED = "ConfigRejected"
    ACL_REJECTED = "AclRejected"
    ACTION_FAILED = "ActionFailed"
    RELOADING_TLS = "ReloadingTls"
    CERTIFICATE_EXPIRING = "CertificateExpiring"
    TLS_REJECTED = "TlsRejected"
    BALANCING_PRIMARIES = "BalancingPrimaries"
    CLUSTER_STATE_FAIL = "ClusterStateFail"
    CLAIM_SHRINK_REFUSED = "ClaimShrinkRefused"
    CLAIM_GROWTH_REFUSED = "ClaimGrowthRefused"
    VOLUME_LOST = "VolumeLost"
    RESTORING = "Restoring"
    RESTORE_INCOMPLETE = "RestoreIncomplete"
    FORBIDDEN = stalled.FORBIDDEN
    IMAGE_PULL_FAILED = stalled.IMAGE_PULL_FAILED


@attrs.frozen
class Finding:
    """One thing standing between the cluster and Active: progress to wait for, or a problem."""

    reason: Reason
    message: str
    problem: bool = False

    @property
    def advice(self) -> str | None:
        """What a human must do, for a finding only a human can clear (stalled.py): Stalled=True."""
        return stalled.finding_advice(self.reason)


@attrs.frozen
class PlannedCondition:
    """A condition without lastTransitionTime: the status writer keeps or moves that."""

    type: str
    status: bool
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class RolloutProgress:
    """A rolling update under way: how far it is, and what the rolling shard does this pass."""

    shards_updated: int
    shards: int
    shard: int
    step: str


@attrs.frozen(kw_only=True)
class TlsProgress:
    """status.tls: the Secret content seen, since when, and the earliest expiry a node presents."""

    secret_hash: str
    changed_at: str
    not_after: str | None
    client_certificates: bool = False
    """status.tls.clientAuth Required: the spec requires client certificates, or a node may."""


@attrs.frozen(kw_only=True)
class PlannedStatus:
    state: ClusterState
    message: str
    shards: int
    ready_shards: int
    ready_nodes: int
    desired_nodes: int
    """shards x (1 + replicasPerShard): status.ready reads ready_nodes/desired_nodes."""
    nodes: tuple[NodeStatus, ...]
    conditions: tuple[PlannedCondition, ...]
    uncovered: SlotRanges
    """Slots no reachable primary serves (all of them before bootstrap assigns any)."""
    findings: tuple[Finding, ...]
    config_hash: str | None = None
    """status.configHash: the desired settings' hash once every node runs them, else as recorded."""
    current_image: str | None = None
    """status.currentImage: the desired image once every pod runs the current template, else as recorded."""
    rollout: RolloutProgress | None = None
    tls: TlsProgress | None = None
    max_primaries_per_node: int | None = None
    """The most primaries one Kubernetes node holds (None while pods' nodes are unknown)."""
    external_endpoints: tuple[ExternalEndpoint, ...] = ()
    """spec.externalAccess: the address each node announces, once it does (external.py)."""

    def condition(self, type_: str) -> PlannedCondition:
        return next(condition for condition in self.conditions if condition.type == type_)


def report(
    view: View, actions: Sequence[Planned], rolling: Rollout, failures: Sequence[Failure] = ()
) -> PlannedStatus:
    """The status this pass's observation implies, given the actions planned (and those that failed)
    and the roll as plan() computed it; values the nodes refused before are reported again."""
    uncovered = subtract(ALL_SLOTS, view.served)
    refusals = (*failures, *upkeep.standing_refusals(view))
    blocking = (*_findings(view, actions, rolling, uncovered), *_failure_findings(view, refusals))
    advisories = tuple(_advisories(view))
    ready_shards = sum(1 for shard in range(view.desired.shards) if _shard_ready(view, shard))
    loops = view.crash_loops
    impact = _client_impact(view, uncovered)
    stopped = (
        Finding(Reason.VERSION_BELOW_FLOOR, _version_message(view), problem=True)
        if view.rejected
        else Finding(Reason.PODS_FAILING, loops.message(view.desired.image), problem=True)
        if loops.blocked
        else None
    )
    if stopped is not None and (impact is not None or not view.formed_before()):
        state = ClusterState.FAILED
        message = stopped.message
    elif stopped is not None:
        # A roll the operator cannot finish (a new binary below the floor, new pods failing) while
        # the old pods keep serving: clients are not affected, so not Failed (SPEC 1.8).
        state = ClusterState.UPDATING
        message = f"{stopped.message}; the cluster keeps serving on its current pods"
        blocking = (attrs.evolve(stopped, message=message), *blocking)
    elif not blocking:
        state = ClusterState.ACTIVE
        message = (
            f"{view.desired.shards} shard(s) with {view.desired.replicas_per_shard} replica(s) each: "
            f"all slots served, replicas in sync"
        )
    else:
        state = _unsettled_state(view)
        message = "; ".join(finding.message for finding in blocking[:3])
    findings = (*blocking, *advisories)
    if view.desired.paused:
        message = f"paused: {message}"
    return PlannedStatus(
        state=state,
        message=message,
        shards=view.desired.shards,
        ready_shards=ready_shards,
        ready_nodes=sum(1 for node in view.members.values() if _node_ready(view, node)),
        desired_nodes=view.desired.shards * view.desired.pods_per_shard,
        # An ended pod is kept as evidence of how it ended, but runs no node: not listed as one.
        nodes=tuple(
            _node_status(view, pod, pod.shard) for pod in view.pods if pod.shard is not None and not pod.ended
        ),
        conditions=conditions(
            state, message, findings, impact, rejected=bool(view.rejected), paused=view.desired.paused
        ),
        uncovered=uncovered,
        findings=findings,
        config_hash=view.desired.config_hash
        if _runs_current_settings(view)
        else view.context.recorded_config_hash,
        current_image=view.desired.image if _runs_current_template(view) else view.context.recorded_image,
        rollout=_rollout(view, actions, rolling),
        tls=_tls(view),
        max_primaries_per_node=facts.worst if (facts := spread.spread(view)) is not None else None,
        external_endpoints=external.endpoints(view),
    )


def _runs_current_template(view: View) -> bool:
    return all(pod.template_hash == view.desired.template_hash for pod in view.pods if not pod.ended)


def _runs_current_settings(view: View) -> bool:
    """Every pod runs the current template, and every server that should answer did, with the
    desired runtime settings."""
    if view.unreachable or not _runs_current_template(view):
        return False
    return not any(
        upkeep.config_changes(view, node) != {} for node in view.nodes.values() if not node.pod.deleting
    )


def _settings_findings(view: View) -> Iterable[Finding]:
    pending: dict[str, list[str]] = {}
    for node in view.nodes.values():
        if node.pod.deleting or not meets_floor(node.obs.version):
            continue
        changes = upkeep.config_changes(view, node)
        if changes is None:
            pending.setdefault("(not read)", []).append(node.pod.name)
        for name in changes or {}:
            pending.setdefault(name, []).append(node.pod.name)
    if pending:
        parts = ", ".join(f"{name} on {len(pods)} node(s)" for name, pods in sorted(pending.items()))
        yield Finding(Reason.APPLYING_SETTINGS, f"runtime settings to apply: {parts}")
    acl = view.acl
    for unknown in acl.unknown:
        yield Finding(
            Reason.UNKNOWN_COMMAND,
            f"ValkeyRole {unknown.role}: Valkey does not know command {unknown.command}; "
            f"user(s) {', '.join(unknown.users)} keep their previous rules",
            problem=True,
        )
    drifted = [
        owned.key
        for owned in upkeep.desired_objects(view)
        if upkeep.drifted(view.objects.get(owned.key), owned.body)
    ]
    if drifted:
        yield Finding(Reason.APPLYING_OBJECTS, f"owned objects to apply: {', '.join(drifted)}")
    unpatched = [
        pod.name
        for pod in view.pods
        if pod.live and upkeep.annotation_changes(view.desired.pod_annotations, pod.annotations)
    ]
    if unpatched:
        yield Finding(Reason.PATCHING_PODS, f"podAnnotations to patch onto {len(unpatched)} pod(s)")
    stale = sorted(
        node.pod.name
        for node in view.nodes.values()
        if not node.pod.deleting and upkeep.acl_changes(view, node) is not None
    )
    if stale:
        yield Finding(Reason.APPLYING_ACL, f"ACL users to update on {len(stale)} node(s)")


def _tls_findings(view: View) -> Iterable[Finding]:
    facts = certificates.tls_view(view)
    if facts is None or not facts.stale:
        return
    settled = view.now >= facts.settles_at
    when = "now" if settled else f"at {rfc3339(facts.settles_at)} (secretSyncSeconds after the change)"
    yield Finding(
        Reason.RELOADING_TLS,
        f"{len(facts.stale)} node(s) to load Secret {facts.tls.material.secret}'s certificate; "
        f"reloaded {when}",
    )


def _advisories(view: View) -> Iterable[Finding]:
    """Problems that do not keep the cluster from Active: they only raise Degraded and an Event."""
    yield from _claim_findings(view)
    tls = view.desired.tls
    earliest = certificates.earliest_expiry(view)
    if tls is None or earliest is None:
        return
    node, not_after = earliest
    if not_after - view.now < tls.expiry_warning:
        yield Finding(
            Reason.CERTIFICATE_EXPIRING,
            f"the certificate {node.pod.name} presents expires at {rfc3339(not_after)}: "
            f"renew Secret {tls.material.secret}",
            problem=True,
        )


def _claim_findings(view: View) -> Iterable[Finding]:
    """A size that would shrink the claims; servers that came back on a claim without its data."""
    smaller = data_claims.shrinking(view)
    if smaller:
        yield Finding(
            Reason.CLAIM_SHRINK_REFUSED,
            f"persistence.size {view.desired.claim_size} is smaller than {len(smaller)} claim(s) "
            f"({', '.join(smaller[:3])}): a claim never shrinks, the size is not applied",
            problem=True,
        )
    for storage_class, claims in sorted(data_claims.fixed_size(view).items()):
        yield Finding(
            Reason.CLAIM_GROWTH_REFUSED,
            f"persistence.size {view.desired.claim_size}: StorageClass {storage_class} does not allow "
            f"volume expansion, {len(claims)} claim(s) keep their size ({', '.join(sorted(claims)[:3])})",
            problem=True,
        )
    for failing in data_claims.replaceable(view):
        yield Finding(
            Reason.VOLUME_LOST,
            f"no server starts on claim {failing.name} (its pods keep failing) and its data is served "
            f"elsewhere: it is replaced by a new claim, and the node rejoins as a new replica",
            problem=True,
        )
    for claim, recorded, reported in data_claims.identity_lost(view):
        yield Finding(
            Reason.VOLUME_LOST,
            f"claim {claim} came back without its data (node {recorded[:8]} is now {reported[:8]}): "
            f"it rejoins as a new replica",
            problem=True,
        )


def _tls(view: View) -> TlsProgress | None:
    facts = certificates.tls_view(view)
    if facts is None:
        return None
    earliest = certificates.earliest_expiry(view)
    return TlsProgress(
        secret_hash=facts.tls.material.content_hash,
        changed_at=rfc3339(facts.changed_at),
        not_after=rfc3339(earliest[1]) if earliest is not None else None,
        client_certificates=_may_require_certificates(view),
    )


def _may_require_certificates(view: View) -> bool:
    """The spec requires client certificates, or some node may still: it runs tls-auth-clients yes,
    or it did not answer while the recorded status said one might."""
    tls = view.desired.tls
    if tls is not None and tls.client_certificates:
        return True
    if any(
        node.obs.config is not None and node.obs.config.get(TLS_AUTH_CLIENTS) == "yes"
        for node in view.nodes.values()
    ):
        return True
    recorded = view.context.recorded_tls
    silent = (
        view.unreachable or view.unidentified or any(node.obs.config is None for node in view.nodes.values())
    )
    return bool(silent) and recorded is not None and recorded.client_certificates


def _failure_findings(view: View, failures: Sequence[Failure]) -> Iterable[Finding]:
    """Actions that failed this pass: refusals name what was refused and Valkey's words."""
    refused: dict[tuple[Reason, str, str], list[str]] = {}
    others = []
    forbidden = []
    for failure in failures:
        action = failure.action
        if failure.forbidden:
            forbidden.append(failure.message)
        elif failure.refused == "" and isinstance(action, SetConfig):  # Valkey named no directive
            key = (
                Reason.CONFIG_REJECTED,
                f"CONFIG SET of {', '.join(dict(action.settings))}",
                failure.message,
            )
            refused.setdefault(key, []).append(action.node)
        elif failure.refused is not None and isinstance(action, SetConfig):
            value = dict(action.settings).get(failure.refused, "")
            key = (Reason.CONFIG_REJECTED, f"{failure.refused} {value!r}", failure.message)
            refused.setdefault(key, []).append(action.node)
        elif failure.refused is not None and isinstance(action, SyncAcl):
            key = (Reason.ACL_REJECTED, f"user {failure.refused}", failure.message)
            refused.setdefault(key, []).append(action.node)
        elif isinstance(action, ReloadTls):
            if failure.refused is None:
                continue  # an early reload: the kubelet may not have written the new files yet
            tls = view.desired.tls
            secret = tls.material.secret if tls is not None else "?"
            key = (Reason.TLS_REJECTED, f"the certificate files of Secret {secret}", failure.message)
            refused.setdefault(key, []).append(action.node)
        else:
            others.append(failure.message)
    if forbidden:
        yield Finding(
            Reason.FORBIDDEN,
            f"the API server refused for RBAC: {'; '.join(dict.fromkeys(forbidden))}"[:1000],
            problem=True,
        )
    for (reason, what, message), pods in sorted(refused.items()):
        count = len(set(pods))  # refused this pass and before: one node
        yield Finding(reason, f"{what} refused by {count} node(s): {message}", problem=True)
    if others:
        yield Finding(Reason.ACTION_FAILED, "; ".join(others)[:1000], problem=True)


def _unsettled_state(view: View) -> ClusterState:
    """Creating until the cluster was first Active (the recorded status says so), Updating after.

    A Failed cluster whose slots were all assigned had been formed before, so it updates.
    """
    recorded = view.context.recorded_state
    if recorded in {ClusterState.ACTIVE, ClusterState.UPDATING}:
        return ClusterState.UPDATING
    if recorded is ClusterState.FAILED and not subtract(ALL_SLOTS, view.claimed):
        return ClusterState.UPDATING
    return ClusterState.CREATING


def _findings(
    view: View, actions: Sequence[Planned], rolling: Rollout, uncovered: SlotRanges
) -> Iterable[Finding]:
    """What keeps the cluster from Active, in bootstrap order; problems are marked."""
    restore = view.restore_progress
    if restore is not None:
        mismatches = restore.mismatches()
        if mismatches:
            yield Finding(Reason.RESTORE_INCOMPLETE, "; ".join(mismatches), problem=True)
        yield Finding(Reason.RESTORING, restore.message())
    yield from _pod_findings(view, actions, rolling)
    joining_clients = [action.pod for action in actions if isinstance(action, MarkMember) and action.member]
    if joining_clients:
        # Active means the client Service hands out every serving node (membership.py).
        yield Finding(Reason.PATCHING_PODS, f"{len(joining_clients)} pod(s) to add to the client Service")
    if view.unreachable:
        names = ", ".join(pod.name for pod in view.unreachable)
        yield Finding(
            Reason.NODES_UNREACHABLE, f"unreachable: {names}{_certificate_refused(view)}", problem=True
        )
    joining = [node for node in view.nodes.values() if node.pod.name not in view.members]
    if joining and not view.rejected:
        yield Finding(Reason.JOINING_NODES, f"{len(joining)} node(s) joining the cluster")
    yield from _slot_findings(view, uncovered)
    yield from _shard_findings(view)
    failing = [node.pod.name for node in view.members.values() if node.obs.cluster_ok is not True]
    if failing:
        yield Finding(Reason.WAITING_FOR_CLUSTER_STATE, f"cluster_state not ok on {len(failing)} node(s)")
    member_ids = {node.node_id for node in view.members.values()}
    unaware = [
        node.pod.name
        for node in view.members.values()
        if any(
            (known := node.obs.knows(other)) is None or known.failed for other in member_ids - {node.node_id}
        )
    ]
    if unaware:
        yield Finding(Reason.WAITING_FOR_GOSSIP, f"{len(unaware)} node(s) do not know every member yet")
    ghosts = view.ghosts()
    if ghosts:
        yield Finding(Reason.FORGETTING_NODES, f"{len(ghosts)} departed node id(s) to forget")
    yield from _repair_findings(view, actions, uncovered)
    yield from _migration_findings(view)
    yield from _settings_findings(view)
    yield from _tls_findings(view)
    balancing = spread.describe(view)
    if balancing is not None:
        yield Finding(Reason.BALANCING_PRIMARIES, balancing)


def _repair_findings(view: View, actions: Sequence[Planned], uncovered: SlotRanges) -> Iterable[Finding]:
    for action in actions:
        if isinstance(action, Promote):
            yield Finding(
                Reason.PROMOTING_REPLICA,
                f"promoting {action.node}: its primary {action.departed[:8]} is "
                + (
                    "unreachable and too few primaries answer for Valkey to elect"
                    if action.unreachable
                    else "gone"
                ),
                problem=True,
            )
    stranded = view.stranded
    lost = [slots for ghost, slots in stranded.items() if not any(view.ghost_followers(ghost))]
    if lost:
        yield Finding(
            Reason.DATA_LOST,
            f"slots {_ranges_text(union(*lost))} lost their only copy (no replica): "
            f"they are served again empty and the data in them is lost",
            problem=True,
        )
    elif (
        view.formed_before() and subtract(uncovered, view.claimed) and not (view.dormant or view.unidentified)
    ):
        # Only once every pod that may run a server answered, as _assign_slots: a node that did
        # not answer (say, refusing the operator's certificate) may own them.
        rebuilt = subtract(uncovered, view.claimed)
        yield Finding(
            Reason.DATA_LOST,
            f"slots {_ranges_text(rebuilt)} had no copy left: they are rebuilt empty (data lost)",
            problem=True,
        )


def _migration_findings(view: View) -> Iterable[Finding]:
    if view.migrations_active():
        yield Finding(Reason.MIGRATING_SLOTS, "slot migrations in progress")
    moves = view.transfers() if view.settled else ()
    sources = {move.source for move in moves}
    for node in sorted(view.members.values(), key=lambda node: node.pod.order):
        stuck = trouble(node.obs.jobs) if node.pod.shard in sources else None
        if stuck is not None and node.is_primary and node.obs.slots:
            last = stuck.last
            retry = datetime.datetime.fromtimestamp(stuck.retry_at, datetime.UTC).strftime("%H:%M:%SZ")
            yield Finding(
                Reason.MIGRATION_FAILED,
                f"slot migration {format_slot_ranges(last.slots)} from {node.pod.name} "
                f"{last.state} ({last.message or 'no message'}); {stuck.failures} failure(s) in a row, "
                f"retried with backoff from {retry}",
                problem=True,
            )
    if moves:
        total = sum(move.count for move in moves)
        pairs = ", ".join(f"{move.source}->{move.target} ({move.count})" for move in moves[:4])
        yield Finding(Reason.REBALANCING_SLOTS, f"{total} slot(s) to move between shards: {pairs}")


def _pod_findings(view: View, actions: Sequence[Planned], rolling: Rollout) -> Iterable[Finding]:
    expected = view.desired.shards * view.desired.pods_per_shard
    counts = [len(view.shard_pods(shard)) for shard in range(view.desired.shards)]
    missing = sum(max(view.desired.pods_per_shard - count, 0) for count in counts)
    surplus = sum(max(count - view.desired.pods_per_shard, 0) for count in counts)
    ready = sum(1 for pod in view.pods if pod.live and pod.ready and view.in_spec(pod))
    if missing or ready < expected:
        yield Finding(Reason.WAITING_FOR_PODS, f"{min(ready, expected)} of {expected} pods Ready")
    going = sum(1 for pod in view.pods if pod.deleting)
    if surplus or going or any(isinstance(action, DeletePod) for action in actions):
        yield Finding(Reason.REMOVING_PODS, f"{surplus} surplus pod(s), {going} pod(s) going away")
    beyond = sorted({pod.shard for pod in view.pods if pod.shard is not None and not view.in_spec(pod)})
    if beyond:
        yield Finding(Reason.SCALE_DOWN_PENDING, f"pods of shards beyond spec.shards: {beyond}")
    stuck = [
        pod
        for pod in view.pods
        if pod.live
        and pod.template_hash == view.desired.template_hash
        and pod.image_wait is not None
        and stalled.pull_stuck(pod.image_wait, pod.created_at, view.now)
    ]
    if stuck:
        parts = "; ".join(f"{pod.name}: {pod.image_wait_message}" for pod in stuck[:3])
        yield Finding(
            Reason.IMAGE_PULL_FAILED,
            f"{len(stuck)} pod(s) cannot get their image (pulls failing for "
            f"{stalled.IMAGE_PULL_BOUND:.0f}s or more, or a reference that never pulls): {parts}",
            problem=True,
        )
    for pod in view.pods:
        if pod.live and pod.unschedulable:
            yield Finding(
                Reason.PODS_UNSCHEDULABLE, f"pod {pod.name} cannot be scheduled: {pod.unschedulable}", True
            )
    unlabelled = [pod.name for pod in view.pods if pod.shard is None]
    if unlabelled:
        yield Finding(Reason.UNLABELLED_PODS, f"pods without a shard label: {', '.join(unlabelled)}", True)
    # Live pods only, as the rollout counts them: a Failed pod kept as evidence is never replaced.
    outdated = [pod.name for pod in view.pods if pod.live and pod.template_hash != view.desired.template_hash]
    if outdated:
        yield Finding(Reason.UPDATE_PENDING, _rollout_progress(view, actions, rolling, len(outdated)))
    request = rolling.failover
    if rolling.failover_failed and request is not None:
        retry = datetime.datetime.fromtimestamp(request.retry_at(), datetime.UTC).strftime("%H:%M:%SZ")
        yield Finding(
            Reason.FAILOVER_FAILED,
            f"coordinated failover to {request.pod} (attempt {request.attempt}) did not complete within "
            f"{FAILOVER_TIMEOUT_S:.0f}s; retried from {retry}",
            problem=True,
        )


def _rollout(view: View, actions: Sequence[Planned], rolling: Rollout) -> RolloutProgress | None:
    if rolling.shard is None:
        return None
    step = ""
    for action in actions:
        if isinstance(action, Failover):
            step = f"failing over to {action.node}"
        elif isinstance(action, DeletePod) and view.desired.template_hash != _template_of(view, action.pod):
            step = f"replacing {action.pod}"
        elif isinstance(action, NewPod | CreatePod) and action.shard == rolling.shard and rolling.surge:
            step = "creating a surge pod"
    return RolloutProgress(
        shards_updated=rolling.shards_current,
        shards=view.desired.shards,
        shard=rolling.shard,
        step=step or "waiting for its new pods to sync",
    )


def _rollout_progress(view: View, actions: Sequence[Planned], rolling: Rollout, outdated: int) -> str:
    """'rolling update: 1 of 3 shards current; shard 1: replacing replica X' (the step this pass)."""
    text = f"{outdated} pod(s) run an outdated template"
    if rolling.queued:
        return f"{text}; waiting for a rollout slot (maxConcurrentRollouts clusters are rolling)"
    progress = _rollout(view, actions, rolling)
    resizing = rolling.resize
    if progress is None and resizing.pods:
        step = resizing.step
        sent = step is not None and step in actions
        doing = f"resizing {step.pod}" if sent and step is not None else f"waiting for {resizing.waiting}"
        return f"{text}; {len(resizing.pods)} resized in place, one at a time: {doing}"
    if progress is None:
        return text
    return (
        f"rolling update: {progress.shards_updated} of {progress.shards} shard(s) current; {text}; "
        f"shard {progress.shard}: {progress.step}"
    )


def _template_of(view: View, pod: str) -> str | None:
    return next((found.template_hash for found in view.pods if found.name == pod), None)


CERTIFICATE_ALERTS = ("ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_")
"""TLS alerts a server sends about the client's certificate (OpenSSL's names, in the error text)."""


def _certificate_refused(view: View) -> str:
    """Why nodes refuse the operator, when it is its client certificate (clientAuth Required): the
    Secret's leaf comes from a CA they have not loaded, which they never will while they refuse the
    connection that would tell them to (docs/tls.md)."""
    refused = [
        name
        for name, error in view.unreachable_errors.items()
        if any(alert in error for alert in CERTIFICATE_ALERTS)
    ]
    if not refused or view.desired.tls is None:
        return ""
    secret = view.desired.tls.material.secret
    return (
        f"; {', '.join(refused)} refuse the operator's client certificate (tls.crt of Secret {secret}, "
        "from a CA they have not loaded): put the previous tls.crt and tls.key back beside the new "
        "ca.crt until Active, then the new leaf"
    )


def _slot_findings(view: View, uncovered: SlotRanges) -> Iterable[Finding]:
    if uncovered:
        unassigned = subtract(uncovered, view.claimed)
        stranded = intersect(uncovered, view.claimed)
        if unassigned and view.formed_before() and view.unidentified:  # their owners may not answer
            yield Finding(
                Reason.SLOTS_UNCOVERED,
                f"slots {_ranges_text(unassigned)} are served by no node that answered "
                f"({len(view.unidentified)} node(s) did not answer)",
                problem=True,
            )
        elif unassigned:
            yield Finding(
                Reason.ASSIGNING_SLOTS,
                f"{slot_count(unassigned)} slot(s) not assigned yet ({_ranges_text(unassigned)})",
            )
        if stranded:
            owners = sorted(
                node_id[:8] for node_id, slots in view.claims.items() if intersect(slots, stranded)
            )
            yield Finding(
                Reason.SLOTS_UNCOVERED,
                f"slots {_ranges_text(stranded)} are owned by nodes that do not serve them "
                f"(departed, failed or unreachable): {', '.join(owners)}",
                problem=True,
            )
    contested = coverage(node.obs.slots for node in view.members.values() if node.is_primary).contested
    handing_over = intersect(contested, view.recently_migrated())
    if handing_over:
        yield Finding(Reason.MIGRATING_SLOTS, f"slots {_ranges_text(handing_over)} changing owner")
    contested = subtract(contested, handing_over)
    if contested:
        yield Finding(
            Reason.SLOTS_CONTESTED, f"slots {_ranges_text(contested)} claimed by several primaries", True
        )


def _shard_findings(view: View) -> Iterable[Finding]:
    attaching = syncing = 0
    for shard in range(view.desired.shards):
        primaries = view.primaries(shard)
        if len(primaries) > 1:
            names = ", ".join(node.pod.name for node in primaries)
            yield Finding(Reason.SHARD_CONFLICT, f"shard {shard} has several primaries: {names}", True)
            continue
        if not primaries:
            if not subtract(ALL_SLOTS, view.claimed):  # else the unassigned slots say it already
                yield Finding(Reason.REBALANCING_SLOTS, f"shard {shard} serves no slots yet")
            continue
        primary = primaries[0]
        followers = view.followers(primary)
        placed = [node for node in followers if node.pod.shard == shard]
        attaching += max(view.desired.replicas_per_shard - len(placed), 0) + len(followers) - len(placed)
        syncing += sum(1 for node in placed if not view.in_sync(node, primary))
    if attaching:
        yield Finding(Reason.ATTACHING_REPLICAS, f"{attaching} replica(s) to attach")
    if syncing:
        yield Finding(Reason.SYNCING_REPLICAS, f"{syncing} replica(s) syncing")


def _shard_ready(view: View, shard: int) -> bool:
    primary = view.primary(shard)
    if primary is None or primary.obs.cluster_ok is not True:
        return False
    in_sync = [node for node in view.followers(primary) if view.in_sync(node, primary)]
    return len(in_sync) >= view.desired.replicas_per_shard


def _node_ready(view: View, node: Node) -> bool:
    """Kubernetes and Valkey agree: the pod is Ready (a starting pod may already serve: it joins
    before its readiness probe passes, plan.py) and the node serves."""
    if not node.pod.ready or node.obs.cluster_ok is not True:
        return False
    if node.is_primary:
        return bool(node.obs.slots)
    primary = view.by_id.get(node.obs.primary_id or "")
    return primary is not None and view.in_sync(node, primary)


def _node_status(view: View, pod: PodObservation, shard: int) -> NodeStatus:
    node = view.nodes.get(pod.name)
    if node is None:
        return NodeStatus(pod=pod.name, shard=shard, ip=pod.ip)
    obs = node.obs
    return NodeStatus(
        pod=pod.name,
        shard=shard,
        role=obs.role,
        node_id=node.node_id,
        ip=pod.ip,
        version=format_version(obs.version) or obs.version_text,
        slots=format_slot_ranges(obs.slots) or None,
        in_sync=_in_sync(view, node) if obs.role is NodeRole.REPLICA else None,
    )


def _in_sync(view: View, replica: Node) -> bool:
    """The rule a roll and a switchover hand a primary over by (View.in_sync). A replica's readiness
    (readyNodes) reads the same rule, so this changes the status only when that line is crossed."""
    primary = view.by_id.get(replica.obs.primary_id or "")
    return primary is not None and view.in_sync(replica, primary)


def _version_message(view: View) -> str:
    """Names the image, what each rejected node runs, and the floor (SPEC 1.1, seed page)."""
    found: dict[str, list[str]] = {}
    for node in view.rejected:
        text = format_version(node.obs.version)
        label = f"Valkey {text}" if text else f"no valkey_version ({node.obs.version_text or 'not Valkey'})"
        found.setdefault(label, []).append(node.pod.name)
    parts = [f"{label} on {', '.join(sorted(pods))}" for label, pods in sorted(found.items())]
    return (
        f"image {view.desired.image} runs {'; '.join(parts)}, below the supported version floor "
        f"{VERSION_FLOOR_TEXT}; those nodes are kept out of the cluster"
    )


def _client_impact(view: View, uncovered: SlotRanges) -> Finding | None:
    """What keeps clients from reading and writing every slot (SPEC 1.8: only this makes Ready
    False once the cluster has served): slots no reachable primary serves, or a primary serving
    slots whose cluster_state is fail (it answers CLUSTERDOWN)."""
    if uncovered:
        return Finding(
            Reason.SLOTS_UNCOVERED, f"slots {_ranges_text(uncovered)} are not served by any primary", True
        )
    down = sorted(
        node.pod.name
        for node in view.members.values()
        if node.is_primary and node.obs.slots and node.obs.cluster_ok is False
    )
    if down:
        return Finding(
            Reason.CLUSTER_STATE_FAIL, f"cluster_state is fail on primaries {', '.join(down)}", True
        )
    return None


def conditions(
    state: ClusterState,
    message: str,
    findings: Sequence[Finding],
    impact: Finding | None,
    *,
    rejected: bool = False,
    paused: bool = False,
) -> tuple[PlannedCondition, ...]:
    """Ready says whether clients are served, Progressing whether the operator is changing something,
    Degraded whether something needs attention, Stalled (kstatus: Failed) whether the operator
    cannot go on by itself: a new cluster that cannot serve (state Failed), or a finding only a
    human can clear (stalled.py), serving or not (SPEC 1.8). rejected: nodes below the version
    floor were seen; paused: the cluster is paused."""
    problems = [finding for finding in findings if finding.problem]
    if state is ClusterState.FAILED:
        reason = Reason.VERSION_BELOW_FLOOR if rejected else Reason.PODS_FAILING
        ready = PlannedCondition(READY, False, reason, message)
        progressing = PlannedCondition(PROGRESSING, False, reason, message)
        degraded = PlannedCondition(DEGRADED, True, reason, message)
        return (ready, progressing, degraded, PlannedCondition(STALLED, True, reason, message))
    if state is ClusterState.ACTIVE:
        ready = PlannedCondition(READY, True, Reason.READY, message)
        progressing = PlannedCondition(PROGRESSING, False, Reason.RECONCILED, message)
    else:
        first = findings[0]
        if state is ClusterState.CREATING:
            ready = PlannedCondition(READY, False, first.reason, message)
        elif impact is not None:
            ready = PlannedCondition(READY, False, impact.reason, impact.message)
        else:
            # Updating while every slot is served: scaling, rolling, settings, ACLs, spread moves.
            ready = PlannedCondition(READY, True, Reason.READY, f"every slot is served; updating: {message}")
        # A roll that cannot go on stops progressing (the Deployment convention), old pods serving.
        stuck = first.reason in {Reason.VERSION_BELOW_FLOOR, Reason.PODS_FAILING}
        progressing = PlannedCondition(PROGRESSING, not stuck, first.reason, message)
    if paused:
        progressing = PlannedCondition(PROGRESSING, False, Reason.PAUSED, message)
    if problems:
        degraded_message = "; ".join(problem.message for problem in problems)
        degraded = PlannedCondition(DEGRADED, True, problems[0].reason, degraded_message)
    else:
        degraded = PlannedCondition(DEGRADED, False, Reason.AS_EXPECTED, "")
    return (ready, progressing, degraded, _stalled(findings))


def _stalled(findings: Sequence[Finding]) -> PlannedCondition:
    """Stalled=True on the first finding only a human can clear, its message ending in what to do."""
    for finding in findings:
        advice = finding.advice
        if advice is not None:
            return PlannedCondition(STALLED, True, finding.reason, f"{finding.message}; {advice}")
    return PlannedCondition(STALLED, False, Reason.AS_EXPECTED, "")


def _ranges_text(ranges: SlotRanges, limit: int = 4) -> str:
    shown = format_slot_ranges(ranges[:limit])
    return shown + (f",... ({len(ranges) - limit} more ranges)" if len(ranges) > limit else "")
