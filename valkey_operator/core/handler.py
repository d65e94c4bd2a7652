"""Event handlers: turn informer events into reconcile Requests (controller-runtime's `handler`).

A handler maps an object to the Requests it affects. On update both the old
and the new object are mapped, so a change that moves a reference enqueues
the old target as well as the new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from valkey_operator.core.reconcile import Request
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import DeletedFinalStateUnknown, unwrap_tombstone

MapFunc = Callable[[Obj], Iterable[Request]]
UpdateFilter = Callable[[Obj, Obj], bool]


class RequestSink(Protocol):
    def add(self, item: Request) -> None: ...


def request_for_object(obj: Obj) -> list[Request]:
    metadata = obj["metadata"]
    return [Request(metadata["name"], metadata.get("namespace", ""))]


def requests_for_controller_owner(owner: Resource) -> MapFunc:
    """Map an owned object to its controlling owner of kind `owner` (ownerReference controller=true)."""

    def map_to_owner(obj: Obj) -> list[Request]:
        metadata = obj["metadata"]
        for reference in metadata.get("ownerReferences", []):
            group = reference.get("apiVersion", "").rpartition("/")[0]
            if reference.get("controller") and reference.get("kind") == owner.kind and group == owner.group:
                namespace = metadata.get("namespace", "") if owner.namespaced else ""
                return [Request(reference["name"], namespace)]
        return []

    return map_to_owner


def generation_changed(old: Obj, new: Obj) -> bool:
    """Update filter: spec changes (and deletion marks) only, not status or metadata-only writes."""
    old_meta, new_meta = old["metadata"], new["metadata"]
    return old_meta.get("generation") != new_meta.get("generation") or (
        "deletionTimestamp" in new_meta and "deletionTimestamp" not in old_meta
    )


_BOOKKEEPING = frozenset({"metadata", "status"})


def data_changed(old: Obj, new: Obj) -> bool:
    """Update filter for kinds without a generation (Secrets, ConfigMaps), where generation_changed
    drops every change: passes a change to the content (every top-level field but metadata and
    status: data, stringData, binaryData, type, immutable, spec), to labels or annotations, a new
    generation, and deletion marks; drops relists and writes of status, finalizers, owners or
    managedFields alone."""
    if generation_changed(old, new):
        return True
    old_meta, new_meta = old["metadata"], new["metadata"]
    if any(old_meta.get(field) != new_meta.get(field) for field in ("labels", "annotations")):
        return True
    keys = (old.keys() | new.keys()) - _BOOKKEEPING
    return any(old.get(key) != new.get(key) for key in keys)


class EnqueueMapped:
    """An informer event handler that adds the mapped Requests to a queue."""

    def __init__(self, sink: RequestSink, map_fn: MapFunc, update_filter: UpdateFilter | None = None) -> None:
        self.sink = sink
        self.map_fn = map_fn
        self.update_filter = update_filter
        # An update never changes an object's name or namespace: mapping the old object to itself
        # would only repeat the new one's Request (controller-runtime's EnqueueRequestForObject
        # maps the new object alone too).
        self._map_new_only = map_fn is request_for_object

    def on_add(self, obj: Obj) -> None:
        for request in self.map_fn(obj):
            self.sink.add(request)

    def on_update(self, old: Obj, new: Obj) -> None:
        if self.update_filter is not None and not self.update_filter(old, new):
            return
        if self._map_new_only:
            for request in self.map_fn(new):
                self.sink.add(request)
            return
        for request in {*self.map_fn(old), *self.map_fn(new)}:
            self.sink.add(request)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        for request in self.map_fn(unwrap_tombstone(obj)):
            self.sink.add(request)
