"""Deletion protection derived from references (SPEC 1.1-1.3).

A protected object carries its finalizer exactly while something references
it. The decision is recomputed from the shared index on every pass, so it is
never remembered and a restarted operator converges to the same state.
"""

from __future__ import annotations

from typing import Literal

from valkey_operator.core.client import Client
from valkey_operator.core.finalizers import add_finalizer, has_finalizer, remove_finalizer
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

Action = Literal["add", "remove", "none"]


def protection_action(obj: Obj, finalizer: str, referenced: bool) -> Action:
    """What to do with the finalizer; none is added to an object already being deleted."""
    present = has_finalizer(obj, finalizer)
    if referenced and not present and "deletionTimestamp" not in obj["metadata"]:
        return "add"
    if not referenced and present:
        return "remove"
    return "none"


async def reconcile_protection(
    client: Client, resource: Resource, obj: Obj, finalizer: str, referenced: bool
) -> Obj | None:
    """Apply protection_action; returns the object as it now is (None: gone while we removed ours)."""
    action = protection_action(obj, finalizer, referenced)
    if action == "add":
        return await add_finalizer(client, resource, obj, finalizer)
    if action == "remove":
        return await remove_finalizer(client, resource, obj, finalizer)
    return obj
