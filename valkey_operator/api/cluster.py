"""ValkeyCluster: a sharded Valkey cluster built from a ValkeyConfig (SPEC 1.4)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar, Self

import attrs

from valkey_operator.api.meta import (
    Condition,
    ObjectMeta,
    kind_fields,
    omitempty,
    parse_list,
    parse_map,
    parse_optional,
    render_kind,
)
from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

# Schema defaults; repeated here so a model built in code means what the server would store.
DEFAULT_SHARDS = 3
DEFAULT_REPLICAS_PER_SHARD = 1

# The cluster's condition types.
READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"


class KeyAccess(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    READWRITE = "readwrite"


class ZoneSpread(enum.StrEnum):
    """Unset in a spec means the operator config's defaultZoneSpread."""

    BEST_EFFORT = "bestEffort"
    REQUIRED = "required"


class TolerationOperator(enum.StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class ClusterState(enum.StrEnum):
    CREATING = "Creating"
    ACTIVE = "Active"
    UPDATING = "Updating"
    FAILED = "Failed"


class NodeRole(enum.StrEnum):
    PRIMARY = "primary"
    REPLICA = "replica"


@attrs.frozen(kw_only=True)
class KeyPattern:
    """A key glob; access defaults to readwrite as in the schema."""

    pattern: str
    access: KeyAccess = KeyAccess.READWRITE

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(pattern=obj["pattern"], access=KeyAccess(obj.get("access", KeyAccess.READWRITE)))

    def to_dict(self) -> Obj:
        return omitempty(pattern=self.pattern, access=self.access)


@attrs.frozen(kw_only=True)
class Permission:
    """One ACL selector: a role's commands limited to these keys and channels."""

    role_ref: str
    keys: tuple[KeyPattern, ...] = ()
    channels: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            role_ref=obj["roleRef"],
            keys=parse_list(obj, "keys", KeyPattern.from_dict),
            channels=tuple(obj.get("channels") or ()),
        )

    def to_dict(self) -> Obj:
        return omitempty(roleRef=self.role_ref, keys=self.keys, channels=self.channels)


@attrs.frozen(kw_only=True)
class AclUser:
    """`password_hashes` are lowercase hex SHA-256; listing old and new rotates without downtime."""

    username: str
    password_hashes: tuple[str, ...] = ()
    permissions: tuple[Permission, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            username=obj["username"],
            password_hashes=tuple(obj.get("passwordHashes") or ()),
            permissions=parse_list(obj, "permissions", Permission.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            username=self.username, passwordHashes=self.password_hashes, permissions=self.permissions
        )


@attrs.frozen(kw_only=True)
class Tls:
    secret_ref: str

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(secret_ref=obj["secretRef"])

    def to_dict(self) -> Obj:
        return omitempty(secretRef=self.secret_ref)


@attrs.frozen(kw_only=True)
class Toleration:
    """The core Toleration fields, passed to pods verbatim."""

    key: str | None = None
    operator: TolerationOperator | None = None
    value: str | None = None
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            key=obj.get("key"),
            operator=parse_optional(obj, "operator", TolerationOperator),
            value=obj.get("value"),
            effect=parse_optional(obj, "effect", TaintEffect),
            toleration_seconds=obj.get("tolerationSeconds"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            key=self.key,
            operator=self.operator,
            value=self.value,
            effect=self.effect,
            tolerationSeconds=self.toleration_seconds,
        )


@attrs.frozen(kw_only=True)
class Placement:
    zones: tuple[str, ...] = ()
    zone_spread: ZoneSpread | None = None
    node_selector: Mapping[str, str] = attrs.field(factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    priority_class_name: str | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            zones=tuple(obj.get("zones") or ()),
            zone_spread=parse_optional(obj, "zoneSpread", ZoneSpread),
            node_selector=parse_map(obj, "nodeSelector"),
            tolerations=parse_list(obj, "tolerations", Toleration.from_dict),
            priority_class_name=obj.get("priorityClassName"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            zones=self.zones,
            zoneSpread=self.zone_spread,
            nodeSelector=self.node_selector,
            tolerations=self.tolerations,
            priorityClassName=self.priority_class_name,
        )


@attrs.frozen(kw_only=True)
class ValkeyClusterSpec:
    config_ref: str
    shards: int = DEFAULT_SHARDS
    replicas_per_shard: int = DEFAULT_REPLICAS_PER_SHARD
    acl: tuple[AclUser, ...] = ()
    tls: Tls | None = None
    placement: Placement | None = None
    pod_annotations: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            config_ref=obj["configRef"],
            shards=obj.get("shards", DEFAULT_SHARDS),
            replicas_per_shard=obj.get("replicasPerShard", DEFAULT_REPLICAS_PER_SHARD),
            acl=parse_list(obj, "acl", AclUser.from_dict),
            tls=parse_optional(obj, "tls", Tls.from_dict),
            placement=parse_optional(obj, "placement", Placement.from_dict),
            pod_annotations=parse_map(obj, "podAnnotations"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            configRef=self.config_ref,
            shards=self.shards,
            replicasPerShard=self.replicas_per_shard,
            acl=self.acl,
            tls=self.tls,
            placement=self.placement,
            podAnnotations=self.pod_annotations,
        )


@attrs.frozen(kw_only=True)
class NodeStatus:
    """One Valkey node (pod) as last observed; fields other than pod and shard appear once known."""

    pod: str
    shard: int
    role: NodeRole | None = None
    node_id: str | None = None
    ip: str | None = None
    version: str | None = None
    slots: str | None = None
    """Slot ranges a primary owns, like "0-5460"."""

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            pod=obj["pod"],
            shard=obj["shard"],
            role=parse_optional(obj, "role", NodeRole),
            node_id=obj.get("nodeId"),
            ip=obj.get("ip"),
            version=obj.get("version"),
            slots=obj.get("slots"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            pod=self.pod,
            shard=self.shard,
            role=self.role,
            nodeId=self.node_id,
            ip=self.ip,
            version=self.version,
            slots=self.slots,
        )


@attrs.frozen(kw_only=True)
class RolloutStatus:
    """A rolling update under way."""

    shards_updated: int = 0
    shards: int = 0
    shard: int = 0
    step: str = ""
    started_at: str | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            shards_updated=obj.get("shardsUpdated", 0),
            shards=obj.get("shards", 0),
            shard=obj.get("shard", 0),
            step=obj.get("step", ""),
            started_at=obj.get("startedAt"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            shardsUpdated=self.shards_updated,
            shards=self.shards,
            shard=self.shard,
            step=self.step,
            startedAt=self.started_at,
        )


@attrs.frozen(kw_only=True)
class TlsStatus:
    """The certificate material of a TLS cluster, as the operator last saw and confirmed it."""

    secret_hash: str | None = None
    changed_at: str | None = None
    not_after: str | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            secret_hash=obj.get("secretHash"), changed_at=obj.get("changedAt"), not_after=obj.get("notAfter")
        )

    def to_dict(self) -> Obj:
        return omitempty(secretHash=self.secret_hash, changedAt=self.changed_at, notAfter=self.not_after)


@attrs.frozen(kw_only=True)
class ValkeyClusterStatus:
    state: ClusterState | None = None
    message: str | None = None
    endpoint: str | None = None
    """The seed address clients connect to: the client Service, serving members only."""
    observed_generation: int | None = None
    shards: int | None = None
    ready_shards: int | None = None
    ready_nodes: int | None = None
    current_image: str | None = None
    config_hash: str | None = None
    nodes: tuple[NodeStatus, ...] = ()
    rollout: RolloutStatus | None = None
    max_primaries_per_node: int | None = None
    tls: TlsStatus | None = None
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            rollout=RolloutStatus.from_dict(obj["rollout"]) if obj.get("rollout") else None,
            tls=TlsStatus.from_dict(obj["tls"]) if obj.get("tls") else None,
            max_primaries_per_node=obj.get("maxPrimariesPerNode"),
            state=parse_optional(obj, "state", ClusterState),
            message=obj.get("message"),
            endpoint=obj.get("endpoint"),
            observed_generation=obj.get("observedGeneration"),
            shards=obj.get("shards"),
            ready_shards=obj.get("readyShards"),
            ready_nodes=obj.get("readyNodes"),
            current_image=obj.get("currentImage"),
            config_hash=obj.get("configHash"),
            nodes=parse_list(obj, "nodes", NodeStatus.from_dict),
            conditions=parse_list(obj, "conditions", Condition.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            state=self.state,
            message=self.message,
            endpoint=self.endpoint,
            observedGeneration=self.observed_generation,
            shards=self.shards,
            readyShards=self.ready_shards,
            readyNodes=self.ready_nodes,
            currentImage=self.current_image,
            configHash=self.config_hash,
            nodes=self.nodes,
            rollout=self.rollout,
            maxPrimariesPerNode=self.max_primaries_per_node,
            tls=self.tls,
            conditions=self.conditions,
        )


@attrs.frozen(kw_only=True)
class ValkeyCluster:
    RESOURCE: ClassVar[Resource] = VALKEY_CLUSTERS

    metadata: ObjectMeta
    spec: ValkeyClusterSpec
    status: ValkeyClusterStatus | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(**kind_fields(obj, ValkeyClusterSpec.from_dict, ValkeyClusterStatus.from_dict))

    def to_dict(self) -> Obj:
        return render_kind(self.RESOURCE.kind, self.metadata, self.spec, self.status)
