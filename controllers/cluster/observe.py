"""What one reconcile pass of a ValkeyCluster observed, and what it wants (pure data).

The cluster planner decides only from this model (SPEC 5): the owned pods as
the informer cache shows them and, per pod whose server was probed, what that
Valkey node reported about itself and about the cluster as it sees it. A probe
that failed is recorded as `NodeObservation(reachable=False)`: a fact the
planner plans around, never an exception that aborts the pass. Nothing in here
remembers an earlier pass, so an operator restart loses nothing.

Also here: the slot-range arithmetic every layer shares (parsing
"0-5460,5462", formatting, coverage), and small parsers for the Valkey replies
the model is read from, so their meaning is pinned down next to the fields.
"""

from __future__ import annotations

import datetime
import enum
import re
from collections.abc import Iterable, Mapping
from typing import Self

import attrs

from controllers.cluster.render.acl import UserAcl
from controllers.cluster.render.names import TEMPLATE_HASH_LABEL, shard_of
from valkey_operator.api.cluster import ClusterState, NodeRole, ValkeyCluster
from valkey_operator.api.resources import PAUSED_ANNOTATION, VERSION_FLOOR
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.acl import UserRules

SLOT_COUNT = 16384

Version = tuple[int, int, int]


# --- slot ranges -------------------------------------------------------------------------------


@attrs.frozen(order=True)
class SlotRange:
    """Slots start..end, both inclusive, as Valkey writes them."""

    start: int
    end: int

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.start <= self.end < SLOT_COUNT:
            raise ValueError(f"invalid slot range {self.start}-{self.end}")

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


SlotRanges = tuple[SlotRange, ...]
"""Always normalized where this module returns it: sorted, disjoint, adjacent ranges merged."""

ALL_SLOTS: SlotRanges = (SlotRange(0, SLOT_COUNT - 1),)


def normalize(ranges: Iterable[SlotRange]) -> SlotRanges:
    """Sorted, with overlapping and adjacent ranges merged, so equal slot sets compare equal."""
    merged: list[SlotRange] = []
    for item in sorted(ranges):
        if merged and item.start <= merged[-1].end + 1:
            last = merged[-1]
            merged[-1] = SlotRange(last.start, max(last.end, item.end))
        else:
            merged.append(item)
    return tuple(merged)


def parse_slot_ranges(text: str) -> SlotRanges:
    """'0-5460,5462' (status spelling) or '0-10 20-30' (GETSLOTMIGRATIONS spelling) -> ranges."""
    ranges = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        start, _, end = part.partition("-")
        ranges.append(SlotRange(int(start), int(end or start)))
    return normalize(ranges)


def format_slot_ranges(ranges: Iterable[SlotRange]) -> str:
    """The status spelling: '0-5460,5462'; empty for no slots."""
    return ",".join(str(item) for item in normalize(ranges))


def slot_count(ranges: Iterable[SlotRange]) -> int:
    return sum(item.size for item in normalize(ranges))


def union(*groups: Iterable[SlotRange]) -> SlotRanges:
    return normalize(item for group in groups for item in group)


def subtract(ranges: Iterable[SlotRange], removed: Iterable[SlotRange]) -> SlotRanges:
    """The slots of ranges that are not in removed."""
    result: list[SlotRange] = []
    cuts = normalize(removed)
    for item in normalize(ranges):
        start = item.start
        for cut in cuts:
            if cut.end < start or cut.start > item.end:
                continue
            if cut.start > start:
                result.append(SlotRange(start, cut.start - 1))
            start = cut.end + 1
            if start > item.end:
                break
        if start <= item.end:
            result.append(SlotRange(start, item.end))
    return tuple(result)


def intersect(left: Iterable[SlotRange], right: Iterable[SlotRange]) -> SlotRanges:
    left_ranges = normalize(left)
    return subtract(left_ranges, subtract(left_ranges, right))


def even_split(shards: int) -> tuple[SlotRanges, ...]:
    """The bootstrap layout (`valkey.slots.even_ranges`, shared with the test bed) as slot ranges."""
    from valkey_operator.valkey.slots import even_ranges

    return tuple((SlotRange(start, end),) for start, end in even_ranges(shards))


@attrs.frozen
class Coverage:
    """How a set of slot claims covers the 16384 slots: what nobody claims, what several claim."""

    uncovered: SlotRanges
    contested: SlotRanges

    @property
    def complete(self) -> bool:
        """Every slot claimed exactly once."""
        return not self.uncovered and not self.contested


def coverage(claims: Iterable[Iterable[SlotRange]]) -> Coverage:
    """Sweep the claims (one normalized group per owner) once; O(ranges log ranges), never per slot."""
    events: list[tuple[int, int]] = []
    for group in claims:
        for item in normalize(group):
            events.append((item.start, 1))
            events.append((item.end + 1, -1))
    events.sort()
    uncovered: list[SlotRange] = []
    contested: list[SlotRange] = []
    depth, position, index = 0, 0, 0
    while position < SLOT_COUNT:
        while index < len(events) and events[index][0] == position:
            depth += events[index][1]
            index += 1
        following = events[index][0] if index < len(events) else SLOT_COUNT
        end = min(following, SLOT_COUNT) - 1
        if depth == 0:
            uncovered.append(SlotRange(position, end))
        elif depth > 1:
            contested.append(SlotRange(position, end))
        position = end + 1
    return Coverage(normalize(uncovered), normalize(contested))


# --- versions ----------------------------------------------------------------------------------


def parse_version(text: str | None) -> Version | None:
    """'9.0.1' -> (9, 0, 1); None (absent or not MAJOR.MINOR.PATCH) means 'not a Valkey we run'."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", text or "")
    if match is None:
        return None
    major, minor, patch = (int(group) for group in match.groups())
    return (major, minor, patch)


def format_version(version: Version | None) -> str | None:
    return None if version is None else ".".join(map(str, version))


def version_from_info(info: Mapping[str, object]) -> Version | None:
    """The binary's version from parsed `INFO server`: valkey_version only (Redis reports none)."""
    value = info.get("valkey_version")
    return parse_version(str(value)) if value is not None else None


def meets_floor(version: Version | None) -> bool:
    return version is not None and version >= VERSION_FLOOR


# --- what a node reports -----------------------------------------------------------------------


class NodeFlag(enum.StrEnum):
    """CLUSTER NODES flags the planner reads (others are kept verbatim)."""

    MYSELF = "myself"
    PRIMARY = "master"
    REPLICA = "slave"
    PFAIL = "fail?"
    FAIL = "fail"
    HANDSHAKE = "handshake"
    NOADDR = "noaddr"


@attrs.frozen(kw_only=True)
class KnownNode:
    """One line of CLUSTER NODES: another node (or itself) as one node sees it."""

    node_id: str
    ip: str | None
    """None when the node has no address ('noaddr', ':0')."""
    flags: frozenset[str] = frozenset()
    primary_id: str | None = None
    connected: bool = True
    slots: SlotRanges = ()
    pong_received_ms: int = 0
    """Unix milliseconds of the last PONG from that node (0: never, or the node itself)."""

    @property
    def failed(self) -> bool:
        """Agreed dead by the cluster (FAIL), not merely suspected (PFAIL)."""
        return NodeFlag.FAIL in self.flags

    @property
    def suspected(self) -> bool:
        return NodeFlag.PFAIL in self.flags

    @property
    def in_handshake(self) -> bool:
        """A MEET under way: the id is a temporary one, not a node's identity."""
        return NodeFlag.HANDSHAKE in self.flags

    @property
    def myself(self) -> bool:
        return NodeFlag.MYSELF in self.flags


def parse_cluster_nodes(text: str) -> tuple[KnownNode, ...]:
    """Parse CLUSTER NODES lines.

    Each line: '<id> <ip:port@cport[,host]> <flags> <primary|-> <ping> <pong> <epoch> <link> <slot>...'.

    Importing/migrating markers ('[5461->-<id>]') are skipped: atomic slot
    migration reports progress through CLUSTER GETSLOTMIGRATIONS instead.
    """
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address = fields[1].split("@")[0].split(",")[0]
        flags = frozenset(fields[2].split(","))
        host = None if NodeFlag.NOADDR in flags else address.rpartition(":")[0].strip("[]") or None
        slot_fields = [field for field in fields[8:] if not field.startswith("[")]
        nodes.append(
            KnownNode(
                node_id=fields[0],
                ip=host,
                flags=flags,
                primary_id=None if fields[3] == "-" else fields[3],
                connected=fields[7] == "connected",
                slots=parse_slot_ranges(" ".join(slot_fields)),
                pong_received_ms=int(fields[5]) if fields[5].isdigit() else 0,
            )
        )
    return tuple(nodes)


class MigrationOperation(enum.StrEnum):
    EXPORT = "EXPORT"
    IMPORT = "IMPORT"


TERMINAL_MIGRATION_STATES = frozenset({"success", "failed", "cancelled"})


@attrs.frozen(kw_only=True)
class SlotMigration:
    """One CLUSTER GETSLOTMIGRATIONS entry (Valkey 9 atomic slot migration), as this node reports it."""

    name: str
    operation: MigrationOperation
    slots: SlotRanges
    source_id: str | None
    """Only primaries of the participating shards report source and target."""
    target_id: str | None
    state: str
    """'success', 'failed', 'cancelled' are terminal; any other value is a migration under way."""
    message: str = ""
    last_update_time: int = 0

    @property
    def active(self) -> bool:
        return self.state not in TERMINAL_MIGRATION_STATES

    @property
    def failed(self) -> bool:
        return self.state in {"failed", "cancelled"}

    @classmethod
    def from_reply(cls, entry: Mapping[str, object]) -> Self:
        """From one entry of the reply, decoded to a str-keyed mapping (RESP2 pairs or RESP3 map)."""

        def text(key: str) -> str:
            value = entry.get(key)
            return value.decode() if isinstance(value, bytes) else str(value or "")

        return cls(
            name=text("name"),
            operation=MigrationOperation(text("operation").upper()),
            slots=parse_slot_ranges(text("slot_ranges")),
            source_id=text("source_node") or None,
            target_id=text("target_node") or None,
            state=text("state"),
            message=text("message"),
            last_update_time=int(text("last_update_time") or 0),
        )


@attrs.frozen(kw_only=True)
class NodeObservation:
    """What the Valkey server in one pod reported in this pass; every field but `reachable` may be unknown.

    Built by the observer from INFO server/replication, CLUSTER INFO, CLUSTER
    MYID, CLUSTER MYSHARDID, CLUSTER NODES and CLUSTER GETSLOTMIGRATIONS, each
    call with a bounded timeout. When the server could not be asked,
    `reachable` is False and `error` says why.
    """

    reachable: bool
    error: str | None = None
    version: Version | None = None
    """valkey_version from INFO server; None means not Valkey, or one too old to report it."""
    version_text: str | None = None
    """What the server reported, verbatim, for messages (e.g. 'redis_version 7.2.4')."""
    node_id: str | None = None
    role: NodeRole | None = None
    primary_id: str | None = None
    """For a replica: the node id of the primary it replicates (Valkey's view, not a label)."""
    shard_id: str | None = None
    """CLUSTER MYSHARDID: shared by a primary and its replicas."""
    slots: SlotRanges = ()
    """Slots this node serves as a primary, from its own CLUSTER NODES 'myself' line."""
    repl_offset: int = 0
    """master_repl_offset on a primary; the offset processed so far on a replica."""
    link_up: bool | None = None
    """master_link_status on a replica (None on a primary)."""
    cluster_ok: bool | None = None
    """cluster_state from CLUSTER INFO."""
    known_nodes: tuple[KnownNode, ...] = ()
    """CLUSTER NODES as this node sees the cluster, its own line included."""
    migrations: tuple[SlotMigration, ...] | None = ()
    """CLUSTER GETSLOTMIGRATIONS; None when the read failed (unknown: a job may be under way)."""
    config: Mapping[str, str] | None = None
    """CONFIG GET of every runtime tunable; None when not read (unknown, never "empty")."""
    acl: Mapping[str, UserRules] | None = None
    """ACL LIST in Valkey's normal form, by username; None when not read."""
    commands: Mapping[str, bool] | None = None
    """Whether the server knows each command the cluster's roles name; None when not read."""

    @classmethod
    def unreachable(cls, error: str) -> Self:
        return cls(reachable=False, error=error)

    @property
    def jobs(self) -> tuple[SlotMigration, ...]:
        """The migration jobs read (none when the read failed: ask `migrations is None` for that)."""
        return self.migrations or ()

    def knows(self, node_id: str) -> KnownNode | None:
        """This node's line about node_id, if it has one that is not a handshake placeholder."""
        for known in self.known_nodes:
            if known.node_id == node_id and not known.in_handshake:
                return known
        return None

    def handshaking_with(self, ip: str) -> bool:
        return any(known.in_handshake and known.ip == ip for known in self.known_nodes)

    @property
    def peers(self) -> tuple[KnownNode, ...]:
        """The other nodes this node knows (handshakes excluded)."""
        return tuple(
            known
            for known in self.known_nodes
            if not known.in_handshake and not known.myself and known.node_id != self.node_id
        )


# --- pods ----------------------------------------------------------------------------------------


class PodPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class PodObservation:
    """An owned pod as the informer cache shows it."""

    name: str
    shard: int | None
    """The shard label; None when absent or not a number (such a pod is reported, never acted on)."""
    template_hash: str | None
    phase: PodPhase
    ready: bool
    ip: str | None
    deleting: bool
    """deletionTimestamp is set: the pod still exists (and may still serve) until it is gone."""
    created: str
    """creationTimestamp (RFC 3339, sortable); with the name it orders a shard's pods deterministically."""
    uid: str = ""
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    created_at: float | None = None
    """creationTimestamp as Unix seconds (None when absent or unreadable)."""
    failure: str | None = None
    """For an ended pod: how its container ended (exit code, reason, the message it left)."""
    found_version: str | None = None
    """For an ended pod: the Valkey version its server printed before exiting, if any."""

    @property
    def order(self) -> tuple[str, str]:
        return (self.created, self.name)

    @property
    def live(self) -> bool:
        """Counts toward the shard's desired pods: not going away and not terminated for good."""
        return not self.deleting and self.phase not in {PodPhase.SUCCEEDED, PodPhase.FAILED}

    @property
    def never_started(self) -> bool:
        """Pending pods have not run their server yet, so they carry no node identity."""
        return self.phase is PodPhase.PENDING

    @property
    def ended(self) -> bool:
        """Failed or Succeeded: with restartPolicy Never its server is gone for good, like a deleted pod's."""
        return self.phase in {PodPhase.SUCCEEDED, PodPhase.FAILED}

    @classmethod
    def from_pod(cls, pod: Obj) -> Self:
        """From a decoded Pod; tolerant of the fields a young pod does not have yet."""
        metadata = pod.get("metadata", {})
        labels = metadata.get("labels") or {}
        status = pod.get("status") or {}
        conditions = status.get("conditions") or []
        try:
            phase = PodPhase(status.get("phase", "Pending"))
        except ValueError:
            phase = PodPhase.UNKNOWN
        created = metadata.get("creationTimestamp", "")
        ended = phase in {PodPhase.SUCCEEDED, PodPhase.FAILED}
        return cls(
            name=metadata["name"],
            shard=shard_of(labels),
            template_hash=labels.get(TEMPLATE_HASH_LABEL),
            phase=phase,
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            ip=status.get("podIP") or None,
            deleting=metadata.get("deletionTimestamp") is not None,
            created=created,
            uid=metadata.get("uid", ""),
            annotations=dict(metadata.get("annotations") or {}),
            created_at=_unix_seconds(created),
            failure=_termination(status) if ended else None,
            found_version=_printed_version(status) if ended else None,
        )


def _unix_seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_VERSION_IN_LOG = re.compile(r"\(Version (\d+\.\d+\.\d+)\)|Valkey version=(\d+\.\d+\.\d+)")


def _terminations(status: Obj) -> Iterable[tuple[str, Obj]]:
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated:
            yield container.get("name", ""), terminated


def _printed_version(status: Obj) -> str | None:
    """The version a server printed in its termination message (FallbackToLogsOnError)."""
    for _name, terminated in _terminations(status):
        match = _VERSION_IN_LOG.search(terminated.get("message") or "")
        if match:
            return match.group(1) or match.group(2)
    return None


def _termination(status: Obj) -> str:
    for name, terminated in _terminations(status):
        reason = terminated.get("reason") or "terminated"
        text = f"container {name} exited with code {terminated.get('exitCode')} ({reason})"
        message = (terminated.get("message") or "").strip()
        return f"{text}: {message[:200]}" if message else text
    return str(status.get("reason") or "Failed")


@attrs.frozen(kw_only=True)
class Observation:
    """Everything one pass observed: the pods and, keyed by pod name, their servers' reports.

    The observer probes every pod that is Ready or going away (a terminating
    pod may still serve); a pod absent from `nodes` was not probed. A Ready pod
    that was not probed counts as unreachable.
    """

    pods: tuple[PodObservation, ...]
    nodes: Mapping[str, NodeObservation] = attrs.field(factory=dict)
    recorded_state: ClusterState | None = None
    """status.state as stored before this pass: tells a first bootstrap (Creating) from a later
    change (Updating), and a rebuilt shard from a new one (data lost)."""
    now: float = 0.0
    """Wall-clock seconds (Unix time) of the pass: backoff after failed slot migrations is counted
    from the time the migration log records, so an operator restart does not reset it."""
    objects: Mapping[str, Obj | None] = attrs.field(factory=dict)
    """Each rendered owned object (Service, ConfigMap, Secret, PDBs) as the cache holds it, by
    `OwnedObject.key`; None when absent."""
    awaiting: frozenset[str] = frozenset()
    """Pods this operator created or deleted that the cache does not show so yet. Until it does,
    no pod is created or deleted (client-go's expectations): a lagging cache would otherwise ask
    for a duplicate, or let a second pod go while the first is still leaving."""
    recorded_config_hash: str | None = None
    """status.configHash as stored: kept until every node runs the current settings."""
    recorded_image: str | None = None
    """status.currentImage as stored: kept until every pod runs the current template."""

    def node(self, pod: str) -> NodeObservation | None:
        return self.nodes.get(pod)


# --- what is wanted ------------------------------------------------------------------------------


@attrs.frozen
class OwnedObject:
    """An object the cluster owns besides its pods, as rendered: server-side applied when it drifts."""

    resource: Resource
    body: Obj

    @property
    def key(self) -> str:
        return object_key(self.resource.kind, self.body["metadata"]["name"])


def object_key(kind: str, name: str) -> str:
    return f"{kind}/{name}"


@attrs.frozen
class DesiredUser:
    """A spec.acl user as rendered, and the role commands it names (each must be one Valkey knows)."""

    user: UserAcl
    commands: tuple[tuple[str, str], ...] = ()
    """(role, command) for every explicit command rule of the user's roles."""


@attrs.frozen(kw_only=True)
class DesiredAcl:
    internal: tuple[UserAcl, ...] = ()
    """default (disabled), the admin and the replication user: always present, never deleted."""
    users: tuple[DesiredUser, ...] = ()
    secret: str = ""
    """The owned Secret whose `key` holds the startup ACL file (it is among Desired.objects)."""
    key: str = ""


@attrs.frozen(kw_only=True)
class Desired:
    """The resolved spec the planner steers toward."""

    shards: int
    replicas_per_shard: int
    template_hash: str
    """The pod-template hash current pods should carry (from the renderer)."""
    image: str
    """The image reference the pods run, named in version-floor messages."""
    paused: bool = False
    """The paused annotation: plan nothing, still report status."""
    config_hash: str = ""
    """The resolved config's settings hash: status.configHash once every node runs it."""
    runtime: Mapping[str, str] = attrs.field(factory=dict)
    """Every runtime tunable -> the value each node must run (the config's, the operator's
    default, else Valkey's own default), spelled as CONFIG SET takes it."""
    pod_annotations: Mapping[str, str] = attrs.field(factory=dict)
    """spec.podAnnotations: new and changed keys are patched onto live pods."""
    acl: DesiredAcl = DesiredAcl()
    objects: tuple[OwnedObject, ...] = ()

    @property
    def pods_per_shard(self) -> int:
        return 1 + self.replicas_per_shard

    @classmethod
    def of(
        cls,
        cluster: ValkeyCluster,
        *,
        template_hash: str,
        image: str,
        config_hash: str = "",
        runtime: Mapping[str, str] | None = None,
        acl: DesiredAcl | None = None,
        objects: tuple[OwnedObject, ...] = (),
    ) -> Self:
        return cls(
            shards=cluster.spec.shards,
            replicas_per_shard=cluster.spec.replicas_per_shard,
            template_hash=template_hash,
            image=image,
            paused=cluster.metadata.annotations.get(PAUSED_ANNOTATION, "").lower() == "true",
            config_hash=config_hash,
            runtime=dict(runtime or {}),
            pod_annotations=dict(cluster.spec.pod_annotations),
            acl=acl or DesiredAcl(),
            objects=objects,
        )
