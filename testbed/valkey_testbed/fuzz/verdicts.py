"""Judging what the API server and the operator did with a fuzzed write (pure functions).

A refusal passes when it is an admission refusal (422 Invalid) whose every cause names a field of
the object sent: its parent path exists in what was sent, so a user can find what to fix. A stored
object passes when its status explains it at its current generation (configs: the Resolved
condition; roles: the summary; clusters: state, message and the Ready condition) and when its
protection finalizer agrees with its referrers (ValkeyImage has no status: the finalizer is the
whole of its reconcile). Log lines of the operator are tallied here too, so the bounds are checked
on plain data.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from valkey_operator.api.cluster import ClusterState
from valkey_operator.api.resources import (
    CONFIG_PROTECTION_FINALIZER,
    IMAGE_PROTECTION_FINALIZER,
    ROLE_PROTECTION_FINALIZER,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import ApiError, Obj

_SEGMENT = re.compile(r"\[[^\]]*\]|[^.\[\]]+")


def field_segments(field: str) -> list[str]:
    """'spec.acl[0].username' -> ['spec', 'acl', '[0]', 'username']."""
    return _SEGMENT.findall(field)


def names_a_field(sent: Any, field: str) -> bool:
    """Whether field is a path into sent: every segment but the last exists (the last may be the
    missing or wrongly typed value it complains about). Map keys may hold dots ('spec.podAnnotations.
    example.com/x'), so a dict may consume several segments at once."""
    segments = field_segments(field)
    return bool(segments) and segments[0] in TOP_LEVEL and _walk(sent, segments)


TOP_LEVEL = frozenset({"apiVersion", "kind", "metadata", "spec"})


def _walk(node: Any, segments: list[str]) -> bool:
    if len(segments) <= 1:
        return True
    head = segments[0]
    if head.startswith("["):
        index = head[1:-1]
        if isinstance(node, list) and index.isdigit() and int(index) < len(node):
            return _walk(node[int(index)], segments[1:])
        return isinstance(node, dict) and index in node and _walk(node[index], segments[1:])
    if not isinstance(node, dict):
        return False
    for end in range(1, len(segments) + 1):
        key = ".".join(segments[:end])
        if key in node and (end == len(segments) or _walk(node[key], segments[end:])):
            return True
    return False


_PATH_IN_MESSAGE = re.compile(r"\b(?:spec|metadata)(?:\.[A-Za-z0-9_-]+|\[[^\]]*\])*")


def cause_field(cause: Obj) -> str:
    """The field a cause names: its field, or (field <nil>) the path its message names, as the API
    server writes for a number of the wrong format ("... format int32 in spec.shards")."""
    field = str(cause.get("field") or "")
    if field and field != "<nil>":
        return field
    found = _PATH_IN_MESSAGE.search(str(cause.get("message") or ""))
    return found.group(0) if found else ""


UNCHECKED_NOTE = "some validation rules were not checked"
"""The API server's own companion cause (field <nil>) when a schema error stops the CEL rules."""


def refusal_problem(sent: Obj, error: ApiError) -> str | None:
    """None for an admission refusal whose causes name fields of sent; else what is wrong with it."""
    if error.status != 422 or error.reason != "Invalid":
        return f"answered {error.status} {error.reason or '(no reason)'}: {error.message[:300]}"
    causes = [
        cause
        for cause in (error.body.get("details") or {}).get("causes") or []
        if UNCHECKED_NOTE not in str(cause.get("message"))
    ]
    if not causes:
        return f"422 without a cause naming a field: {error.message[:300]}"
    for cause in causes:
        if not names_a_field(sent, cause_field(cause)):
            return f"a cause names no field of the object sent: {cause!r}"
        if not cause.get("message"):
            return f"a cause without a message: {cause!r}"
    return None


def refused_fields(error: ApiError) -> list[str]:
    """The fields a refusal names, indices dropped: what the run counts refusals by."""
    causes = (error.body.get("details") or {}).get("causes") or []
    return sorted(
        {
            re.sub(r"\[[^\]]*\]", "[]", cause_field(cause))[:48]
            for cause in causes
            if UNCHECKED_NOTE not in str(cause.get("message"))
        }
    )


# ---- statuses ----------------------------------------------------------------------------------------
def _condition(status: Obj, type_: str) -> Obj | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


def status_problem(resource: Resource, obj: Obj) -> str | None:
    """None when obj's status explains it at its current generation; else what is missing."""
    generation = obj["metadata"].get("generation")
    status = obj.get("status") or {}
    if resource is VALKEY_IMAGES:
        return None  # no status fields: protection_problem judges its reconcile
    if status.get("observedGeneration") != generation:
        return f"observedGeneration {status.get('observedGeneration')} != generation {generation}"
    if resource is VALKEY_ROLES:
        return None if status.get("summary") else "no summary"
    if resource is VALKEY_CONFIGS:
        resolved = _condition(status, "Resolved")
        if resolved is None or not resolved.get("reason") or not resolved.get("message"):
            return f"no Resolved condition with a reason and a message: {resolved}"
        return None
    if status.get("state") not in {state.value for state in ClusterState}:
        return f"state {status.get('state')!r}"
    ready = _condition(status, "Ready")
    if not status.get("message") or ready is None or not ready.get("reason") or not ready.get("message"):
        return f"no message or no Ready condition with a reason and a message: {status.get('message')!r}"
    return None


# ---- protection ----------------------------------------------------------------------------------------
FINALIZERS = {
    VALKEY_IMAGES: IMAGE_PROTECTION_FINALIZER,
    VALKEY_CONFIGS: CONFIG_PROTECTION_FINALIZER,
    VALKEY_ROLES: ROLE_PROTECTION_FINALIZER,
}


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def referrers(resource: Resource, name: str, world: Mapping[Resource, Sequence[Obj]]) -> list[Obj]:
    """The objects of world whose spec names `name` as a `resource` (the object itself included)."""
    if resource is VALKEY_IMAGES:
        return [c for c in world.get(VALKEY_CONFIGS, ()) if _spec(c).get("imageRef") == name]
    if resource is VALKEY_CONFIGS:
        return [c for c in world.get(VALKEY_CONFIGS, ()) if _spec(c).get("baseRef") == name] + [
            k for k in world.get(VALKEY_CLUSTERS, ()) if _spec(k).get("configRef") == name
        ]
    return [
        k
        for k in world.get(VALKEY_CLUSTERS, ())
        if any(
            permission.get("roleRef") == name
            for user in _spec(k).get("acl") or ()
            for permission in user.get("permissions") or ()
        )
    ]


def deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def protection_problem(resource: Resource, obj: Obj, world: Mapping[Resource, Sequence[Obj]]) -> str | None:
    """An object another live object names keeps its finalizer; one nothing names has none.

    Only the two clear cases are judged; whether a referrer that is itself being deleted still
    protects is left to the product (and to the run's last check: everything deleted goes).
    """
    if resource not in FINALIZERS:
        return None
    name = obj["metadata"]["name"]
    present = FINALIZERS[resource] in (obj["metadata"].get("finalizers") or ())
    named_by = referrers(resource, name, world)
    if not named_by and present:
        return "protected, yet nothing names it"
    live = [r for r in named_by if not deleting(r) and r["metadata"].get("uid") != obj["metadata"].get("uid")]
    if live and not present and not deleting(obj):
        return f"not protected, yet {live[0]['kind']} {live[0]['metadata']['name']} names it"
    return None


# ---- the operator's log --------------------------------------------------------------------------------
EXPECTED_ERRORS = ("ApiError: 409", "ApiError: 404")
"""Reconcile errors that are races the next pass resolves (a stale write, an object just deleted)."""


@attrs.define
class Tally:
    """Passes by controller and by object, and failed passes by their error's first words."""

    passes: collections.Counter[str] = attrs.field(factory=collections.Counter)
    by_key: collections.Counter[tuple[str, str]] = attrs.field(factory=collections.Counter)
    errors: collections.Counter[str] = attrs.field(factory=collections.Counter)
    unexpected: list[str] = attrs.field(factory=list)

    def add(self, lines: Iterable[Obj]) -> None:
        for line in lines:
            event = line.get("event")
            if event not in ("reconciled", "reconcile failed"):
                if line.get("level") in ("error", "critical") or line.get("exception"):
                    self.unexpected.append(str(line)[:500])
                continue
            controller, key = str(line.get("controller")), str(line.get("key"))
            self.passes[controller] += 1
            self.by_key[(controller, key)] += 1
            if event == "reconcile failed":
                error = str(line.get("error", ""))
                head = " ".join(error.split()[:2])
                self.errors[f"{controller}: {head}"] += 1
                if not error.startswith(EXPECTED_ERRORS):
                    self.unexpected.append(f"{controller} {key}: {error[:500]}")

    def busiest(self) -> tuple[str, int]:
        """The object with the most passes, and how many."""
        if not self.by_key:
            return ("", 0)
        (controller, key), count = self.by_key.most_common(1)[0]
        return (f"{controller} {key}", count)
