"""Kubernetes Events (events.k8s.io/v1) about the objects we reconcile.

Recording never fails a reconcile: errors are logged and dropped. A repeat of
the same (object, type, reason, note) within the series window updates the
existing Event's series count instead of creating another, as client-go does.
"""

from __future__ import annotations

import uuid

import structlog

from valkey_operator.core.client import Client
from valkey_operator.core.clock import Clock, RealClock, micro_time
from valkey_operator.core.resource import EVENTS
from valkey_operator.core.rest import ApiError, Obj, TransportError

log = structlog.get_logger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
SERIES_WINDOW_SECONDS = 6 * 60
_MAX_REMEMBERED = 4096


def _reference(obj: Obj) -> Obj:
    metadata = obj.get("metadata", {})
    reference = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": metadata.get("name", ""),
        "uid": metadata.get("uid", ""),
        "resourceVersion": metadata.get("resourceVersion", ""),
    }
    if metadata.get("namespace"):
        reference["namespace"] = metadata["namespace"]
    return reference


class EventRecorder:
    """Records Events as `controller` (reportingController) from `instance` (e.g. the pod name)."""

    def __init__(self, client: Client, controller: str, instance: str, clock: Clock | None = None) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance
        self.clock: Clock = clock or RealClock()
        # (uid, type, reason, note) -> (event namespace, event name, count, first seen monotonic)
        self._series: dict[tuple[str, str, str, str], tuple[str, str, int, float]] = {}

    async def event(self, obj: Obj, type_: str, reason: str, note: str, action: str = "Reconcile") -> None:
        """Record that `reason` happened to obj; `note` is the human-readable detail."""
        metadata = obj.get("metadata", {})
        key = (metadata.get("uid", ""), type_, reason, note)
        try:
            previous = self._series.get(key)
            if previous and self.clock.now() - previous[3] < SERIES_WINDOW_SECONDS:
                await self._bump_series(key, *previous)
            else:
                await self._create(key, obj, type_, reason, note, action)
        except (ApiError, TransportError) as exc:  # an Event is best effort: never fail the caller
            log.warning("event not recorded", reason=reason, error=str(exc))

    async def _create(
        self, key: tuple[str, str, str, str], obj: Obj, type_: str, reason: str, note: str, action: str
    ) -> None:
        metadata = obj.get("metadata", {})
        namespace = metadata.get("namespace") or "default"
        event = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {
                "name": f"{metadata.get('name', 'object')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "eventTime": micro_time(self.clock),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "note": note[:1024],
            "type": type_,
            "regarding": _reference(obj),
        }
        created = await self.client.create(EVENTS, event)
        if len(self._series) >= _MAX_REMEMBERED:
            self._series.pop(next(iter(self._series)))
        self._series[key] = (namespace, created["metadata"]["name"], 1, self.clock.now())

    async def _bump_series(
        self, key: tuple[str, str, str, str], namespace: str, name: str, count: int, first_seen: float
    ) -> None:
        count += 1
        patch = {"series": {"count": count, "lastObservedTime": micro_time(self.clock)}}
        try:
            await self.client.patch(EVENTS, name, patch, namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            del self._series[key]  # the Event expired; the next occurrence starts a new one
            return
        self._series[key] = (namespace, name, count, first_seen)
