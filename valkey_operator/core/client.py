"""A small typed client facade: CRUD, patch, server-side apply and status, on plain dicts.

Reads in reconcilers should come from the informer cache; this client is for
writes, and for the rare read that must be fresh (conflict retries).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from valkey_operator.core.clock import Clock, RealClock
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    Obj,
    RestClient,
)

T = TypeVar("T")

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "Client",
    "retry_on_conflict",
]


def _namespace_of(obj: Obj) -> str | None:
    namespace: str | None = obj.get("metadata", {}).get("namespace")
    return namespace


def _name_of(obj: Obj) -> str:
    name: str = obj["metadata"]["name"]
    return name


class Client:
    """Typed-by-resource JSON client; `field_manager` names our writes for server-side apply."""

    def __init__(self, rest: RestClient, field_manager: str) -> None:
        self.rest = rest
        self.field_manager = field_manager

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        """One GET from the API server; a missing object raises ApiError (`.not_found`)."""
        return await self.rest.request("GET", resource.path(namespace, name))

    async def get_or_none(self, resource: Resource, name: str, namespace: str | None = None) -> Obj | None:
        """One GET; None when the object does not exist (404), any other error raised."""
        try:
            return await self.get(resource, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> list[Obj]:
        """Every matching object, fetched in pages."""
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = await self.rest.request(
                "GET",
                resource.path(namespace),
                query={
                    "labelSelector": label_selector,
                    "fieldSelector": field_selector,
                    "limit": page_size,
                    "continue": token,
                },
            )
            items.extend(page.get("items", []))
            token = page.get("metadata", {}).get("continue")
            if not token:
                return items

    async def create(self, resource: Resource, obj: Obj) -> Obj:
        """POST obj (its metadata names the namespace); a taken name raises `.already_exists`."""
        return await self.rest.request("POST", resource.path(_namespace_of(obj)), body=obj)

    async def replace(self, resource: Resource, obj: Obj, subresource: str | None = None) -> Obj:
        """PUT: optimistic concurrency through metadata.resourceVersion (409 on a stale copy)."""
        path = resource.path(_namespace_of(obj), _name_of(obj), subresource)
        return await self.rest.request("PUT", path, body=obj)

    async def replace_status(self, resource: Resource, obj: Obj) -> Obj:
        """PUT the status subresource, guarded by obj's resourceVersion (409 on a stale copy)."""
        return await self.replace(resource, obj, subresource="status")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = MERGE_PATCH,
        subresource: str | None = None,
    ) -> Obj:
        """A patch (merge by default; JSON_PATCH or APPLY_PATCH as patch_type); a missing object
        raises `.not_found`. Guard it with metadata.resourceVersion in the patch to get 409 on change."""
        path = resource.path(namespace, name, subresource)
        return await self.rest.request("PATCH", path, body=patch, content_type=patch_type)

    async def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = MERGE_PATCH,
    ) -> Obj:
        """A patch of the status subresource (merge by default); a missing object raises `.not_found`."""
        return await self.patch(resource, name, patch, namespace, patch_type=patch_type, subresource="status")

    async def apply(
        self, resource: Resource, obj: Obj, *, force: bool = True, subresource: str | None = None
    ) -> Obj:
        """Server-side apply: obj holds exactly the fields we own; others' fields are kept."""
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        path = resource.path(_namespace_of(obj), _name_of(obj), subresource)
        return await self.rest.request(
            "PATCH",
            path,
            body=body,
            content_type=APPLY_PATCH,
            query={"fieldManager": self.field_manager, "force": force},
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str = "Background",
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        missing_ok: bool = True,
    ) -> None:
        """Delete; with uid, only that incarnation (a recreated object of the same name is kept). A
        missing object is success unless missing_ok=False (then `.not_found` is raised)."""
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation_policy}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        try:
            await self.rest.request("DELETE", resource.path(namespace, name), body=options)
        except ApiError as exc:
            if not (missing_ok and exc.not_found):
                raise


async def retry_on_conflict(
    attempt: Callable[[], Awaitable[T]],
    *,
    attempts: int = 5,
    base_delay: float = 0.01,
    clock: Clock | None = None,
) -> T:
    """Run attempt (which must re-read what it writes) again on 409 Conflict, with jittered backoff.

    Like client-go's retry.RetryOnConflict: up to 5 attempts, backoff from 10 ms with 10% jitter.
    """
    clock = clock or RealClock()
    for step in range(attempts):
        try:
            return await attempt()
        except ApiError as exc:
            if not exc.conflict or step == attempts - 1:
                raise
        await clock.sleep(base_delay * (2**step) * (1 + 0.1 * random.random()))
    raise AssertionError("unreachable")
