"""A deterministic in-memory Valkey cluster that applies the planner's actions (test support).

It models what the operator can see of a cluster, not Valkey's internals:
pods that start after a delay and terminate after a grace period; servers with
a node id, version, role, slots, replication offset and link; CLUSTER MEET
handshakes; gossip that spreads membership one hop per pass (only to live
nodes, as Valkey's handshakes do); the FORGET ban list; PFAIL/FAIL flags for
silent nodes; automatic failover of a replica when its primary dies and a
majority of slot owners survive; cluster_state computed from each node's view;
each server's runtime settings (CONFIG GET/SET, refusing configured values),
its ACL users (loaded from the owned Secret's file at start, ACL SETUSER/DELUSER,
refusing commands it does not know), pod annotations and the owned objects.

Actions are checked the way Valkey and the API server would check them, and an
invalid one comes back as an `Outcome` with an error instead of changing
anything, so a test can assert that the planner only asks for what the world
accepts. Time advances only by `advance()`, one reconcile pass per call, so a
run is a pure function of its inputs: hypothesis can shrink and replay it.

Integration tests never use this: they run real Valkey.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import assert_never

import attrs

from controllers.cluster.decision.acl_decision import file_users
from controllers.cluster.decision.actions import (
    Action,
    ApplyObject,
    AssignSlots,
    CreateObject,
    CreatePod,
    DeleteClaim,
    DeleteObject,
    DeletePod,
    Failover,
    Forget,
    MarkMember,
    Meet,
    MigrateSlots,
    NewPod,
    PatchClaim,
    PatchPodMetadata,
    Planned,
    Promote,
    PruneFailedPod,
    ReloadTls,
    Replicate,
    SetConfig,
    SyncAcl,
)
from controllers.cluster.decision.context import Context
from controllers.shared.names import (
    MODE_ANNOTATION,
    NODE_ID_ANNOTATION,
    SHAPE_HASH_LABEL,
    TEMPLATE_HASH_LABEL,
)
from controllers.shared.observation import (
    ClaimObservation,
    NodeObservation,
    Observation,
    PodObservation,
    PodPhase,
)
from controllers.shared.probe import should_probe
from controllers.shared.versions import Version, format_version
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.quantity import quantity_bytes
from valkey_operator.api.resources import VERSION_FLOOR
from valkey_operator.api.tunables import canonical, desired_runtime, operator_runtime
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.acl import UserRules, normal_form
from valkey_operator.valkey.replies import KnownNode, MigrationOperation, NodeFlag, SlotMigration
from valkey_operator.valkey.slots import ALL_SLOTS, SlotRanges, intersect, subtract, union

EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
VALKEY_STARTS_AT = operator_runtime(0)
"""The operator's own runtime directives as a fresh server runs them (Valkey's defaults)."""
SIM_CLASS = "sim-local"
"""The StorageClass every simulated claim is provisioned by."""


def _canonical(name: str, value: str) -> str | None:
    """As CONFIG GET prints value after CONFIG SET; the operator's own directives are plain integers."""
    if name in VALKEY_STARTS_AT:
        return value if value.isdigit() else None
    return canonical(name, value)


@attrs.frozen(kw_only=True)
class SimSettings:
    """The knobs of a simulated world; every delay counts passes (calls to `advance`)."""

    cluster: str = "vk"
    template_hash: str = "t1"
    """The template hash the pods the operator creates now carry."""
    versions: Mapping[str, Version | None] = attrs.field(factory=dict)
    """The binary each template runs; absent templates run the floor version."""
    version_overrides: Mapping[int, Version | None] = attrs.field(factory=dict)
    """By pod sequence number (0 = first pod created): a different binary for that one pod."""
    ready_delays: Sequence[int] = (1,)
    """Passes from creation to Running (the server answers), cycled over pods in creation order."""
    readiness_lag: int = 0
    """Passes from Running to Ready: the kubelet's readiness probe passes this long after the
    server answers (0: at once). Meanwhile the pod is starting and probed (probe.should_probe)."""
    sync_delay: int = 1
    termination_delay: int = 1
    node_timeout: int = 2
    """Passes a dead node stays PFAIL before FAIL (and before a failover can happen)."""
    forget_window: int = 30
    """Passes a FORGET bans the id from being re-learned (Valkey: 60 s)."""
    offset_step: int = 100
    gossip_every: int = 1
    """Gossip spreads membership one hop every this many passes (Valkey's gossip can lag the operator)."""
    migration_delay: int = 2
    """Passes a slot migration job runs before its slots switch owner."""
    failing_migrations: Collection[int] = frozenset()
    """Sequence numbers (0 = first job started) of migration jobs that fail instead of finishing."""
    failing_failovers: Collection[int] = frozenset()
    """Sequence numbers (0 = first request) of coordinated failovers that time out and change nothing."""
    elections: bool = True
    """Valkey's own failover elects replicas (False: replicas too stale to be elected)."""
    refused: Mapping[str, frozenset[str]] = attrs.field(factory=dict)
    """directive -> values every server refuses at CONFIG SET (as a build without a feature would)."""
    unknown_commands: frozenset[str] = frozenset()
    """Commands no server knows: ACL SETUSER naming one is refused, and so is a startup file with it."""
    k8s_nodes: Sequence[tuple[str, str]] = ()
    """(name, zone) of the Kubernetes nodes pods are bound to, round robin in creation order; none: pods
    carry no node (primary spread has nothing to go by)."""
    acl_secret: str = "vk-internal"
    acl_key: str = "users.acl"
    """Where the startup ACL file lives among the owned objects (what a starting server loads)."""
    refused_users: frozenset[str] = frozenset()
    """Users whose rules every server refuses at ACL SETUSER (a rule this build does not take)."""
    refuse_tls: bool = False
    """Every server refuses to load its certificate files again (a bad file in the Secret)."""
    expandable: bool = True
    """The claims' storage class allows volume expansion (a larger request is accepted)."""
    backup: Mapping[int, tuple[int, SlotRanges]] = attrs.field(factory=dict)
    """A backup's shards (index -> keys, the slots holding them): a pod whose init container restores
    shard i starts with those keys loaded and takes those slots, as Valkey does at start."""
    failing_restores: Collection[int] = frozenset()
    """Backup shards whose download fails (a checksum): their restoring pods end Failed."""


@attrs.define
class SimMigration:
    """One atomic slot migration job: the slots switch owner at once when it succeeds."""

    name: str
    seq: int
    source_id: str
    target_id: str
    slots: SlotRanges
    started: int
    state: str = "syncing"
    updated: int = 0


@attrs.define
class SimPod:
    name: str
    shard: int
    template_hash: str
    seq: int
    created_tick: int
    ready_tick: int
    ip: str | None = None
    phase: PodPhase = PodPhase.PENDING
    deleting_since: int | None = None
    node_id: str | None = None
    annotations: dict[str, str] = attrs.field(factory=dict)
    k8s_node: str | None = None
    member: bool = False
    claim: str | None = None
    restores: int | None = None
    """The backup shard its init container loads (spec.restore), if any."""
    running_tick: int = 0
    """When it started Running (its readiness probe passes SimSettings.readiness_lag later)."""
    shape_hash: str | None = None
    """Its shape-hash label (template.shape_hash), if it carries one."""

    @property
    def uid(self) -> str:
        return _hex_id("uid", self.name, self.seq)[:16]


@attrs.define
class SimClaim:
    """A data claim: what survives its pod is the node persisted on it (its id, data and view)."""

    name: str
    shard: int
    created_tick: int
    requested: int
    annotations: dict[str, str] = attrs.field(factory=dict)
    deleting: bool = False
    persisted: str | None = None
    """The node id whose nodes.conf and data are on the volume (None: an empty volume)."""
    unusable: bool = False
    """No server can start on it (a volume that came back root-owned after its node lost its disk)."""

    @property
    def uid(self) -> str:
        return _hex_id("claim", self.name, self.created_tick)[:16]


@attrs.define
class SimNode:
    node_id: str
    pod: str
    ip: str
    version: Version | None
    shard_id: str
    role: NodeRole = NodeRole.PRIMARY
    primary_id: str | None = None
    slots: SlotRanges = ()
    repl_offset: int = 0
    link_up: bool = False
    sync_left: int = 0
    alive: bool = True
    dead_since: int | None = None
    known: set[str] = attrs.field(factory=set)
    handshakes: dict[str, int] = attrs.field(factory=dict)
    banned: dict[str, int] = attrs.field(factory=dict)
    config: dict[str, str] = attrs.field(factory=dict)
    """CONFIG GET of every runtime directive (Valkey's defaults at start: the file holds none)."""
    acl: dict[str, UserRules] = attrs.field(factory=dict)
    loaded_keys: int = 0
    """Keys read from an RDB at start (INFO persistence); a new empty node reports 0."""


@attrs.frozen
class Outcome:
    """What applying one action did: error is what the actor would have been told, or None."""

    action: Action
    error: str | None = None


def _hex_id(*parts: object) -> str:
    return hashlib.sha1(":".join(map(str, parts)).encode()).hexdigest()


def stored(key: str, body: Obj) -> Obj:
    """An object as the API server holds it: with a uid (one per kind and name, stable here)."""
    return {**body, "metadata": {**body["metadata"], "uid": f"uid-{key}"}}


class SimulatedCluster:
    """The world one cluster's planner acts on; `observe` -> plan -> `apply` -> `advance`, repeated."""

    def __init__(self, settings: SimSettings | None = None) -> None:
        self.settings = settings or SimSettings()
        self.tick = 0
        self.pods: dict[str, SimPod] = {}
        self.nodes: dict[str, SimNode] = {}
        """Every server identity ever started, dead ones included (others may still know them)."""
        self._seq = 0
        self.template_hash = self.settings.template_hash
        self.shape_hash: str | None = None
        """The shape-hash label new pods carry (None: none, as before the label existed)."""
        self.migrations: list[SimMigration] = []
        self.ip_generation = 0
        """Bumped by `reboot_pod`: restarted pods get addresses they never had."""
        self.failovers = 0
        """Coordinated failovers requested so far (their sequence numbers)."""
        self.objects: dict[str, Obj] = {}
        """Owned objects as the API server holds them, by OwnedObject.key."""
        self.claims: dict[str, SimClaim] = {}
        """Data claims (persistence), by name."""

    # --- observing -------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The world's time (Unix seconds): the pass's `Context.now`."""
        return (EPOCH + datetime.timedelta(seconds=self.tick)).timestamp()

    def context(self, **fields: object) -> Context:
        """A pass's Context at the world's time; fields set the stored status or the memory."""
        return Context(now=self.now, **fields)  # type: ignore[arg-type]

    def observe(
        self,
        unreachable: Collection[str] = frozenset(),
        *,
        unread: Collection[str] = frozenset(),
        commands: Collection[str] = (),
    ) -> Observation:
        """What an observer would read now; pods named in unreachable do not answer this pass, those
        in unread answer the topology reads but not the migration log, CONFIG GET, ACL LIST or
        COMMAND INFO (unknown facts). `commands` are the role commands each node is asked about."""
        pods = tuple(self._pod_observation(pod) for pod in sorted(self.pods.values(), key=lambda p: p.name))
        nodes: dict[str, NodeObservation] = {}
        for pod in self.pods.values():
            node = self.node_of(pod.name)
            if node is None or not should_probe(self._pod_observation(pod)):
                continue
            if pod.name in unreachable or not node.alive:
                nodes[pod.name] = NodeObservation.unreachable("timeout")
            elif pod.name in unread:
                nodes[pod.name] = attrs.evolve(
                    self._node_observation(node, commands),
                    migrations=None,
                    config=None,
                    acl=None,
                    commands=None,
                )
            else:
                nodes[pod.name] = self._node_observation(node, commands)
        return Observation(
            pods=pods,
            nodes=nodes,
            objects=dict(self.objects),
            node_zones=dict(self.settings.k8s_nodes),
            claims=tuple(self._claim_observation(claim) for _, claim in sorted(self.claims.items())),
            expandable={SIM_CLASS: self.settings.expandable},
        )

    def _claim_observation(self, claim: SimClaim) -> ClaimObservation:
        created = EPOCH + datetime.timedelta(seconds=claim.created_tick)
        return ClaimObservation(
            name=claim.name,
            shard=claim.shard,
            uid=claim.uid,
            deleting=claim.deleting,
            created=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            node_id=claim.annotations.get(NODE_ID_ANNOTATION),
            requested=claim.requested,
            bound=True,
            mode=claim.annotations.get(MODE_ANNOTATION),
            storage_class=SIM_CLASS,
        )

    def _ready(self, pod: SimPod) -> bool:
        return (
            pod.phase is PodPhase.RUNNING
            and pod.deleting_since is None
            and self.tick >= pod.running_tick + self.settings.readiness_lag
        )

    def _pod_observation(self, pod: SimPod) -> PodObservation:
        created = EPOCH + datetime.timedelta(seconds=pod.created_tick)
        return PodObservation(
            name=pod.name,
            shard=pod.shard,
            template_hash=pod.template_hash,
            shape_hash=pod.shape_hash,
            phase=pod.phase,
            ready=self._ready(pod),
            ip=pod.ip,
            deleting=pod.deleting_since is not None,
            created=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            uid=pod.uid,
            annotations=dict(pod.annotations),
            created_at=created.timestamp(),
            failure="container valkey exited with code 1 (Error)" if pod.phase is PodPhase.FAILED else None,
            node_name=pod.k8s_node,
            claim=pod.claim,
            member=pod.member,
        )

    def _node_observation(self, node: SimNode, commands: Collection[str] = ()) -> NodeObservation:
        version_text = format_version(node.version) or "redis_version 7.2.4"
        myself = self._known_line(node, node, myself=True)
        others = [self._known_line(node, self.nodes[node_id]) for node_id in sorted(node.known)]
        handshakes = [
            KnownNode(
                node_id=_hex_id("handshake", node.node_id, ip),
                ip=ip,
                flags=frozenset({NodeFlag.HANDSHAKE, NodeFlag.PRIMARY}),
                connected=False,
            )
            for ip in sorted(node.handshakes)
        ]
        return NodeObservation(
            reachable=True,
            version=node.version,
            version_text=version_text,
            node_id=node.node_id,
            role=node.role,
            primary_id=node.primary_id,
            shard_id=node.shard_id,
            slots=node.slots,
            repl_offset=node.repl_offset,
            link_up=node.link_up if node.role is NodeRole.REPLICA else None,
            link_down_seconds=self._link_down(node),
            cluster_ok=self.cluster_ok(node),
            known_nodes=(myself, *others, *handshakes),
            migrations=tuple(self._migration_entries(node)),
            config=dict(node.config),
            acl=dict(node.acl),
            commands={command: command not in self.settings.unknown_commands for command in commands},
            loaded_keys=node.loaded_keys,
            keys=node.loaded_keys,
        )

    def _link_down(self, node: SimNode) -> int | None:
        """A replica's master_link_down_since_seconds: since its primary died, else -1 (never up)."""
        if node.role is not NodeRole.REPLICA or node.link_up:
            return None
        primary = self.nodes.get(node.primary_id or "")
        if primary is not None and not primary.alive and primary.dead_since is not None:
            return self.tick - primary.dead_since
        return -1

    def _migration_entries(self, node: SimNode) -> Iterable[SlotMigration]:
        """The jobs this node logs: exports on the source, imports on the target (both primaries)."""
        for job in self.migrations:
            if node.node_id not in {job.source_id, job.target_id}:
                continue
            exporting = node.node_id == job.source_id
            yield SlotMigration(
                name=job.name,
                operation=MigrationOperation.EXPORT if exporting else MigrationOperation.IMPORT,
                slots=job.slots,
                source_id=job.source_id,
                target_id=job.target_id,
                state=job.state,
                message="" if job.state != "failed" else "connection lost",
                last_update_time=int((EPOCH + datetime.timedelta(seconds=job.updated)).timestamp()),
            )

    def _known_line(self, viewer: SimNode, node: SimNode, *, myself: bool = False) -> KnownNode:
        flags = {NodeFlag.PRIMARY if node.role is NodeRole.PRIMARY else NodeFlag.REPLICA}
        if myself:
            flags.add(NodeFlag.MYSELF)
        elif not node.alive:
            flags.add(NodeFlag.FAIL if self._failed(node) else NodeFlag.PFAIL)
        return KnownNode(
            node_id=node.node_id,
            ip=node.ip,
            flags=frozenset(flags),
            primary_id=node.primary_id,
            connected=node.alive,
            slots=node.slots,
            pong_received_ms=0 if myself else self._millis(node.dead_since if not node.alive else self.tick),
        )

    def _millis(self, tick: int | None) -> int:
        return int((EPOCH + datetime.timedelta(seconds=tick or 0)).timestamp() * 1000)

    def _failed(self, node: SimNode) -> bool:
        return node.dead_since is not None and self.tick - node.dead_since >= self.settings.node_timeout

    def cluster_ok(self, node: SimNode) -> bool:
        """cluster_state:ok as node computes it: every slot served by a node it does not consider FAIL."""
        served = union(
            node.slots,
            *(self.nodes[other].slots for other in node.known if not self._failed(self.nodes[other])),
        )
        return not subtract(ALL_SLOTS, served)

    # --- acting ------------------------------------------------------------------------------------

    def apply(self, actions: Iterable[Planned], unreachable: Collection[str] = frozenset()) -> list[Outcome]:
        """Apply actions in order, as the actor would; pods named in unreachable time out."""
        return [self._apply(action, unreachable) for action in actions]

    def _apply(self, action: Planned, unreachable: Collection[str]) -> Outcome:
        match action:
            case CreatePod(shard=shard, name=name):
                if name in self.pods:
                    return Outcome(action, "AlreadyExists")
                if action.claim_body is not None and action.claim not in self.claims:
                    storage = action.claim_body["spec"]["resources"]["requests"]["storage"]
                    annotations = dict(action.claim_body["metadata"].get("annotations") or {})
                    self.claims[action.claim] = SimClaim(
                        action.claim, shard, self.tick, quantity_bytes(storage), annotations
                    )
                pod = self.create_pod(shard, name or None, claim=action.claim or None)
                init = [c for c in (action.body or {}).get("spec", {}).get("initContainers") or []]
                if any(container["name"] == "restore" for container in init):
                    pod.restores = shard
                return Outcome(action)
            case NewPod(shard=shard):  # the planner's intent, applied as is by the planner harness
                self.create_pod(shard, None, claim=action.claim or None)
                return Outcome(action)
            case DeleteClaim(claim=name, uid=uid):
                claim = self.claims.get(name)
                if claim is None or claim.uid != uid:
                    return Outcome(action, "NotFound")
                claim.deleting = True
                return Outcome(action)
            case PatchClaim(claim=name, uid=uid):
                claim = self.claims.get(name)
                if claim is None or claim.uid != uid:
                    return Outcome(action, "Conflict: uid precondition")
                claim.annotations.update(action.annotations)
                if action.storage is not None:
                    if not self.settings.expandable:
                        return Outcome(
                            action,
                            "Forbidden: only dynamically provisioned pvc can be resized "
                            "and the storageclass that provisions the pvc must support resize",
                        )
                    claim.requested = quantity_bytes(action.storage)
                return Outcome(action)
            case CreateObject(object=owned):
                if owned.key in self.objects:
                    return Outcome(action, "AlreadyExists")
                self.objects[owned.key] = stored(owned.key, owned.body)
                return Outcome(action)
            case DeletePod(pod=pod):
                if action.claim in self.claims:
                    self.claims[action.claim].deleting = True
                if pod not in self.pods:
                    return Outcome(action, "NotFound")
                self.delete_pod(pod)
                return Outcome(action)
            case Meet() | AssignSlots() | Replicate():
                node = self._target(action.node, unreachable)
                if isinstance(node, str):
                    return Outcome(action, node)
                return Outcome(action, self._valkey(node, action))
            case Failover():
                node = self._target(action.node, unreachable)
                if isinstance(node, str):
                    return Outcome(action, node)
                return Outcome(action, self._coordinated_failover(node))
            case MigrateSlots() | Promote():
                node = self._target(action.node, unreachable)
                if isinstance(node, str):
                    return Outcome(action, node)
                error = (
                    self._migrate(node, action) if isinstance(action, MigrateSlots) else self._takeover(node)
                )
                return Outcome(action, error)
            case Forget(node_id=node_id, on=on):
                errors = []
                for pod in on:
                    target = self._target(pod, unreachable)
                    error = target if isinstance(target, str) else self._forget(target, node_id)
                    if error is not None:
                        errors.append(f"{pod}: {error}")
                return Outcome(action, "; ".join(errors) or None)
            case ApplyObject(object=owned):
                self.objects[owned.key] = stored(owned.key, owned.body)
                return Outcome(action)
            case DeleteObject(key=key, uid=uid):
                current = self.objects.get(key)
                if current is None or current["metadata"].get("uid") != uid:
                    return Outcome(action, "NotFound")  # the client's uid precondition
                del self.objects[key]
                return Outcome(action)
            case PatchPodMetadata(pod=pod, uid=uid, annotations=annotations, labels=labels):
                current = self.pods.get(pod)
                if current is None or current.uid != uid:
                    return Outcome(action, "Conflict: uid precondition")
                current.annotations.update(annotations)
                patched = dict(labels)
                current.template_hash = patched.get(TEMPLATE_HASH_LABEL, current.template_hash)
                current.shape_hash = patched.get(SHAPE_HASH_LABEL, current.shape_hash)
                return Outcome(action)
            case MarkMember(pod=pod, uid=uid, member=member):
                current = self.pods.get(pod)
                if current is None or current.uid != uid:
                    return Outcome(action, "Conflict: uid precondition")
                current.member = member
                return Outcome(action)
            case PruneFailedPod(pod=pod, uid=uid):
                current = self.pods.get(pod)
                if current is None or current.uid != uid:
                    return Outcome(action, "NotFound")
                del self.pods[pod]
                return Outcome(action)
            case ReloadTls():
                node = self._target(action.node, unreachable)
                if isinstance(node, str):
                    return Outcome(action, node)
                refused = "ERR loading the TLS files failed" if self.settings.refuse_tls else None
                return Outcome(action, refused)
            case SetConfig() | SyncAcl():
                node = self._target(action.node, unreachable)
                if isinstance(node, str):
                    return Outcome(action, node)
                if isinstance(action, SetConfig):
                    return Outcome(action, self._config_set(node, action))
                return Outcome(action, self._acl_sync(node, action))
        assert_never(action)

    def _config_set(self, node: SimNode, action: SetConfig) -> str | None:
        """As Valkey does: all or nothing, the error naming the first directive refused."""
        for name, value in action.settings:
            if _canonical(name, value) is None or value in self.settings.refused.get(name, frozenset()):
                return f"CONFIG SET failed (possibly related to argument '{name}') - refused"
        for name, value in action.settings:
            node.config[name] = _canonical(name, value) or value
        return None

    def _acl_sync(self, node: SimNode, action: SyncAcl) -> str | None:
        refused = []
        for user in action.set_users:
            if self._names_unknown(user.rules) or user.username in self.settings.refused_users:
                refused.append(user.username)
            else:
                node.acl[user.username] = normal_form(user.rules)
        for name in action.delete_users:
            node.acl.pop(name, None)
        return f"refused {', '.join(refused)}" if refused else None

    def _names_unknown(self, rules: Sequence[str]) -> bool:
        words = " ".join(rules).replace("(", " ").replace(")", " ").split()
        return any(word[:1] in "+-" and word[1:] in self.settings.unknown_commands for word in words)

    def _target(self, pod: str, unreachable: Collection[str]) -> SimNode | str:
        node = self.node_of(pod)
        if node is None:
            return f"pod {pod} runs no server"
        if pod in unreachable:
            return "timeout"
        return node

    def _valkey(self, node: SimNode, action: Meet | AssignSlots | Replicate) -> str | None:
        match action:
            case Meet(peer_ip=ip):
                if ip == node.ip:
                    return "cannot meet myself"
                if not any(self.nodes[other].ip == ip for other in node.known):
                    node.handshakes.setdefault(ip, self.tick)
                return None
            case AssignSlots(slots=slots):
                if node.role is not NodeRole.PRIMARY:
                    return "only a primary can own slots"
                owned = union(node.slots, *(self.nodes[other].slots for other in node.known))
                if intersect(slots, owned):
                    return "Slot is already busy"
                node.slots = union(node.slots, slots)
                return None
            case Replicate(primary_id=primary_id):
                return self._replicate(node, primary_id)
        assert_never(action)

    def _replicate(self, node: SimNode, primary_id: str) -> str | None:
        if primary_id not in node.known:
            return f"Unknown node {primary_id}"
        primary = self.nodes[primary_id]
        if primary.role is not NodeRole.PRIMARY:
            return "I can only replicate a master, not a replica."
        if node.role is NodeRole.PRIMARY and node.slots:
            return "To set a master the node must be empty and without assigned slots."
        if node.primary_id == primary_id:
            return None
        node.role, node.primary_id, node.shard_id = NodeRole.REPLICA, primary_id, primary.shard_id
        node.link_up, node.sync_left, node.repl_offset = False, self.settings.sync_delay, 0
        return None

    def _migrate(self, node: SimNode, action: MigrateSlots) -> str | None:
        if node.role is not NodeRole.PRIMARY or subtract(action.slots, node.slots):
            return "Slots are not served by this node"
        target = self.nodes.get(action.target_id)
        if target is None or action.target_id not in node.known or not target.alive:
            return f"Unknown node {action.target_id}"
        if target.role is not NodeRole.PRIMARY:
            return "Target node is not a primary"
        if node.node_id not in target.known:  # Valkey fails the job at its handshake
            slot = action.slots[0].start
            return f"Received error during handshake to target: -ERR Slot {slot} has no node served."
        for job in self.migrations:
            if job.state == "syncing" and intersect(job.slots, action.slots):
                return f"I am already migrating slot {intersect(job.slots, action.slots)[0].start}."
        seq = len(self.migrations)
        self.migrations.append(
            SimMigration(
                name=_hex_id("migration", seq),
                seq=seq,
                source_id=node.node_id,
                target_id=target.node_id,
                slots=action.slots,
                started=self.tick,
                updated=self.tick,
            )
        )
        return None

    def _takeover(self, node: SimNode) -> str | None:
        """CLUSTER FAILOVER TAKEOVER: the replica claims its primary's slots with a new epoch, no vote."""
        if node.role is not NodeRole.REPLICA:
            return "You should send CLUSTER FAILOVER to a replica"
        primary = self.nodes[node.primary_id or ""]
        self._promote(node, primary)
        return None

    def _coordinated_failover(self, node: SimNode) -> str | None:
        """CLUSTER FAILOVER: the live primary pauses writes, the replica catches up and takes over;
        the old primary becomes its replica. Configured requests time out instead (nothing changes)."""
        seq = self.failovers
        self.failovers += 1
        if node.role is not NodeRole.REPLICA:
            return "You should send CLUSTER FAILOVER to a replica"
        primary = self.nodes.get(node.primary_id or "")
        if primary is None or not primary.alive:
            return "Master is down or failed, please use CLUSTER FAILOVER FORCE"
        if seq in self.settings.failing_failovers:
            return None  # accepted, then it times out in Valkey: nothing changes
        node.repl_offset = primary.repl_offset
        self._promote(node, primary)
        primary.role, primary.primary_id = NodeRole.REPLICA, node.node_id
        primary.link_up, primary.sync_left = False, 1
        return None

    def _promote(self, chosen: SimNode, primary: SimNode) -> None:
        followers = [
            other
            for other in self._live()
            if other.role is NodeRole.REPLICA and other.primary_id == primary.node_id and other is not chosen
        ]
        chosen.role, chosen.primary_id, chosen.slots = NodeRole.PRIMARY, None, primary.slots
        chosen.link_up = False
        primary.slots = ()
        for other in followers:
            other.primary_id, other.link_up, other.sync_left = chosen.node_id, False, 1

    def _forget(self, node: SimNode, node_id: str) -> str | None:
        if node_id == node.node_id:
            return "I tried hard but I can't forget myself..."
        if node_id == node.primary_id:
            return "Can't forget my master!"
        if node_id not in node.known:
            return f"Unknown node {node_id}"
        node.known.discard(node_id)
        node.banned[node_id] = self.tick + self.settings.forget_window
        return None

    # --- the world outside the operator -----------------------------------------------------------------

    def create_pod(self, shard: int, name: str | None = None, claim: str | None = None) -> SimPod:
        """A pod by the name the operator chose (the simulator's own when none), on `claim` if any."""
        seq = self._seq
        self._seq += 1
        delays = self.settings.ready_delays or (0,)
        pod = SimPod(
            name=name or f"{self.settings.cluster}-{shard}-{seq:05x}",
            shard=shard,
            template_hash=self.template_hash,
            shape_hash=self.shape_hash,
            seq=seq,
            created_tick=self.tick,
            ready_tick=self.tick + delays[seq % len(delays)],
            claim=claim,
        )
        hosts = self.settings.k8s_nodes
        if hosts:
            pod.k8s_node = hosts[seq % len(hosts)][0]
        self.pods[pod.name] = pod
        return pod

    def delete_pod(self, name: str) -> None:
        """A delete request: the pod terminates after the grace period (idempotent)."""
        pod = self.pods[name]
        if pod.deleting_since is None:
            pod.deleting_since = self.tick

    def advance(self) -> None:
        """One pass of time: pods start and stop, handshakes finish, gossip, failover, replication."""
        self.tick += 1
        self._pods_lifecycle()
        self._handshakes()
        if self.tick % max(self.settings.gossip_every, 1) == 0:
            self._gossip()
        self._failovers()
        self._migrations()
        self._replication()

    def _migrations(self) -> None:
        """Jobs finish after the delay (slots switch owner at once), or fail when a side died."""
        for job in self.migrations:
            if job.state != "syncing":
                continue
            source, target = self.nodes[job.source_id], self.nodes[job.target_id]
            sound = (
                source.alive
                and target.alive
                and source.role is NodeRole.PRIMARY
                and target.role is NodeRole.PRIMARY
                and not subtract(job.slots, source.slots)
            )
            if not sound or (
                job.seq in self.settings.failing_migrations
                and self.tick - job.started >= self.settings.migration_delay
            ):
                job.state, job.updated = "failed", self.tick
            elif self.tick - job.started >= self.settings.migration_delay:
                source.slots = subtract(source.slots, job.slots)
                target.slots = union(target.slots, job.slots)
                job.state, job.updated = "success", self.tick

    def crash_pod(self, name: str) -> None:
        """The server's process dies (SIGKILL, OOM): with restartPolicy Never the pod ends Failed."""
        pod = self.pods[name]
        self._stop(pod)
        pod.phase = PodPhase.FAILED

    def silence_pod(self, name: str) -> None:
        """The pod's Kubernetes node failed: its server is gone, while the pod object stays Running
        and Ready as the API shows it (until the node controller notices, tens of seconds later)."""
        self._stop(self.pods[name])

    def reboot_pod(self, name: str) -> None:
        """The pod's node rebooted: the same pod runs a new server, with a new identity and a new IP
        (nodes.conf lives on a memory emptyDir, gone with the data)."""
        pod = self.pods[name]
        self._stop(pod)
        self.ip_generation += 1
        self._start(pod)

    def lose_volume(self, claim: str, *, unusable: bool = False) -> None:
        """The claim's volume died with its node: the next server on it starts empty, as a new node
        (unusable: it cannot start at all, its pods end Failed)."""
        self.claims[claim].persisted = None
        self.claims[claim].unusable = unusable

    def _pods_lifecycle(self) -> None:
        for pod in list(self.pods.values()):
            if (
                pod.deleting_since is not None
                and self.tick - pod.deleting_since >= self.settings.termination_delay
            ):
                self._stop(pod)
                del self.pods[pod.name]
            elif pod.phase is PodPhase.PENDING and self.tick >= pod.ready_tick and pod.deleting_since is None:
                self._start(pod)
        used = {
            pod.claim for pod in self.pods.values() if pod.phase not in {PodPhase.FAILED, PodPhase.SUCCEEDED}
        }
        for name, claim in list(self.claims.items()):
            if claim.deleting and name not in used:  # pvc-protection waits for running pods only
                del self.claims[name]

    def _start(self, pod: SimPod) -> None:
        pod.phase = PodPhase.RUNNING
        pod.running_tick = self.tick
        pod.ip = f"10.{self.ip_generation % 250}.{pod.seq // 200}.{pod.seq % 200 + 10}"
        claim = self.claims.get(pod.claim or "")
        if claim is not None and claim.unusable:
            pod.phase = PodPhase.FAILED  # Valkey cannot open nodes.conf on the volume
            return
        if claim is not None and claim.persisted is not None:
            self._resume(pod, self.nodes[claim.persisted])
            return
        node_id = _hex_id("node", pod.name, self.tick)
        if claim is not None:
            claim.persisted = node_id
        version = self.settings.versions.get(pod.template_hash, VERSION_FLOOR)
        version = self.settings.version_overrides.get(pod.seq, version)
        if self._startup_file_refused():
            pod.phase = PodPhase.FAILED  # Valkey will not start with an ACL file naming an unknown command
            return
        if pod.restores is not None and pod.restores in self.settings.failing_restores:
            pod.phase = PodPhase.FAILED  # the init container's download failed its checksum
            return
        keys, slots = self.settings.backup.get(pod.restores, (0, ())) if pod.restores is not None else (0, ())
        self.nodes[node_id] = SimNode(
            node_id=node_id,
            pod=pod.name,
            ip=pod.ip,
            version=version,
            shard_id=_hex_id("shard", node_id),
            config={**desired_runtime({}, version).values, **VALKEY_STARTS_AT} if version is not None else {},
            acl=self._startup_acl(),
            slots=slots,
            loaded_keys=keys,
        )
        pod.node_id = node_id

    def _resume(self, pod: SimPod, node: SimNode) -> None:
        """A server starting from its claim: its node id, slots, role and peers, at the pod's IP; a
        replica re-syncs from its primary."""
        assert pod.ip is not None
        node.alive, node.dead_since, node.pod, node.ip = True, None, pod.name, pod.ip
        if node.role is NodeRole.REPLICA:
            node.link_up, node.sync_left = False, self.settings.sync_delay
        pod.node_id = node.node_id

    def _startup_file(self) -> dict[str, list[str]]:
        secret = self.objects.get(f"Secret/{self.settings.acl_secret}")
        return {name: list(user.rules) for name, user in file_users(secret, self.settings.acl_key).items()}

    def _startup_file_refused(self) -> bool:
        return any(self._names_unknown(rules) for rules in self._startup_file().values())

    def _startup_acl(self) -> dict[str, UserRules]:
        """The users a starting server has: the startup file's, else only Valkey's default user."""
        users = {name: normal_form(rules) for name, rules in self._startup_file().items()}
        return users or {"default": normal_form(["reset", "on", "nopass", "~*", "&*", "+@all"])}

    # --- hands outside the operator ---------------------------------------------------------------

    def tamper_config(self, pod: str, name: str, value: str) -> None:
        """Someone CONFIG SETs a value by hand."""
        node = self.node_of(pod)
        assert node is not None
        node.config[name] = _canonical(name, value) or value

    def tamper_acl(self, pod: str, username: str, rules: Sequence[str] | None) -> None:
        """Someone ACL SETUSERs (or, with None, DELUSERs) a user by hand."""
        node = self.node_of(pod)
        assert node is not None
        if rules is None:
            node.acl.pop(username, None)
        else:
            node.acl[username] = normal_form(rules)

    def _stop(self, pod: SimPod) -> None:
        node = self.node_of(pod.name)
        if node is not None:
            node.alive, node.dead_since = False, self.tick
            node.link_up = False

    def _live(self) -> list[SimNode]:
        return [node for node in self.nodes.values() if node.alive]

    def _by_ip(self, ip: str) -> SimNode | None:
        return next((node for node in self._live() if node.ip == ip), None)

    def _handshakes(self) -> None:
        for node in self._live():
            for ip, started in list(node.handshakes.items()):
                peer = self._by_ip(ip)
                if peer is not None and peer is not node:
                    del node.handshakes[ip]
                    self._link(node, peer)
                    self._link(peer, node)
                elif self.tick - started > self.settings.node_timeout:
                    del node.handshakes[ip]

    def _link(self, node: SimNode, peer: SimNode) -> None:
        if self.tick >= node.banned.get(peer.node_id, -1):
            node.known.add(peer.node_id)

    def _gossip(self) -> None:
        """Each live node learns the live nodes its live peers know (as of the previous pass)."""
        before = {node.node_id: set(node.known) for node in self._live()}
        for node in self._live():
            for peer_id in before[node.node_id]:
                if peer_id not in before:
                    continue  # a dead peer gossips nothing
                for candidate in before[peer_id] | {peer_id}:
                    if candidate != node.node_id and candidate in before:
                        self._link(node, self.nodes[candidate])

    def _failovers(self) -> None:
        if not self.settings.elections:
            return
        owners = [node for node in self.nodes.values() if node.role is NodeRole.PRIMARY and node.slots]
        for primary in owners:
            if primary.alive or not self._failed(primary):
                continue
            voters = sum(1 for owner in owners if owner.alive)
            if voters * 2 <= len(owners):
                continue  # no majority of slot owners to elect a replacement
            replicas = [  # finished their initial sync, so they hold the data (the validity check)
                node
                for node in self._live()
                if node.role is NodeRole.REPLICA
                and node.primary_id == primary.node_id
                and node.sync_left == 0
            ]
            if not replicas:
                continue
            chosen = max(replicas, key=lambda node: (node.repl_offset, node.node_id))
            self._promote(chosen, primary)

    def _replication(self) -> None:
        for node in self._live():
            if node.role is NodeRole.PRIMARY:
                node.repl_offset += self.settings.offset_step
        for node in self._live():
            if node.role is not NodeRole.REPLICA:
                continue
            primary = self.nodes.get(node.primary_id or "")
            if primary is None or not primary.alive:
                node.link_up = False
            elif node.sync_left > 0:
                node.sync_left -= 1
                node.link_up = node.sync_left == 0
            else:
                node.link_up = True
            if node.link_up and primary is not None:
                node.repl_offset = primary.repl_offset

    # --- ground truth, for invariants -----------------------------------------------------------------

    def node_of(self, pod: str) -> SimNode | None:
        """The server the pod runs now (None before it starts or after it is gone)."""
        current = self.pods.get(pod)
        if current is None or current.node_id is None:
            return None
        node = self.nodes[current.node_id]
        return node if node.alive else None

    def pod_ids(self) -> set[str]:
        """Node ids of servers whose pods exist."""
        return {pod.node_id for pod in self.pods.values() if pod.node_id is not None}

    def served(self) -> dict[str, SlotRanges]:
        """Slots per live primary."""
        return {
            node.node_id: node.slots for node in self._live() if node.role is NodeRole.PRIMARY and node.slots
        }

    def members_known_by(self, node_id: str) -> set[str]:
        """Live node ids that know node_id (a node below the floor must never show up here)."""
        return {node.node_id for node in self._live() if node_id in node.known}
