"""A read-only view of the shared cache: what a reconciler reads, never what it starts.

controller-runtime's `client.Reader` over its cache. Reading through
`Manager.informer` would create and start an informer for a kind nobody
registered, so a typo silently opens a new watch and returns None; this reader
only reads the informers controllers registered (`for_`, `owns`, `watches`, or
`Manager.informer` at setup) and names the kind when there is none.
"""

from __future__ import annotations

from valkey_operator.core.informer import SharedInformer, SharedInformerFactory
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj


class NotCached(LookupError):
    """No informer for this kind (and scope) was registered before the read."""


class CacheReader:
    """Get, list and index reads of the shared informers' stores; never creates an informer."""

    def __init__(self, informers: SharedInformerFactory) -> None:
        self._informers = informers

    def get(
        self, resource: Resource, name: str, namespace: str = "", *, metadata_only: bool = False
    ) -> Obj | None:
        """The cached object, or None when the cache has none by that name."""
        key = f"{namespace}/{name}" if resource.namespaced else name
        return self._store(resource, metadata_only).store.get_by_key(key)

    def by_index(
        self, resource: Resource, index: str, value: str, *, metadata_only: bool = False
    ) -> list[Obj]:
        """Objects whose named index (installed with `add_indexers`) holds value."""
        return self._store(resource, metadata_only).store.by_index(index, value)

    def _store(self, resource: Resource, metadata_only: bool) -> SharedInformer:
        informer = self._informers.existing(resource, metadata_only=metadata_only)
        if informer is None:
            kind = f"{resource} (metadata only)" if metadata_only else str(resource)
            raise NotCached(f"no informer for {kind}: register it at setup (for_, owns, watches or informer)")
        return informer

    # Last in the class body: once `list` names this method, annotations below it would mean it.
    def list(
        self, resource: Resource, namespace: str | None = None, *, metadata_only: bool = False
    ) -> list[Obj]:
        """Every cached object of the kind, or only those of one namespace."""
        objects = self._store(resource, metadata_only).store.list()
        if namespace is None or not resource.namespaced:
            return objects
        return [obj for obj in objects if obj.get("metadata", {}).get("namespace") == namespace]
