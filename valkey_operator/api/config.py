"""ValkeyConfig: a named profile (image, resources, valkey.conf tunables), maybe inheriting (SPEC 1.2)."""

from __future__ import annotations

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
        )
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
    conditions: tuple[Condition, ...] = conditions(
        "Conditions: Resolved (True when the base chain and image resolve; False with reason "
        "ImageNotFound, BaseNotFound, BaseCycle, TooDeep or LimitBelowRequest)."
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
