"""Add and remove finalizers without clobbering other writers' finalizers.

Each write carries the resourceVersion it was computed from, so a concurrent
change yields a 409 Conflict instead of a lost update; callers retry with a
fresh read (`retry_on_conflict`, or just raise: the reconcile is retried).
Removing a finalizer from an object that is already gone is success (a 404
when the cache still shows an object whose deletion completed), as
controller-runtime's `client.IgnoreNotFound` around the update.
"""

from __future__ import annotations

from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import ApiError, Obj


def has_finalizer(obj: Obj, finalizer: str) -> bool:
    """Whether obj's metadata.finalizers lists finalizer."""
    return finalizer in obj.get("metadata", {}).get("finalizers", [])


def _patch_finalizers(obj: Obj, finalizers: list[str]) -> Obj:
    metadata = obj["metadata"]
    return {"metadata": {"finalizers": finalizers, "resourceVersion": metadata["resourceVersion"]}}


async def add_finalizer(client: Client, resource: Resource, obj: Obj, finalizer: str) -> Obj:
    """Ensure finalizer is present; returns the object as written (or as given when unchanged).
    A gone object raises the 404 ApiError: nothing to protect, but the caller should know."""
    if has_finalizer(obj, finalizer):
        return obj
    finalizers = [*obj["metadata"].get("finalizers", []), finalizer]
    metadata = obj["metadata"]
    return await client.patch(
        resource, metadata["name"], _patch_finalizers(obj, finalizers), metadata.get("namespace")
    )


async def remove_finalizer(
    client: Client, resource: Resource, obj: Obj, finalizer: str, *, ignore_not_found: bool = True
) -> Obj | None:
    """Ensure finalizer is absent; returns the object as written (or as given when unchanged), or
    None when the object is gone (404), unless `ignore_not_found=False`, which raises the ApiError."""
    if not has_finalizer(obj, finalizer):
        return obj
    finalizers = [f for f in obj["metadata"].get("finalizers", []) if f != finalizer]
    metadata = obj["metadata"]
    try:
        return await client.patch(
            resource, metadata["name"], _patch_finalizers(obj, finalizers), metadata.get("namespace")
        )
    except ApiError as exc:
        if exc.not_found and ignore_not_found:
            return None
        raise
