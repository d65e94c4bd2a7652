"""ValkeyConfig: a named profile (image, resources, valkey.conf tunables), maybe inheriting (SPEC 1.2)."""

from __future__ import annotations

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
from valkey_operator.api.resources import VALKEY_CONFIGS
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

# The official valkey image's user; the operator applies it where podSecurity leaves an id unset.
DEFAULT_POD_ID = 999

RESOLVED = "Resolved"
"""The config's condition: whether its base chain and image resolve."""


def quantity(value: str | int | None) -> str | None:
    """Quantities are int-or-string in the schema; the models keep the string form."""
    return None if value is None else str(value)


@attrs.frozen(kw_only=True)
class ResourceLimits:
    """Container limits; memory defaults to the memory request, cpu to none (SPEC 1.9)."""

    cpu: str | None = None
    memory: str | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(cpu=quantity(obj.get("cpu")), memory=quantity(obj.get("memory")))

    def to_dict(self) -> Obj:
        return omitempty(cpu=self.cpu, memory=self.memory)


@attrs.frozen(kw_only=True)
class Resources:
    """`cpu` and `memory` are requests; `limits` overrides the derived limits."""

    cpu: str | None = None
    memory: str | None = None
    limits: ResourceLimits | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            cpu=quantity(obj.get("cpu")),
            memory=quantity(obj.get("memory")),
            limits=parse_optional(obj, "limits", ResourceLimits.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(cpu=self.cpu, memory=self.memory, limits=self.limits)


@attrs.frozen(kw_only=True)
class PodSecurity:
    run_as_user: int | None = None
    run_as_group: int | None = None
    fs_group: int | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            run_as_user=obj.get("runAsUser"),
            run_as_group=obj.get("runAsGroup"),
            fs_group=obj.get("fsGroup"),
        )

    def to_dict(self) -> Obj:
        return omitempty(runAsUser=self.run_as_user, runAsGroup=self.run_as_group, fsGroup=self.fs_group)


@attrs.frozen(kw_only=True)
class ValkeyConfigSpec:
    image_ref: str | None = None
    base_ref: str | None = None
    resources: Resources | None = None
    valkey: Mapping[str, str] = attrs.field(factory=dict)
    pod_security: PodSecurity | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            image_ref=obj.get("imageRef"),
            base_ref=obj.get("baseRef"),
            resources=parse_optional(obj, "resources", Resources.from_dict),
            valkey=parse_map(obj, "valkey"),
            pod_security=parse_optional(obj, "podSecurity", PodSecurity.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            imageRef=self.image_ref,
            baseRef=self.base_ref,
            resources=self.resources,
            valkey=self.valkey,
            podSecurity=self.pod_security,
        )


@attrs.frozen(kw_only=True)
class ResolvedImage:
    """The ValkeyImage the chain resolved to, copied so readers need not look it up."""

    name: str
    repository: str
    tag: str
    version: str
    digest: str | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            name=obj["name"],
            repository=obj["repository"],
            tag=obj["tag"],
            version=obj["version"],
            digest=obj.get("digest"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            name=self.name, repository=self.repository, tag=self.tag, version=self.version, digest=self.digest
        )


@attrs.frozen(kw_only=True)
class ValkeyConfigStatus:
    observed_generation: int | None = None
    resolved_image: ResolvedImage | None = None
    settings_hash: str | None = None
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            observed_generation=obj.get("observedGeneration"),
            resolved_image=parse_optional(obj, "resolvedImage", ResolvedImage.from_dict),
            settings_hash=obj.get("settingsHash"),
            conditions=parse_list(obj, "conditions", Condition.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            observedGeneration=self.observed_generation,
            resolvedImage=self.resolved_image,
            settingsHash=self.settings_hash,
            conditions=self.conditions,
        )


@attrs.frozen(kw_only=True)
class ValkeyConfig:
    RESOURCE: ClassVar[Resource] = VALKEY_CONFIGS

    metadata: ObjectMeta
    spec: ValkeyConfigSpec
    status: ValkeyConfigStatus | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(**kind_fields(obj, ValkeyConfigSpec.from_dict, ValkeyConfigStatus.from_dict))

    def to_dict(self) -> Obj:
        return render_kind(self.RESOURCE.kind, self.metadata, self.spec, self.status)
