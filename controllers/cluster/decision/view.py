"""The facts one planning pass derives from its observation, computed once and read by every step.

Shard membership is Valkey's (replica-of and shard id); pod labels only say
which shard a pod was created for. A node that did not answer is a fact here
(`unreachable`, `unidentified`), never an exception.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import attrs

from controllers.cluster.decision import announce, resize
from controllers.cluster.decision.acl_decision import AclDecision, decide_acl
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.failures import CrashLoops, crash_loops
from controllers.cluster.decision.rebalance import (
    Transfer,
    timestamp_seconds,
    transfers,
)
from controllers.cluster.decision.restore import Progress
from controllers.cluster.render.config import client_auth_directives
from controllers.shared.observation import NodeObservation, Observation, PodObservation
from controllers.shared.versions import meets_floor
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.api.tunables import desired_runtime, operator_runtime
from valkey_operator.valkey.replies import MigrationOperation
from valkey_operator.valkey.slots import ALL_SLOTS, SlotRanges, even_split, slot_count, subtract, union

MAX_IN_SYNC_LAG_BYTES = 1 << 20
"""A replica whose link is up and whose offset trails its primary's by at most this is in sync."""

HANDOVER_S = 30.0
"""How long after a slot migration job two primaries claiming its slots is a handover, not a conflict."""


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

    @property
    def joinable(self) -> bool:
        """May take the steps that form a shard: be MET, MEET others as the seed, take its shard's
        unowned slots, replicate its shard's primary. Active, or starting: its server answered
        before its readiness probe passed (the tcp probe runs every 2 s and its first try comes
        before the server listens; the pod template keeps it, since changing it would roll every
        cluster). These steps need only a server that answers, and they are what a bootstrap or a
        new node waits for longest (Valkey's writable and rejoin delays, the replica's sync delay
        count from them). Kubernetes readiness still gates what clients see: the client Service
        publishes only Ready pods, the status is Active only once every pod is Ready (report.py).
        Steps that move or take over existing data (migration, promotion, failover) wait for
        active."""
        return self.active or self.pod.starting


def is_outdated(pod: PodObservation, desired: Desired) -> bool:
    """A live pod of an in-spec shard whose template is not the desired one: what a roll replaces
    (an ended pod is never replaced; a pod of a shard beyond spec.shards is drained, not rolled).
    The one definition of outdated: rollout admission and the roll itself both read it."""
    return (
        pod.live
        and pod.shard is not None
        and 0 <= pod.shard < desired.shards
        and pod.template_hash != desired.template_hash
    )


def outdated_pods(pods: Sequence[PodObservation], desired: Desired) -> tuple[PodObservation, ...]:
    return tuple(pod for pod in pods if is_outdated(pod, desired))


def rolls(pod: PodObservation, desired: Desired, now: float) -> bool:
    """An outdated pod the roll replaces: one whose difference cannot be taken in place (resize.py)."""
    return is_outdated(pod, desired) and not resize.in_place(pod, desired, now)


T = TypeVar("T")


class View:
    """Facts derived once per pass from the observation, with the pass's context (context.py)
    beside it; every step and the status read these."""

    def __init__(self, observation: Observation, desired: Desired, context: Context) -> None:
        self.desired = desired
        self.context = context
        """What the pass knows besides what it observed (context.py): read as `view.context.X`,
        never copied onto the View, so a step's non-observed inputs show where it reads them."""
        self.pods = tuple(sorted(observation.pods, key=lambda pod: (pod.shard is None, pod.shard, pod.order)))
        self.nodes: dict[str, Node] = {}
        self.unidentified: list[PodObservation] = []
        """Pods that may run a server the operator could not identify this pass (blocks FORGET)."""
        self.unreachable: list[PodObservation] = []
        """Pods whose server should have answered (probed, or Ready) but did not answer in full."""
        self.unreachable_errors: dict[str, str] = {}
        """Why each unreachable pod's server did not answer, as the probe said (when it said)."""
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
            elif pod.ready or (obs is not None and pod.deleting):
                self.unreachable.append(pod)  # a starting pod's server not listening yet is not a fault
                if obs is not None and obs.error:
                    self.unreachable_errors[pod.name] = obs.error
        self.by_id = {node.node_id: node for node in self.nodes.values()}
        self.data_claims = {claim.name: claim for claim in observation.claims}
        """The cluster's data claims by name (persistence; none for a cache: data_claims.py)."""
        self.expandable = observation.expandable
        self.rejected += [node for node in self.nodes.values() if not meets_floor(node.obs.version)]
        self.rejected.sort(key=lambda node: node.pod.order)
        eligible = [node for node in self.nodes.values() if meets_floor(node.obs.version)]
        self.seed = self._seed(eligible)
        self.members = {node.pod.name: node for node in eligible if self._joined(node)}
        self.claims = self._claims()
        self.claimed = union(*self.claims.values())
        self.layout = even_split(desired.shards)
        self.objects = observation.objects
        self.services = observation.services
        """The per-pod Services (spec.externalAccess), by name: a pod's is named after it."""
        self.node_zones = observation.node_zones
        self._once: dict[str, object] = {}
        self.outdated = tuple(pod for pod in self.pods if rolls(pod, desired, context.now))
        """Live pods of in-spec shards on another template that the roll replaces (the one
        definition of outdated, less the pods resized in place: resize.py)."""
        self.served = union(*(node.obs.slots for node in self.members.values() if node.is_primary))

    @property
    def now(self) -> float:
        """The pass's time (Context.now): the only clock every step reads."""
        return self.context.now

    @functools.cached_property
    def restore_progress(self) -> Progress | None:
        """A restore under way: the keys each shard's server reports it loaded (restore.py): read
        from its RDB for a backup, held once its history is loaded for a moment."""
        source = self.desired.restore
        if source is None:
            return None
        expected = {shard.index: shard.keys for shard in source.shards}
        counted = source.keys is not None
        loaded: dict[int, int | None] = {}
        for node in self.nodes.values():
            shard, count = node.pod.shard, node.obs.loaded_keys if counted else node.obs.keys
            if shard is None or count is None or node.pod.deleting:
                continue
            if expected.get(shard) is None or loaded.get(shard) != expected[shard]:
                loaded[shard] = count
        return Progress(source=source, loaded=loaded)

    def _seed(self, eligible: Sequence[Node]) -> Node | None:
        """A node serving slots (a formed cluster's member: a node that does not answer for a pass must
        not hand the seat to an empty one, which would start a cluster of its own), a Ready one
        before a starting one (a starting seed MEETs nobody), the one that knows most of the
        others, else the oldest pod."""
        ids = {node.node_id for node in eligible}

        def rank(node: Node) -> tuple[bool, bool, bool, int, tuple[str, str]]:
            known = sum(1 for peer in node.obs.peers if peer.node_id in ids)
            return (node.pod.deleting, not node.obs.slots, node.pod.starting, -known, node.pod.order)

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
        """Node ids the members know that no existing pod's server claims as its own, and no data
        claim waits to bring back (sorted)."""
        return self._ghosts

    @functools.cached_property
    def _ghosts(self) -> list[str]:
        known = {peer.node_id for node in self.members.values() for peer in node.obs.peers}
        return sorted(known - self.by_id.keys() - (self.dormant - self.held))

    @functools.cached_property
    def dormant(self) -> frozenset[str]:
        """Node ids recorded on data claims whose server is away (no pod on the claim answers with
        another id): a node coming back on its claim, not a departed one (data_claims.py)."""
        reported = {node.pod.claim: node.node_id for node in self.nodes.values() if node.pod.claim}
        return frozenset(
            claim.node_id
            for claim in self.data_claims.values()
            if claim.node_id
            and not claim.deleting
            and claim.mode == self.desired.claim_mode  # a claim of another mode is never started on
            and claim.name not in self.failing_claims
            and claim.node_id not in self.by_id
            and reported.get(claim.name, claim.node_id) == claim.node_id
        )

    def migrations_active(self) -> bool:
        """Some job is under way, or some node's jobs could not be read (one may be)."""
        return any(self.migrating(node) for node in self.nodes.values())

    def migrating(self, node: Node) -> bool:
        """The node takes part in a slot migration job under way (as source or target), or its
        jobs could not be read this pass."""
        return node.obs.migrations is None or any(migration.active for migration in node.obs.jobs)

    def exporting(self, node: Node) -> bool:
        """A migration job under way with node as its source (one batch per source at a time), or
        its jobs could not be read this pass."""
        return node.obs.migrations is None or any(
            migration.active and migration.operation is MigrationOperation.EXPORT
            for migration in node.obs.jobs
        )

    def recently_migrated(self) -> SlotRanges:
        """Slots of jobs under way or finished in the last HANDOVER_S: while gossip spreads the new
        owner's epoch, source and target may both still claim them for a moment."""
        return union(
            *(
                job.slots
                for node in self.nodes.values()
                for job in node.obs.jobs
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

    @functools.cached_property
    def settled(self) -> bool:
        """Every slot served by a reachable member primary and none stranded: slots may move."""
        return not subtract(ALL_SLOTS, self.served) and not self.stranded

    @functools.cached_property
    def stranded(self) -> dict[str, SlotRanges]:
        """Departed node ids (no pod's server claims them) that still own slots; empty while some
        pod that may run a server did not answer, since it could be one of them."""
        if self.unidentified:
            return {}
        return {
            ghost: slots
            for ghost in self.ghosts()
            # Slots a live member primary serves are not stranded: a node that has not heard of a
            # takeover yet still names the departed id as their owner.
            if (slots := subtract(self.claims.get(ghost, ()), self.served))
        }

    def last_heard(self, node_id: str) -> float:
        """Unix seconds of the latest PONG any member got from node_id (0 when none says)."""
        heard = [
            known.pong_received_ms for node in self.members.values() if (known := node.obs.knows(node_id))
        ]
        return max(heard, default=0) / 1000.0

    def formed_before(self) -> bool:
        """The recorded status says the cluster was formed once (so unowned slots mean lost data)."""
        return self.context.recorded_state in {ClusterState.ACTIVE, ClusterState.UPDATING}

    def shard_slots(self) -> dict[int, SlotRanges]:
        """Slots per shard index, from each shard's single serving primary (shards in conflict left out)."""
        shards = sorted({node.pod.shard for node in self.members.values() if node.pod.shard is not None})
        result: dict[int, SlotRanges] = {}
        for shard in shards:
            primary = self.primary(shard)
            if primary is not None:
                result[shard] = primary.obs.slots
        return result

    def transfers(self) -> tuple[Transfer, ...]:
        """Slot moves that bring every shard to its quota (rebalance.transfers)."""
        return self._transfers

    @functools.cached_property
    def _transfers(self) -> tuple[Transfer, ...]:
        counts = {shard: slot_count(slots) for shard, slots in self.shard_slots().items()}
        for shard in range(self.desired.shards):
            counts.setdefault(shard, 0)
        return transfers(counts, self.desired.shards)

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """A derived fact of a module that reads the View (certificates, spread), computed once."""
        if key not in self._once:
            self._once[key] = compute()
        return cast(T, self._once[key])

    @functools.cached_property
    def runtime_changes(self) -> dict[str, dict[str, str] | None]:
        """Per answering node: the directives it does not run as desired (value as sent), None when
        its values are unknown or it never joins (below the floor). Its announced address is one of
        them (announce.py). The operator's own directives
        (tunables.operator_runtime) count only while no backup of the cluster is Running: a backup's
        stream sets the sync delay to 0 for the moment its SYNC starts, and a stream cut off in
        between (the operator stopped) leaves it there until this puts it back. A derived maxmemory
        follows the node's own pod (resize.node_maxmemory). On a TLS cluster, the client-certificate
        directives of spec.tls.clientAuth (config.client_auth_directives)."""
        found: dict[str, dict[str, str] | None] = {}
        for name, node in self.nodes.items():
            if node.obs.config is None or not meets_floor(node.obs.version):
                found[name] = None
                continue
            runtime = self.desired.runtime
            maxmemory = resize.node_maxmemory(node.pod, self.desired)
            if maxmemory is not None:
                runtime = {**runtime, "maxmemory": str(maxmemory)}
            wanted = desired_runtime(runtime, node.obs.version)
            changes = {
                key: value for key, value in wanted.values.items() if node.obs.config.get(key) != value
            }
            changes.update(wanted.invalid)  # sent as written: Valkey's refusal names what is wrong
            if not self.desired.backup_running:  # a backup lowers the sync delay for a moment
                changes.update(
                    (key, value)
                    for key, value in operator_runtime(self.desired.replicas_per_shard).items()
                    if node.obs.config.get(key, value) != value
                )
            external = self.desired.external
            announced = announce.wanted(external, self.services.get(name), node.pod.host_ip)
            changes.update(
                (key, value)
                for key, value in announced.items()
                # a release without a directive announces its pod IP anyway
                if node.obs.config.get(key, value if external is None else None) != value
            )
            if self.desired.tls is not None:
                changes.update(
                    (key, value)
                    for key, value in client_auth_directives(self.desired.tls.client_certificates).items()
                    if node.obs.config.get(key, value) != value  # a build without it would not start
                )
            found[name] = changes
        return found

    @functools.cached_property
    def acl(self) -> AclDecision:
        """The users every node must have and the startup ACL file (acl_decision.py)."""
        return decide_acl(self.desired.acl, (node.obs for node in self.nodes.values()), self.objects)

    @functools.cached_property
    def crash_loops(self) -> CrashLoops:
        """Shards whose pods keep failing before they serve (failures.py). Failures on a data claim
        that is gone or going away do not count: the claim was the cause, not the template."""
        claims = {name for name, claim in self.data_claims.items() if not claim.deleting}
        counted = [pod for pod in self.pods if not (pod.ended and pod.claim and pod.claim not in claims)]
        return crash_loops(counted, self.desired.template_hash, self.now)

    @functools.cached_property
    def held(self) -> frozenset[str]:
        """Dormant primaries that must not come back as primaries: they own slots nobody serves while
        a replica of theirs is a live member. Restarting from an rdb snapshot or an everysec log, such
        a node could hold less than its replica (every write the replica acknowledged with WAIT), and
        its replica would then copy the older data. So its claim waits and it counts as departed for
        the promotion (Valkey's vote, else TAKEOVER), never for FORGET; once the replica serves its
        slots it comes back, as that replica's replica. Not with aof always: its own file has every
        write it acknowledged, more than any replica."""
        if self.desired.complete_log:
            return frozenset()
        return frozenset(
            node_id
            for node_id in self.dormant
            if subtract(self.claims.get(node_id, ()), self.served)
            and any(
                node.obs.primary_id == node_id and node.active and node.obs.role is NodeRole.REPLICA
                for node in self.members.values()
            )
        )

    @functools.cached_property
    def failing_claims(self) -> frozenset[str]:
        """Data claims that cannot run a server: every recent failure of a shard in a crash loop ran
        on the same claim (a volume that came back unusable, say), so the template is not the cause.
        A node id on such a claim is not coming back: it is not dormant."""
        failing = set()
        for failures in self.crash_loops.blocked.values():
            claims = {pod.claim for pod in failures}
            if len(claims) == 1 and None not in claims:
                failing |= claims
        return frozenset(name for name in failing if name is not None)

    def in_spec(self, pod: PodObservation) -> bool:
        """Created for a shard that spec.shards still has."""
        return pod.shard is not None and 0 <= pod.shard < self.desired.shards
