"""What the four kinds share: the ObjectMeta subset the operator reads, and conditions.

Models parse decoded API objects (`from_dict`, tolerant of absent optional
fields, never mutating the input) and render them back (`to_dict`); both are
derived from the fields (valkey_operator.api.convert).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

import attrs

from valkey_operator.api.convert import Model
from valkey_operator.api.fields import described, schema
from valkey_operator.api.limits import MAX_MESSAGE


@attrs.frozen(kw_only=True)
class OwnerReference(Model):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


@attrs.frozen(kw_only=True)
class ObjectMeta(Model):
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


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@described("A condition in the Kubernetes API conventions (metav1.Condition).")
@attrs.frozen(kw_only=True)
class Condition(Model):
    """metav1.Condition; `message` may be empty but is always rendered (the schema requires it)."""

    type: str = attrs.field(
        metadata=schema("Condition type, in CamelCase (for example Ready).", max_length=316)
    )
    status: ConditionStatus = attrs.field(metadata=schema("True, False or Unknown.", max_length=16))
    observed_generation: int | None = attrs.field(
        default=None, metadata=schema("The metadata.generation the condition was computed from.", minimum=0)
    )
    last_transition_time: str = attrs.field(
        metadata=schema("When the status last changed (RFC 3339).", max_length=64, fmt="date-time")
    )
    reason: str = attrs.field(
        metadata=schema("Machine-readable CamelCase reason for the last transition.", max_length=1024)
    )
    message: str = attrs.field(
        default="",
        metadata=schema(
            "Human-readable details of the last transition.", max_length=MAX_MESSAGE, required=True
        ),
    )


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The condition of that type (None when absent)."""
    return next((condition for condition in conditions if condition.type == type_), None)


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: str,
) -> tuple[Condition, ...]:
    """The conditions with one set, in place of the old one (new types go last); lastTransitionTime
    moves to `now` only when the status changes (API conventions), as core.conditions does for
    documents that are still dicts."""
    value = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    existing = find_condition(conditions, type_)
    updated = Condition(
        type=type_,
        status=value,
        observed_generation=observed_generation,
        last_transition_time=existing.last_transition_time
        if existing is not None and existing.status is value
        else now,
        reason=reason,
        message=message,
    )
    kept = [condition for condition in conditions if condition.type != type_]
    index = next((i for i, condition in enumerate(conditions) if condition.type == type_), len(kept))
    kept.insert(index, updated)
    return tuple(kept)
