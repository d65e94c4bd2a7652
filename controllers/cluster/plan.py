"""The cluster planner: (observation, desired) -> the next actions and the status they imply.

`plan` is a pure, deterministic function (SPEC 5). It keeps no memory between
passes: progress is read from the world (pods, slot ownership, replication
links), so an operator that restarts after any step re-derives the same next
step from what the cluster really is. Waiting is a requeue hint, never a sleep.

Bootstrap (SPEC 1.4 "Creating"), each step only for nodes observed this pass:
1. create the missing pods (one per shard per replica slot);
2. check each Ready node's binary version; a node below the floor (or with
   none) never joins, the cluster is Failed and no topology step is planned;
3. one seed node MEETs every other eligible node;
4. each shard's first primary gets the shard's share of the 16384 slots;
5. the shard's other nodes replicate that primary (CLUSTER REPLICATE);
6. node ids whose pods are gone are forgotten on every node that knows them;
7. at most one pod is removed (surplus, or a rejected pod of an old template),
   and only one that holds no slots and is not the last copy of its shard.
Active once every slot is served by exactly one reachable primary, every shard
has its replicas in sync and every node reports cluster_state ok.

Shard membership is Valkey's (replica-of and shard id); pod labels only say
which shard a pod was created for and so where its node should end up.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Sequence
from typing import ClassVar

import attrs

from controllers.cluster.observe import (
    ALL_SLOTS,
    Desired,
    MigrationOperation,
    NodeObservation,
    Observation,
    PodObservation,
    SlotRanges,
    coverage,
    even_split,
    format_slot_ranges,
    format_version,
    intersect,
    meets_floor,
    slot_count,
    subtract,
    union,
)
from controllers.cluster.rebalance import (
    MAX_BATCH_SLOTS,
    Transfer,
    highest_slots,
    timestamp_seconds,
    transfers,
    trouble,
)
from valkey_operator.api.cluster import DEGRADED, PROGRESSING, READY, ClusterState, NodeRole, NodeStatus
from valkey_operator.api.resources import VERSION_FLOOR_TEXT

MAX_IN_SYNC_LAG_BYTES = 1 << 20
"""A replica whose link is up and whose offset trails its primary's by at most this is in sync."""

HANDOVER_S = 30.0
"""How long after a slot migration job two primaries claiming its slots is a handover, not a conflict."""
VOTE_GRACE_S = 60.0
"""How long after the last word from a departed primary Valkey's own election may take before the
operator promotes its replica anyway (Valkey elects within about two cluster-node-timeouts)."""

REQUEUE_ACTING = 1.0
"""Seconds until the next pass after acting: long enough for the effect to show, short enough to chain."""
REQUEUE_WAITING = 2.0
"""Waiting for the world (pods starting, gossip, replication) that no watch event announces."""
REQUEUE_STEADY = 30.0
"""Active or paused: still re-observe, since Valkey changes raise no Kubernetes events."""
REQUEUE_FAILED = 60.0
"""Failed waits for a spec change (which triggers a pass by itself); re-check now and then anyway."""


# --- actions -------------------------------------------------------------------------------------


@attrs.frozen
class CreatePod:
    """Create one pod for shard (the renderer names it uniquely)."""

    shard: int
    disruptive: ClassVar[bool] = False


@attrs.frozen
class DeletePod:
    """Delete a pod that holds no slots and is not the last copy of its shard."""

    pod: str
    reason: str
    disruptive: ClassVar[bool] = True


@attrs.frozen
class Meet:
    """CLUSTER MEET peer_ip, sent to the server in pod `node` (the seed) to introduce `peer`."""

    node: str
    peer: str
    peer_ip: str
    disruptive: ClassVar[bool] = False


@attrs.frozen
class AssignSlots:
    """CLUSTER ADDSLOTSRANGE on an empty primary: slots nobody owns yet."""

    node: str
    slots: SlotRanges
    disruptive: ClassVar[bool] = False


@attrs.frozen
class Replicate:
    """CLUSTER REPLICATE primary_id on the (empty, slotless) server in pod `node`."""

    node: str
    primary_id: str
    disruptive: ClassVar[bool] = False


@attrs.frozen
class Forget:
    """CLUSTER FORGET node_id on every listed pod's server, together, within the forget window.

    `lost` are slots the departed node still owned with no copy left anywhere
    (replicasPerShard 0): forgetting it lets them be served again, empty.
    """

    node_id: str
    on: tuple[str, ...]
    lost: SlotRanges = ()
    disruptive: ClassVar[bool] = False


@attrs.frozen
class MigrateSlots:
    """CLUSTER MIGRATESLOTS on the source primary in pod `node`: one atomic job moving slots to target_id."""

    node: str
    target_id: str
    slots: SlotRanges
    disruptive: ClassVar[bool] = False


@attrs.frozen
class Promote:
    """CLUSTER FAILOVER TAKEOVER on the replica in pod `node`: its primary `departed` is gone for good
    and too few primaries survive for Valkey's own vote to replace it."""

    node: str
    departed: str
    disruptive: ClassVar[bool] = False


Action = CreatePod | DeletePod | Meet | AssignSlots | Replicate | Forget | MigrateSlots | Promote
TopologyAction = Meet | AssignSlots | Replicate | Forget | MigrateSlots | Promote


# --- status --------------------------------------------------------------------------------------


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


@attrs.frozen
class Finding:
    """One thing standing between the cluster and Active: progress to wait for, or a problem."""

    reason: Reason
    message: str
    problem: bool = False


@attrs.frozen
class PlannedCondition:
    """A condition without lastTransitionTime: the status writer keeps or moves that."""

    type: str
    status: bool
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class PlannedStatus:
    state: ClusterState
    message: str
    shards: int
    ready_shards: int
    ready_nodes: int
    nodes: tuple[NodeStatus, ...]
    conditions: tuple[PlannedCondition, ...]
    uncovered: SlotRanges
    """Slots no reachable primary serves (all of them before bootstrap assigns any)."""
    findings: tuple[Finding, ...]

    def condition(self, type_: str) -> PlannedCondition:
        return next(condition for condition in self.conditions if condition.type == type_)


@attrs.frozen(kw_only=True)
class Plan:
    actions: tuple[Action, ...]
    status: PlannedStatus
    requeue_after: float | None

    @property
    def disruptive(self) -> tuple[Action, ...]:
        return tuple(action for action in self.actions if action.disruptive)


# --- the pass's derived picture ------------------------------------------------------------------


@attrs.frozen
class Node:
    """A pod whose server answered this pass with a node id."""

    pod: PodObservation
    obs: NodeObservation
    node_id: str

    @property
    def is_primary(self) -> bool:
        return self.obs.role is NodeRole.PRIMARY

    @property
    def active(self) -> bool:
        """May take part in new topology steps: Ready, staying, and created for a shard."""
        return self.pod.ready and not self.pod.deleting and self.pod.shard is not None


class View:
    """Facts derived once per pass from the observation; every step and the status read these."""

    def __init__(self, observation: Observation, desired: Desired) -> None:
        self.desired = desired
        self.pods = tuple(sorted(observation.pods, key=lambda pod: (pod.shard is None, pod.shard, pod.order)))
        self.nodes: dict[str, Node] = {}
        self.unidentified: list[PodObservation] = []
        """Pods that may run a server the operator could not identify this pass (blocks FORGET)."""
        self.unreachable: list[PodObservation] = []
        """Pods whose server should have answered (probed, or Ready) but did not answer in full."""
        self.rejected: list[Node] = []
        """Servers below the version floor (or reporting none): they never join."""
        for pod in self.pods:
            obs = observation.node(pod.name)
            answered = obs is not None and obs.reachable
            if obs is not None and answered and obs.node_id is not None:
                self.nodes[pod.name] = Node(pod, obs, obs.node_id)
                continue
            if not pod.never_started and not pod.ended:
                self.unidentified.append(pod)
            if obs is not None and answered and not meets_floor(obs.version):
                self.rejected.append(Node(pod, obs, ""))
            elif obs is not None or pod.ready:
                self.unreachable.append(pod)
        self.by_id = {node.node_id: node for node in self.nodes.values()}
        self.rejected += [node for node in self.nodes.values() if not meets_floor(node.obs.version)]
        self.rejected.sort(key=lambda node: node.pod.order)
        eligible = [node for node in self.nodes.values() if meets_floor(node.obs.version)]
        self.seed = self._seed(eligible)
        self.members = {node.pod.name: node for node in eligible if self._joined(node)}
        self.claims = self._claims()
        self.claimed = union(*self.claims.values())
        self.layout = even_split(desired.shards)
        self.recorded_state = observation.recorded_state
        self.now = observation.now
        self.served = union(*(node.obs.slots for node in self.members.values() if node.is_primary))

    def _seed(self, eligible: Sequence[Node]) -> Node | None:
        """The node that knows most of the others (a formed cluster's member), else the oldest pod."""
        ids = {node.node_id for node in eligible}

        def rank(node: Node) -> tuple[bool, int, bool, tuple[str, str]]:
            known = sum(1 for peer in node.obs.peers if peer.node_id in ids)
            return (node.pod.deleting, -known, not node.obs.slots, node.pod.order)

        return min(eligible, key=rank, default=None)

    def _joined(self, node: Node) -> bool:
        seed = self.seed
        if seed is None:
            return False
        return node is seed or bool(seed.obs.knows(node.node_id)) or bool(node.obs.knows(seed.node_id))

    def _claims(self) -> dict[str, SlotRanges]:
        """Slot ownership as any reachable server reports it, per node id (union of views: conservative)."""
        claims: dict[str, list[SlotRanges]] = {}
        for node in self.nodes.values():
            claims.setdefault(node.node_id, []).append(node.obs.slots)
            for known in node.obs.known_nodes:
                if not known.in_handshake and known.slots:
                    claims.setdefault(known.node_id, []).append(known.slots)
        return {node_id: union(*groups) for node_id, groups in claims.items()}

    # --- shards (Valkey's membership, mapped to shard indexes by the primary's pod label) ---

    def shard_pods(self, shard: int) -> list[PodObservation]:
        """The pods that count toward shard's desired number: labelled for it and staying."""
        return [pod for pod in self.pods if pod.shard == shard and pod.live]

    def primaries(self, shard: int) -> list[Node]:
        """Members labelled for shard that serve slots: exactly one when the shard is sound."""
        return [
            node
            for node in self.members.values()
            if node.pod.shard == shard and node.is_primary and node.obs.slots
        ]

    def primary(self, shard: int) -> Node | None:
        primaries = self.primaries(shard)
        return primaries[0] if len(primaries) == 1 else None

    def followers(self, primary: Node) -> list[Node]:
        """Members replicating primary, whatever their labels say."""
        return [
            node
            for node in self.members.values()
            if node.obs.role is NodeRole.REPLICA and node.obs.primary_id == primary.node_id
        ]

    def valkey_shard(self, node: Node) -> int | None:
        """The shard Valkey puts node in: its primary's (replica-of, else shard id), by that primary's pod.

        None for an empty primary (in no shard yet) or when the primary is not observed this pass.
        """
        if node.is_primary:
            return node.pod.shard if node.obs.slots else None
        primary = self.by_id.get(node.obs.primary_id or "")
        if primary is None and node.obs.shard_id is not None:
            primary = next(
                (
                    other
                    for other in self.members.values()
                    if other.is_primary and other.obs.slots and other.obs.shard_id == node.obs.shard_id
                ),
                None,
            )
        if primary is None or not primary.is_primary or not primary.obs.slots:
            return None
        return primary.pod.shard

    def in_sync(self, replica: Node, primary: Node) -> bool:
        return (
            replica.obs.primary_id == primary.node_id
            and replica.obs.link_up is True
            and primary.obs.repl_offset - replica.obs.repl_offset <= MAX_IN_SYNC_LAG_BYTES
        )

    def shard_identified(self, shard: int) -> bool:
        """Every pod of shard that may run a server answered: nothing it could hold is invisible."""
        return not any(pod.shard == shard for pod in self.unidentified)

    def ghosts(self) -> list[str]:
        """Node ids the members know that no existing pod's server claims as its own (sorted)."""
        known = {peer.node_id for node in self.members.values() for peer in node.obs.peers}
        return sorted(known - self.by_id.keys())

    def migrations_active(self) -> bool:
        return any(migration.active for node in self.nodes.values() for migration in node.obs.migrations)

    def migrating(self, node: Node) -> bool:
        """The node takes part in a slot migration job under way (as source or target)."""
        return any(migration.active for migration in node.obs.migrations)

    def exporting(self, node: Node) -> bool:
        """A migration job under way with node as its source (one batch per source at a time)."""
        return any(
            migration.active and migration.operation is MigrationOperation.EXPORT
            for migration in node.obs.migrations
        )

    def recently_migrated(self) -> SlotRanges:
        """Slots of jobs under way or finished in the last HANDOVER_S: while gossip spreads the new
        owner's epoch, source and target may both still claim them for a moment."""
        return union(
            *(
                job.slots
                for node in self.nodes.values()
                for job in node.obs.migrations
                if job.active or self.now - timestamp_seconds(job.last_update_time) < HANDOVER_S
            )
        )

    def ghost_followers(self, ghost: str) -> list[Node]:
        """Members still replicating a departed node id."""
        return [
            node
            for node in self.members.values()
            if node.obs.role is NodeRole.REPLICA and node.obs.primary_id == ghost
        ]

    def stranded(self) -> dict[str, SlotRanges]:
        """Departed node ids (no pod's server claims them) that still own slots; empty while some
        pod that may run a server did not answer, since it could be one of them."""
        if self.unidentified:
            return {}
        return {ghost: slots for ghost in self.ghosts() if (slots := self.claims.get(ghost, ()))}

    def last_heard(self, node_id: str) -> float:
        """Unix seconds of the latest PONG any member got from node_id (0 when none says)."""
        heard = [
            known.pong_received_ms for node in self.members.values() if (known := node.obs.knows(node_id))
        ]
        return max(heard, default=0) / 1000.0

    def formed_before(self) -> bool:
        """The recorded status says the cluster was formed once (so unowned slots mean lost data)."""
        return self.recorded_state in {ClusterState.ACTIVE, ClusterState.UPDATING}

    def shard_slots(self) -> dict[int, SlotRanges]:
        """Slots per shard index, from each shard's single serving primary (shards in conflict left out)."""
        shards = sorted({node.pod.shard for node in self.members.values() if node.pod.shard is not None})
        result: dict[int, SlotRanges] = {}
        for shard in shards:
            primary = self.primary(shard)
            if primary is not None:
                result[shard] = primary.obs.slots
        return result


# --- planning --------------------------------------------------------------------------------------


def plan(observation: Observation, desired: Desired) -> Plan:
    """The next actions toward desired, and the status the observation implies."""
    view = View(observation, desired)
    actions = () if desired.paused else _actions(view)
    status = _status(view, actions)
    return Plan(actions=actions, status=status, requeue_after=_requeue(view, status, actions))


def _actions(view: View) -> tuple[Action, ...]:
    removal = _removal(view)
    leaving = {removal.pod} if removal is not None else set()
    actions: list[Action] = list(_create_missing(view))
    if not view.rejected:
        actions += _meet(view, leaving)
        actions += _reintroduce(view, leaving)
        actions += _assign_slots(view, leaving)
        actions += _replicate(view, leaving)
        actions += _promote(view)
        actions += _forget(view)
        actions += _migrate(view, leaving)
    if removal is not None:
        actions.append(removal)
    return tuple(actions)


def _create_missing(view: View) -> Iterable[CreatePod]:
    for shard in range(view.desired.shards):
        missing = view.desired.pods_per_shard - len(view.shard_pods(shard))
        for _ in range(max(missing, 0)):
            yield CreatePod(shard)


def _meet(view: View, leaving: set[str]) -> Iterable[Meet]:
    """The seed introduces every eligible, Ready node it has not met (gossip tells the rest)."""
    seed = view.seed
    if seed is None or not seed.active:
        return
    for node in view.nodes.values():
        if (
            node.pod.name in view.members
            or node.pod.name in leaving
            or not node.active
            or not _in_spec(view, node.pod)
            or not meets_floor(node.obs.version)
            or node.pod.ip is None
            or seed.obs.handshaking_with(node.pod.ip)
        ):
            continue
        yield Meet(node=seed.pod.name, peer=node.pod.name, peer_ip=node.pod.ip)


def _reintroduce(view: View, leaving: set[str]) -> Iterable[Meet]:
    """A member the seed knows at another address (or that knows the seed at another) is met again
    at its pod's IP: after a node recovery or a restart of every pod, gossip alone cannot find it."""
    seed = view.seed
    if seed is None or not seed.active or seed.pod.ip is None:
        return
    for node in view.members.values():
        if node is seed or not node.active or node.pod.ip is None or node.pod.name in leaving:
            continue
        theirs = seed.obs.knows(node.node_id)
        ours = node.obs.knows(seed.node_id)
        moved = (theirs is not None and theirs.ip != node.pod.ip) or (
            ours is not None and ours.ip != seed.pod.ip
        )
        if moved and not seed.obs.handshaking_with(node.pod.ip):
            yield Meet(node=seed.pod.name, peer=node.pod.name, peer_ip=node.pod.ip)


def _assign_slots(view: View, leaving: set[str]) -> Iterable[AssignSlots]:
    """Unowned slots of each shard's share go to its primary, or to its oldest empty member primary."""
    for shard in range(view.desired.shards):
        unowned = subtract(view.layout[shard], view.claimed)
        if not unowned or not view.shard_identified(shard) or len(view.primaries(shard)) > 1:
            continue
        primary = view.primary(shard) or _first_empty_primary(view, shard, leaving)
        if primary is not None and primary.active and primary.pod.name not in leaving:
            yield AssignSlots(node=primary.pod.name, slots=unowned)


def _first_empty_primary(view: View, shard: int, leaving: set[str]) -> Node | None:
    candidates = [
        node
        for node in view.members.values()
        if node.pod.shard == shard
        and node.active
        and node.pod.name not in leaving
        and node.is_primary
        and not node.obs.slots
    ]
    # One that replicas already follow first (an emptied shard scaled back in): they need not move.
    return min(candidates, key=lambda node: (not view.followers(node), node.pod.order), default=None)


def _replicate(view: View, leaving: set[str]) -> Iterable[Replicate]:
    """Each shard's other members replicate its primary; a replica of another shard's primary moves.

    A shard added to a formed cluster gets its replicas before its first slots
    (its oldest empty primary stands as primary), so the data migrated in is
    copied from the start and writes to it can be acknowledged by a replica.
    """
    formed = not subtract(ALL_SLOTS, view.claimed)
    for shard in range(view.desired.shards):
        primary = view.primary(shard)
        if primary is None and formed and not view.primaries(shard) and view.shard_identified(shard):
            primary = _first_empty_primary(view, shard, leaving)
        if primary is None:
            continue
        for node in view.members.values():
            if node.pod.shard != shard or node is primary or not node.active or node.pod.name in leaving:
                continue
            if node.obs.knows(primary.node_id) is None:
                continue  # gossip has not told it about its primary yet
            if _belongs_elsewhere(view, node, shard, primary):
                yield Replicate(node=node.pod.name, primary_id=primary.node_id)


def _belongs_elsewhere(view: View, node: Node, shard: int, primary: Node) -> bool:
    """An empty primary nobody follows, a replica Valkey places in another shard, or a replica of
    an empty primary (or of a departed slotless node) while its shard's primary is another node."""
    if node.is_primary:
        return not node.obs.slots and not view.followers(node)
    if node.obs.primary_id == primary.node_id:
        return False
    followed = view.by_id.get(node.obs.primary_id or "")
    if not view.claims.get(node.obs.primary_id or ""):
        if followed is not None and followed.is_primary:
            return True  # it copies an empty primary: nothing to lose by moving
        if followed is None and not view.unidentified:
            return True  # it copies a departed node that served nothing
    return view.valkey_shard(node) not in {None, shard}


def _promote(view: View) -> Iterable[Promote]:
    """A departed primary's most up-to-date replica takes over when Valkey cannot elect one itself.

    Valkey's failover needs a majority of slot-owning primaries to agree the old
    one failed; with that majority alive it is left to Valkey (a voted failover
    never races another), unless nobody has heard from the old primary for
    VOTE_GRACE_S (its replica may be too stale for Valkey to elect it). Without
    that majority (one or two shards) there is no vote to wait for. Either way
    the departed node can never come back (its pod is gone or runs another
    identity), so TAKEOVER cannot race it.
    """
    stranded = view.stranded()
    if not stranded:
        return
    owners = [node_id for node_id, slots in view.claims.items() if slots]
    alive = sum(
        1 for node_id in owners if node_id in view.by_id and view.by_id[node_id].pod.name in view.members
    )
    for ghost in stranded:
        if alive * 2 > len(owners) and view.now - view.last_heard(ghost) < VOTE_GRACE_S:
            continue
        followers = [node for node in view.ghost_followers(ghost) if node.active]
        if followers:
            best = min(followers, key=lambda node: (-node.obs.repl_offset, node.pod.order))
            yield Promote(node=best.pod.name, departed=ghost)


def _forget(view: View) -> Iterable[Forget]:
    """Forget ids whose pods are gone, on every node knowing them at once (the 60 s forget window).

    Only when every pod that may run a server answered: a node that merely
    does not answer looks exactly like a dead one. A departed node that still
    owns slots is forgotten only when no replica follows it (Valkey or
    `_promote` fails over first): then no copy of those slots is left, and
    forgetting lets them be served again, empty (`Forget.lost`).
    """
    if view.unidentified:
        return
    stranded = view.stranded()
    for ghost in view.ghosts():
        if any(node.obs.primary_id == ghost for node in view.nodes.values()):
            continue  # a replica still follows it: it takes over first
        on = tuple(node.pod.name for node in view.members.values() if node.obs.knows(ghost) is not None)
        if on:
            yield Forget(node_id=ghost, on=on, lost=stranded.get(ghost, ()))


def _migrate(view: View, leaving: set[str]) -> Iterable[MigrateSlots]:
    """Move slots toward each shard's quota: at most one job per source, none while anything is unsettled.

    Only when every slot is served by exactly one reachable primary and no shard
    has two primaries; a source whose last jobs failed waits out its backoff.
    """
    if subtract(ALL_SLOTS, view.served) or view.stranded():
        return
    if coverage(node.obs.slots for node in view.members.values() if node.is_primary).contested:
        return
    shards = {node.pod.shard for node in view.members.values() if node.pod.shard is not None}
    if any(len(view.primaries(shard)) > 1 for shard in shards):
        return
    busy: set[str] = set()
    for move in _transfers(view):
        source = view.primary(move.source)
        target = view.primary(move.target) or _first_empty_primary(view, move.target, leaving)
        if source is None or target is None or not source.active or not target.active:
            continue
        if source.node_id in busy or view.exporting(source):
            continue
        seen_by_target = target.obs.knows(source.node_id)
        if source.obs.knows(target.node_id) is None or seen_by_target is None:
            continue
        stuck = trouble(source.obs.migrations)
        if stuck is not None and view.now < stuck.retry_at:
            continue
        slots = highest_slots(source.obs.slots, min(move.count, MAX_BATCH_SLOTS))
        if subtract(slots, seen_by_target.slots) or target.obs.cluster_ok is not True:
            continue  # a new node that has not learned who serves the slots yet refuses the job
        synced = [node for node in view.followers(target) if view.in_sync(node, target)]
        if len(synced) < view.desired.replicas_per_shard:
            continue  # a new shard takes data only once its replicas copy it
        busy.add(source.node_id)
        yield MigrateSlots(node=source.pod.name, target_id=target.node_id, slots=slots)


def _transfers(view: View) -> tuple[Transfer, ...]:
    counts = {shard: slot_count(slots) for shard, slots in view.shard_slots().items()}
    for shard in range(view.desired.shards):
        counts.setdefault(shard, 0)
    return transfers(counts, view.desired.shards)


def _removal(view: View) -> DeletePod | None:
    """At most one pod removal, and none while another pod is still going away (one step in flight)."""
    if any(pod.deleting for pod in view.pods) or view.migrations_active():
        return None
    for node in view.rejected:
        if node.pod.template_hash != view.desired.template_hash and _holds_nothing(node):
            return DeletePod(
                node.pod.name, "runs a Valkey below the version floor from an outdated pod template"
            )
    for shard in range(view.desired.shards):
        pods = view.shard_pods(shard)
        if len(pods) > view.desired.pods_per_shard:
            victim = _surplus_victim(view, pods)
            if victim is not None:
                return DeletePod(victim, f"shard {shard} has more than {view.desired.pods_per_shard} pods")
    for pod in view.pods:
        if pod.shard is not None and not _in_spec(view, pod) and not pod.deleting and _drained(view, pod):
            return DeletePod(pod.name, f"shard {pod.shard} is beyond spec.shards and holds no slots")
    return None


def _drained(view: View, pod: PodObservation) -> bool:
    """A pod of a leaving shard that may go: its shard serves no slots, and it is followed by nobody.

    Replicas go first (the shard's primary keeps its replicas while it still
    owns slots), the emptied primary last.
    """
    if not view.shard_identified(pod.shard or 0) or any(
        node.obs.slots for node in view.members.values() if node.pod.shard == pod.shard
    ):
        return False
    node = view.nodes.get(pod.name)
    if node is None:
        return pod.never_started or pod.ended
    holds_copy = node.obs.role is NodeRole.REPLICA and bool(view.claims.get(node.obs.primary_id or ""))
    return not node.obs.slots and not view.followers(node) and not view.migrating(node) and not holds_copy


def _holds_nothing(node: Node) -> bool:
    return not node.obs.slots and not node.obs.peers


def _surplus_victim(view: View, pods: Sequence[PodObservation]) -> str | None:
    """The safest pod to remove, newest first among equals; None when no pod is safe to remove."""
    ranked = [(rank, pod.order, pod.name) for pod in pods if (rank := _removal_rank(view, pod)) is not None]
    if not ranked:
        return None
    best = min(rank for rank, _, _ in ranked)
    return max((order, name) for rank, order, name in ranked if rank == best)[1]


def _removal_rank(view: View, pod: PodObservation) -> int | None:
    """0 never started, 1 empty and not in the cluster, 2 empty member or lagging replica, 3 in-sync replica.

    None (never removed): a pod that may run a server nobody could ask, a node
    owning slots or followed by replicas, or a replica whose primary is not
    seen serving: it may be the last copy of its shard's data.
    """
    node = view.nodes.get(pod.name)
    if node is None:
        return 0 if pod.never_started else None
    if node.obs.slots or view.followers(node):
        return None
    if node.is_primary:
        return 1 if node.pod.name not in view.members else 2
    primary = view.by_id.get(node.obs.primary_id or "")
    if node.obs.role is not NodeRole.REPLICA or primary is None or not primary.is_primary:
        return None
    if primary.pod.name not in view.members:
        return None
    if not primary.obs.slots:
        return None if view.claims.get(primary.node_id) else 1  # an emptied primary: nothing to copy
    return 3 if view.in_sync(node, primary) else 2


def _in_spec(view: View, pod: PodObservation) -> bool:
    return pod.shard is not None and 0 <= pod.shard < view.desired.shards


# --- status ------------------------------------------------------------------------------------------


def _status(view: View, actions: Sequence[Action]) -> PlannedStatus:
    served = union(*(node.obs.slots for node in view.members.values() if node.is_primary))
    uncovered = subtract(ALL_SLOTS, served)
    findings = tuple(_findings(view, actions, uncovered))
    ready_shards = sum(1 for shard in range(view.desired.shards) if _shard_ready(view, shard))
    if view.rejected:
        state = ClusterState.FAILED
        message = _version_message(view)
    elif not findings:
        state = ClusterState.ACTIVE
        message = (
            f"{view.desired.shards} shard(s) with {view.desired.replicas_per_shard} replica(s) each: "
            f"all slots served, replicas in sync"
        )
    else:
        state = _unsettled_state(view)
        message = "; ".join(finding.message for finding in findings[:3])
    if view.desired.paused:
        message = f"paused: {message}"
    return PlannedStatus(
        state=state,
        message=message,
        shards=view.desired.shards,
        ready_shards=ready_shards,
        ready_nodes=sum(1 for node in view.members.values() if _node_ready(view, node)),
        nodes=tuple(_node_status(view, pod, pod.shard) for pod in view.pods if pod.shard is not None),
        conditions=_conditions(view, state, message, findings),
        uncovered=uncovered,
        findings=findings,
    )


def _unsettled_state(view: View) -> ClusterState:
    """Creating until the cluster was first Active (the recorded status says so), Updating after.

    A Failed cluster whose slots were all assigned had been formed before, so it updates.
    """
    recorded = view.recorded_state
    if recorded in {ClusterState.ACTIVE, ClusterState.UPDATING}:
        return ClusterState.UPDATING
    if recorded is ClusterState.FAILED and not subtract(ALL_SLOTS, view.claimed):
        return ClusterState.UPDATING
    return ClusterState.CREATING


def _findings(view: View, actions: Sequence[Action], uncovered: SlotRanges) -> Iterable[Finding]:
    """What keeps the cluster from Active, in bootstrap order; problems are marked."""
    yield from _pod_findings(view, actions)
    if view.unreachable:
        names = ", ".join(pod.name for pod in view.unreachable)
        yield Finding(Reason.NODES_UNREACHABLE, f"unreachable: {names}", problem=True)
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


def _repair_findings(view: View, actions: Sequence[Action], uncovered: SlotRanges) -> Iterable[Finding]:
    for action in actions:
        if isinstance(action, Promote):
            yield Finding(
                Reason.PROMOTING_REPLICA,
                f"promoting {action.node}: its primary {action.departed[:8]} is gone",
                problem=True,
            )
    stranded = view.stranded()
    lost = [slots for ghost, slots in stranded.items() if not any(view.ghost_followers(ghost))]
    if lost:
        yield Finding(
            Reason.DATA_LOST,
            f"slots {_ranges_text(union(*lost))} lost their only copy (no replica): "
            f"they are served again empty and the data in them is lost",
            problem=True,
        )
    elif view.formed_before() and subtract(uncovered, view.claimed):
        rebuilt = subtract(uncovered, view.claimed)
        yield Finding(
            Reason.DATA_LOST,
            f"slots {_ranges_text(rebuilt)} had no copy left: they are rebuilt empty (data lost)",
            problem=True,
        )


def _migration_findings(view: View) -> Iterable[Finding]:
    if view.migrations_active():
        yield Finding(Reason.MIGRATING_SLOTS, "slot migrations in progress")
    settled = not subtract(ALL_SLOTS, view.served) and not view.stranded()
    moves = _transfers(view) if settled else ()
    sources = {move.source for move in moves}
    for node in sorted(view.members.values(), key=lambda node: node.pod.order):
        stuck = trouble(node.obs.migrations) if node.pod.shard in sources else None
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


def _pod_findings(view: View, actions: Sequence[Action]) -> Iterable[Finding]:
    expected = view.desired.shards * view.desired.pods_per_shard
    counts = [len(view.shard_pods(shard)) for shard in range(view.desired.shards)]
    missing = sum(max(view.desired.pods_per_shard - count, 0) for count in counts)
    surplus = sum(max(count - view.desired.pods_per_shard, 0) for count in counts)
    ready = sum(1 for pod in view.pods if pod.live and pod.ready and _in_spec(view, pod))
    if missing or ready < expected:
        yield Finding(Reason.WAITING_FOR_PODS, f"{min(ready, expected)} of {expected} pods Ready")
    going = sum(1 for pod in view.pods if pod.deleting)
    if surplus or going or any(isinstance(action, DeletePod) for action in actions):
        yield Finding(Reason.REMOVING_PODS, f"{surplus} surplus pod(s), {going} pod(s) going away")
    beyond = sorted({pod.shard for pod in view.pods if pod.shard is not None and not _in_spec(view, pod)})
    if beyond:
        yield Finding(Reason.SCALE_DOWN_PENDING, f"pods of shards beyond spec.shards: {beyond}")
    unlabelled = [pod.name for pod in view.pods if pod.shard is None]
    if unlabelled:
        yield Finding(Reason.UNLABELLED_PODS, f"pods without a shard label: {', '.join(unlabelled)}", True)
    outdated = [pod.name for pod in view.pods if pod.template_hash != view.desired.template_hash]
    if outdated:
        yield Finding(Reason.UPDATE_PENDING, f"{len(outdated)} pod(s) run an outdated template")


def _slot_findings(view: View, uncovered: SlotRanges) -> Iterable[Finding]:
    if uncovered:
        unassigned = subtract(uncovered, view.claimed)
        stranded = intersect(uncovered, view.claimed)
        if unassigned:
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
    if node.obs.cluster_ok is not True:
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
    )


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


def _conditions(
    view: View, state: ClusterState, message: str, findings: Sequence[Finding]
) -> tuple[PlannedCondition, ...]:
    problems = [finding for finding in findings if finding.problem]
    if state is ClusterState.FAILED:
        ready = PlannedCondition(READY, False, Reason.VERSION_BELOW_FLOOR, message)
        progressing = PlannedCondition(PROGRESSING, False, Reason.VERSION_BELOW_FLOOR, message)
        degraded = PlannedCondition(DEGRADED, True, Reason.VERSION_BELOW_FLOOR, message)
        return (ready, progressing, degraded)
    if state is ClusterState.ACTIVE:
        ready = PlannedCondition(READY, True, Reason.READY, message)
        progressing = PlannedCondition(PROGRESSING, False, Reason.RECONCILED, message)
    else:
        first = findings[0]
        ready = PlannedCondition(READY, False, first.reason, message)
        progressing = PlannedCondition(PROGRESSING, True, first.reason, message)
    if view.desired.paused:
        progressing = PlannedCondition(PROGRESSING, False, Reason.PAUSED, message)
    if problems:
        degraded_message = "; ".join(problem.message for problem in problems)
        degraded = PlannedCondition(DEGRADED, True, problems[0].reason, degraded_message)
    else:
        degraded = PlannedCondition(DEGRADED, False, Reason.AS_EXPECTED, "")
    return (ready, progressing, degraded)


def _requeue(view: View, status: PlannedStatus, actions: Sequence[Action]) -> float:
    if actions:
        return REQUEUE_ACTING
    if view.desired.paused or status.state is ClusterState.ACTIVE:
        return REQUEUE_STEADY
    if status.state is ClusterState.FAILED:
        return REQUEUE_FAILED
    if view.migrations_active() or any(f.reason is Reason.REBALANCING_SLOTS for f in status.findings):
        return REQUEUE_ACTING  # a job takes well under a second: look again soon
    return REQUEUE_WAITING


def _ranges_text(ranges: SlotRanges, limit: int = 4) -> str:
    shown = format_slot_ranges(ranges[:limit])
    return shown + (f",... ({len(ranges) - limit} more ranges)" if len(ranges) > limit else "")
