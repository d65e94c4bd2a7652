"""ValkeyConfig: a named profile (image, resources, valkey.conf tunables), maybe inheriting (SPEC 1.2)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar

import attrs

from valkey_operator.api import tunables
from valkey_operator.api.convert import Model
from valkey_operator.api.fields import (
    Rule,
    cel_list,
    conditions,
    described,
    item,
    lit,
    name_ref,
    observed_generation,
    rule,
    schema,
)
from valkey_operator.api.limits import MAX_NAME, MAX_VALKEY_SETTINGS, MAX_VALKEY_VALUE
from valkey_operator.api.meta import Condition, ObjectMeta
from valkey_operator.api.resources import VALKEY_CONFIGS
from valkey_operator.core.resource import Resource

# The official valkey image's user; the operator applies it where podSecurity leaves an id unset.
DEFAULT_POD_ID = 999

RESOLVED = "Resolved"
"""The config's condition: whether its base chain and image resolve."""


_ALLOWED = cel_list(sorted(tunables.TUNABLES))
_MAX_ID = 2147483647


@attrs.frozen(kw_only=True)
class ResourceLimits(Model):
    """Container limits; memory defaults to the memory request, cpu to none (SPEC 1.9)."""

    cpu: str | None = attrs.field(
        default=None,
        metadata=schema("CPU limit. Unset (the default): no CPU limit.", quantity="500m or 2"),
    )
    memory: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Memory limit. Unset: the memory request. Unless the chain sets maxmemory, "
            "the operator sets maxmemory to about 75% of the memory limit.",
            quantity="512Mi or 2Gi",
        ),
    )


def _limit_rule(resource: str) -> Rule:
    """A limit below its request is rejected here rather than by the API server at pod creation."""
    request, limit = f"self.{resource}", f"self.limits.{resource}"
    both = f"has({request}) && has(self.limits) && has({limit})"
    valid = f"isQuantity(string({request})) && isQuantity(string({limit}))"
    below = f"quantity(string({limit})).isLessThan(quantity(string({request})))"
    return rule(
        f"!({both} && {valid} && {below})",
        f"limits.{resource} must be at least the {resource} request",
        message_expression=lit(f"limits.{resource} ")
        + f" + string({limit}) + "
        + lit(f" is below the {resource} request ")
        + f" + string({request})",
        field_path=f".limits.{resource}",
    )


LIMIT_RULES = (_limit_rule("cpu"), _limit_rule("memory"))


@attrs.frozen(kw_only=True)
class Resources(Model):
    """`cpu` and `memory` are requests; `limits` overrides the derived limits (SPEC 1.9)."""

    cpu: str | None = attrs.field(
        default=None,
        metadata=schema(
            "CPU request of the Valkey container as a Kubernetes quantity, for example 500m "
            "or 2. No CPU limit follows from it.",
            quantity="500m or 2",
        ),
    )
    memory: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Memory request of the Valkey container as a Kubernetes quantity, for example 1Gi; "
            "also the memory limit unless limits.memory is set.",
            quantity="512Mi or 2Gi",
        ),
    )
    limits: ResourceLimits | None = attrs.field(
        default=None, metadata=schema("Container limits, each at least its request.")
    )


@attrs.frozen(kw_only=True)
class PodSecurity(Model):
    run_as_user: int | None = attrs.field(
        default=None,
        metadata=schema(
            "User id the Valkey container runs as (default 999). At least 1: the pods never run as root.",
            minimum=1,
            maximum=_MAX_ID,
        ),
    )
    run_as_group: int | None = attrs.field(
        default=None,
        metadata=schema(
            "Primary group id of the Valkey container (default 999). At least 1.", minimum=1, maximum=_MAX_ID
        ),
    )
    fs_group: int | None = attrs.field(
        default=None,
        metadata=schema(
            "Group id that owns the pod's volumes (default 999). At least 1.", minimum=1, maximum=_MAX_ID
        ),
    )


class PersistenceMode(enum.StrEnum):
    """What a node keeps across a restart (SPEC 1.6)."""

    NONE = "none"
    RDB = "rdb"
    AOF = "aof"


class Appendfsync(enum.StrEnum):
    EVERYSEC = "everysec"
    ALWAYS = "always"


class ReclaimPolicy(enum.StrEnum):
    """What happens to the claims when their cluster is deleted."""

    DELETE = "Delete"
    RETAIN = "Retain"


_SIZE_SHRINK = rule(
    "!(isQuantity(string(self)) && isQuantity(string(oldSelf))) || "
    "!quantity(string(self)).isLessThan(quantity(string(oldSelf)))",
    "size may grow but never shrink (a volume claim cannot shrink)",
    message_expression=lit("size may grow but never shrink (a volume claim cannot shrink): was ")
    + " + string(oldSelf) + "
    + lit(", got ")
    + " + string(self)",
)


@attrs.frozen(kw_only=True)
class PersistenceSpec(Model):
    """Each field unset inherits from the base config; at the root of the chain: none, Delete, everysec."""

    mode: PersistenceMode | None = attrs.field(
        default=None,
        metadata=schema(
            "none (the default: a cache, nothing survives a restart), rdb (snapshots: a node keeps "
            "everything up to its last completed save) or aof (an append-only file: a node keeps every "
            "acknowledged write with appendfsync always, all but at most about one second of them with "
            "everysec). Unset: the base config's mode, none at the root of the chain. A change rolls "
            "every cluster that resolves through the config, onto new claims (a claim written in one "
            "mode is never started in the other). With rdb or aof each Valkey pod has a "
            "PersistentVolumeClaim of its own holding its data and nodes.conf.",
            max_length=8,
        ),
    )
    size: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Size of each Valkey pod's claim, a Kubernetes quantity such as 10Gi. Required for rdb "
            "and aof (set here or in the base chain). It may grow (the claims are patched; whether "
            "they grow is the StorageClass's), never shrink: admission refuses a smaller value on "
            "this object, and a cluster reports ClaimShrinkRefused for one through the chain.",
            quantity="10Gi",
            rules=[_SIZE_SHRINK],
        ),
    )
    storage_class_name: str | None = attrs.field(
        default=None,
        metadata=name_ref(
            "StorageClass of the claims. Unset: the cluster's default StorageClass.",
            "StorageClass",
        ),
    )
    appendfsync: Appendfsync | None = attrs.field(
        default=None,
        metadata=schema(
            "aof only: everysec (the default; fsync once a second) or always (fsync before each "
            "write is acknowledged). Refused unless the mode is aof, set here or inherited through "
            "baseRef; ignored when the resolved mode is not aof.",
            max_length=16,
        ),
    )
    reclaim_policy: ReclaimPolicy | None = attrs.field(
        default=None,
        metadata=schema(
            "Delete (the default): the claims are owned by their ValkeyCluster and deleted with it; "
            "Retain: they have no owner and are left behind when the cluster is deleted (a new "
            "cluster of the same name and namespace starts on them). Applies to claims created "
            "after a change.",
            max_length=16,
        ),
    )


_PERSISTENCE_RULES = (
    rule(
        "!has(self.persistence) || !has(self.persistence.mode) || self.persistence.mode == 'none' || "
        "has(self.persistence.size) || has(self.baseRef)",
        "persistence.size is required when persistence.mode is rdb or aof (a config with baseRef may "
        "inherit it from its base)",
        field_path=".persistence.size",
    ),
    rule(
        "!has(self.persistence) || !has(self.persistence.appendfsync) || "
        "(has(self.persistence.mode) ? self.persistence.mode == 'aof' : has(self.baseRef))",
        "persistence.appendfsync applies only to persistence.mode aof: set mode aof (a config with "
        "baseRef may inherit it from its base) or remove appendfsync",
        field_path=".persistence.appendfsync",
    ),
)


_VALKEY_RULES = (
    rule(
        f"self.all(k, k.lowerAscii() in {_ALLOWED})",
        "may only set the documented valkey.conf tunables (see docs/reference/valkeyconfig.md); "
        "ports, TLS, persistence, users and auth, replication and cluster wiring are set by the "
        "operator",
        message_expression=lit("may only set the documented valkey.conf tunables; not allowed: ")
        + f" + self.filter(k, !(k.lowerAscii() in {_ALLOWED}))[0] + "
        + lit(
            " (ports, TLS, persistence, users and auth, replication and cluster wiring are set by "
            "the operator; see docs/reference/valkeyconfig.md)"
        ),
    ),
    rule(
        "self.all(k, !self[k].contains('\\n') && !self[k].contains('\\r'))",
        "values must be a single line: no carriage return (CR) or line feed (LF)",
        message_expression=lit(
            "values must be a single line (no carriage return or line feed); offending directives: "
        )
        + " + self.filter(k, self[k].contains('\\n') || self[k].contains('\\r'))[0]",
    ),
    rule(
        "self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",
        "names the same directive twice (directive names are case-insensitive)",
        message_expression=lit("names the directive ")
        + " + self.filter(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() > 1)[0]"
        + ".lowerAscii() + "
        + lit(" more than once (directive names are case-insensitive)"),
    ),
)


@described(
    "ValkeyConfigSpec is a named profile: the image, container resources and valkey.conf settings of "
    "the clusters that use it. It may inherit from a base config (baseRef): child over parent, key by "
    "key; imageRef from the nearest config in the chain that sets it; at most "
    "8 configs deep. At least one of imageRef and baseRef is required. A change of the image, resources "
    "or podSecurity rolls every cluster that resolves through the config: shard by shard, replicas "
    "first, the primary handed over with a coordinated failover.",
    rules=[
        rule(
            "has(self.imageRef) || has(self.baseRef)",
            "must set imageRef (the ValkeyImage to run), baseRef (a ValkeyConfig to inherit from), or both",
        ),
        *_PERSISTENCE_RULES,
    ],
)
@attrs.frozen(kw_only=True)
class ValkeyConfigSpec(Model):
    image_ref: str | None = attrs.field(
        default=None,
        metadata=name_ref(
            "Name of the ValkeyImage to run. Optional when baseRef is set: the image then comes from "
            "the nearest config in the base chain that sets imageRef. If the image does not exist, "
            "the config reports Resolved=False (ImageNotFound) and clusters using it do not progress.",
            "ValkeyImage",
        ),
    )
    base_ref: str | None = attrs.field(
        default=None,
        metadata=name_ref(
            "Name of another ValkeyConfig to inherit from. This config's settings override the "
            "base's, key by key. A missing base, a cycle or a chain deeper than 8 is reported in "
            "status (BaseNotFound, BaseCycle, TooDeep).",
            "ValkeyConfig",
        ),
    )
    resources: Resources | None = attrs.field(
        default=None,
        metadata=schema(
            "Container resources of the Valkey container. cpu and memory are requests; the memory "
            "limit defaults to the memory request and there is no CPU limit unless limits.cpu is set "
            "(a CPU limit throttles a latency-sensitive server). Merged key by key over the base "
            "config's resources (limits too).",
            rules=LIMIT_RULES,
        ),
    )
    valkey: Mapping[str, str] = attrs.field(
        factory=dict,
        metadata=schema(
            "valkey.conf directives for the Valkey server, directive name to value (for example maxmemory: "
            "2gb, maxmemory-policy: allkeys-lru). Only the documented tunables are accepted (memory and "
            "eviction, lazy freeing, timeouts and keepalive, slow log and latency, encoding thresholds, "
            "defragmentation, io-threads, keyspace notifications, and a few cluster tunables); names are "
            "matched case-insensitively, values are single lines. Everything else (ports, TLS, persistence, "
            "users and auth, replication and cluster wiring, modules, renamed commands) belongs to the "
            "operator and is rejected. Merged key by key over the base config's settings. When maxmemory is "
            "set nowhere in the chain the operator sets it to about 75% of the memory limit. A change is "
            "applied to live nodes with CONFIG SET and confirmed with CONFIG GET (Valkey 9.0 and 9.1 accept "
            "every allowed directive at runtime); a directive removed from the chain returns to its default.",
            max_properties=MAX_VALKEY_SETTINGS,
            items=item(
                "The directive's value, exactly as valkey.conf takes it (one line).",
                max_length=MAX_VALKEY_VALUE,
            ),
            rules=_VALKEY_RULES,
        ),
    )
    pod_security: PodSecurity | None = attrs.field(
        default=None,
        metadata=schema(
            "User and group ids of the Valkey pods. Each unset id defaults to 999 (the user of the "
            "official valkey image), applied by the operator. Pods satisfy the restricted Pod Security "
            "Standard either way."
        ),
    )
    persistence: PersistenceSpec | None = attrs.field(
        default=None,
        metadata=schema(
            "Whether the nodes keep their data and cluster identity across restarts. Unset (or mode "
            "none): a cache, nothing is kept. Merged field by field over the base config's "
            "persistence. A change of mode, appendfsync or storageClassName rolls every cluster that "
            "resolves through the config; a size change does not. With rdb or aof every Valkey pod "
            "runs on a PersistentVolumeClaim of its own, and a pod lost without being planned comes "
            "back on it as the same node.",
            empty_is_none=True,
        ),
    )


@attrs.frozen(kw_only=True)
class ResolvedImage(Model):
    """The ValkeyImage the chain resolved to, copied so readers need not look it up."""

    name: str = attrs.field(metadata=schema("Name of the ValkeyImage.", max_length=MAX_NAME, required=False))
    repository: str = attrs.field(
        metadata=schema("Its container image repository.", max_length=512, required=False)
    )
    tag: str = attrs.field(metadata=schema("Its container image tag.", max_length=128, required=False))
    version: str = attrs.field(metadata=schema("Its declared Valkey version.", max_length=32, required=False))
    digest: str | None = attrs.field(
        default=None, metadata=schema("Its declared digest, when it has one.", max_length=71)
    )


@attrs.frozen(kw_only=True)
class ResolvedPersistence(Model):
    """The persistence the chain resolved to (defaults filled in), for readers and the cluster side."""

    mode: PersistenceMode = attrs.field(
        metadata=schema("rdb or aof (a config resolving to none shows no persistence).", max_length=8)
    )
    size: str = attrs.field(metadata=schema("Size of each claim.", max_length=64))
    storage_class_name: str | None = attrs.field(
        default=None, metadata=schema("StorageClass of the claims; unset: the default.", max_length=MAX_NAME)
    )
    appendfsync: Appendfsync | None = attrs.field(
        default=None, metadata=schema("The fsync policy (aof only).", max_length=16)
    )
    reclaim_policy: ReclaimPolicy = attrs.field(
        metadata=schema("Delete or Retain: what happens to the claims with their cluster.", max_length=16)
    )


@described("ValkeyConfigStatus is the result of resolving the config's base chain, written by the operator.")
@attrs.frozen(kw_only=True)
class ValkeyConfigStatus(Model):
    observed_generation: int | None = observed_generation()
    resolved_image: ResolvedImage | None = attrs.field(
        default=None,
        metadata=schema("The ValkeyImage the chain resolved to, copied so readers need not look it up."),
    )
    settings_hash: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Hash of the effective settings (image, resources, podSecurity, valkey); changes exactly "
            "when one of them does. A cluster's status.configHash takes this value once every node "
            "runs these settings.",
            max_length=128,
        ),
    )
    persistence: ResolvedPersistence | None = attrs.field(
        default=None,
        metadata=schema(
            "The persistence the chain resolves to, field by field with the defaults filled in; "
            "absent when it resolves to none (a cache). Admission stops a smaller size on one "
            "object, not a size that shrinks through the chain (baseRef pointed at a smaller base, "
            "or a size removed so a smaller one shows through): that shows here, and a cluster whose "
            "claims are larger reports ClaimShrinkRefused and keeps them."
        ),
    )
    conditions: tuple[Condition, ...] = conditions(
        "Conditions: Resolved (True when the base chain and image resolve; False with reason "
        "ImageNotFound, BaseNotFound, BaseCycle, TooDeep, LimitBelowRequest or "
        "PersistenceInvalid)."
    )


@described(
    "ValkeyConfig is a named profile of image, container resources and valkey.conf settings that "
    "ValkeyClusters use (spec.configRef); it may inherit from a base config. Protected from "
    "deletion while a cluster or another config references it."
)
@attrs.frozen(kw_only=True)
class ValkeyConfig(Model):
    RESOURCE: ClassVar[Resource] = VALKEY_CONFIGS

    metadata: ObjectMeta
    spec: ValkeyConfigSpec
    status: ValkeyConfigStatus | None = None
