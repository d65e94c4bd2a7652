"""What the four kinds share: the ObjectMeta subset the operator reads, conditions, render helpers.

Models parse decoded API objects (`from_dict`, tolerant of absent optional
fields, never mutating the input) and render them back (`to_dict`). Absent
optionals are `None`, absent lists/maps are empty, and rendering omits both
(Go's `omitempty`), so a document without empty collections round-trips
exactly. Lists are tuples so the frozen models stay values.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self, TypeVar

import attrs

from valkey_operator.api.resources import API_VERSION
from valkey_operator.core.rest import Obj

T = TypeVar("T")


class Renderable(Protocol):
    def to_dict(self) -> Obj: ...


def _render(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return [_render(item) for item in value]
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def omitempty(**fields: Any) -> Obj:
    """Render the set fields: None and empty tuples/maps are unset; nested models render via to_dict."""
    return {
        key: _render(value)
        for key, value in fields.items()
        if value is not None and not (isinstance(value, tuple | Mapping) and not value)
    }


def parse_list(obj: Obj, key: str, parse: Callable[[Any], T]) -> tuple[T, ...]:
    return tuple(parse(item) for item in obj.get(key) or ())


def parse_map(obj: Obj, key: str) -> dict[str, str]:
    """A copy, so the model never aliases (or later mutates) the caller's dict."""
    return dict(obj.get(key) or {})


def parse_optional(obj: Obj, key: str, parse: Callable[[Any], T]) -> T | None:
    value = obj.get(key)
    return None if value is None else parse(value)


@attrs.frozen(kw_only=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            name=obj["name"],
            uid=obj["uid"],
            controller=obj.get("controller"),
            block_owner_deletion=obj.get("blockOwnerDeletion"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            apiVersion=self.api_version,
            kind=self.kind,
            name=self.name,
            uid=self.uid,
            controller=self.controller,
            blockOwnerDeletion=self.block_owner_deletion,
        )


@attrs.frozen(kw_only=True)
class ObjectMeta:
    """The metadata the reconcilers use; server bookkeeping (managedFields, timestamps) is dropped."""

    name: str
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: str | None = None
    owner_references: tuple[OwnerReference, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            name=obj["name"],
            namespace=obj.get("namespace"),
            uid=obj.get("uid"),
            generation=obj.get("generation"),
            resource_version=obj.get("resourceVersion"),
            labels=parse_map(obj, "labels"),
            annotations=parse_map(obj, "annotations"),
            finalizers=tuple(obj.get("finalizers") or ()),
            deletion_timestamp=obj.get("deletionTimestamp"),
            owner_references=parse_list(obj, "ownerReferences", OwnerReference.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            name=self.name,
            namespace=self.namespace,
            uid=self.uid,
            generation=self.generation,
            resourceVersion=self.resource_version,
            labels=self.labels,
            annotations=self.annotations,
            finalizers=self.finalizers,
            deletionTimestamp=self.deletion_timestamp,
            ownerReferences=self.owner_references,
        )


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class Condition:
    """metav1.Condition; `message` may be empty but is always rendered (the schema requires it)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition_time: str
    observed_generation: int | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            type=obj["type"],
            status=ConditionStatus(obj["status"]),
            reason=obj["reason"],
            message=obj.get("message", ""),
            last_transition_time=obj["lastTransitionTime"],
            observed_generation=obj.get("observedGeneration"),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            type=self.type,
            status=self.status,
            reason=self.reason,
            message=self.message,
            lastTransitionTime=self.last_transition_time,
            observedGeneration=self.observed_generation,
        )


def kind_fields(
    obj: Obj, parse_spec: Callable[[Obj], Any], parse_status: Callable[[Obj], Any]
) -> dict[str, Any]:
    """The metadata/spec/status constructor arguments of a top-level kind, parsed from an API object."""
    return {
        "metadata": ObjectMeta.from_dict(obj["metadata"]),
        "spec": parse_spec(obj["spec"]),
        "status": parse_optional(obj, "status", parse_status),
    }


def render_kind(kind: str, metadata: ObjectMeta, spec: Renderable, status: Renderable | None) -> Obj:
    """An API object of one of our kinds, optional parts left out."""
    return omitempty(apiVersion=API_VERSION, kind=kind, metadata=metadata, spec=spec, status=status)
