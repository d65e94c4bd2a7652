"""A read-only view of the shared cache: what a reconciler reads, never what it starts.

controller-runtime's `client.Reader` over its cache. Reading through
`Manager.informer` would create and start an informer for a kind nobody
registered, so a typo silently opens a new watch and returns None; this reader
only reads the informers controllers registered (`for_`, `owns`, `watches`, or
`Manager.informer` at setup) and names the kind, the namespace asked for and
the scopes registered when none covers the read.

A kind may have several informers (the manager's scope, `for_(..., namespace="src")`,
a label-selected one): a read goes to those whose namespaces cover the namespace
asked for, as controller-runtime's multi-namespace cache does, so an informer
registered for another namespace than the manager's is found.
"""

from __future__ import annotations

from collections.abc import Iterable

from valkey_operator.core.informer import SharedInformer, SharedInformerFactory
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import meta_namespace_key


class NotCached(LookupError):
    """No registered informer of this kind (and metadata-only-ness) covers the namespace read."""


def describe_scope(informer: SharedInformer) -> str:
    """An informer's scope as a NotCached message names it."""
    scope = "all namespaces" if not informer.namespaces else "namespace " + ",".join(informer.namespaces)
    selectors = [s for s in (informer.label_selector, informer.field_selector) if s]
    return scope + (f" selected by {' and '.join(selectors)}" if selectors else "")


class CacheReader:
    """Get, list and index reads of the shared informers' stores; never creates an informer."""

    def __init__(self, informers: SharedInformerFactory) -> None:
        self._informers = informers

    def get(
        self, resource: Resource, name: str, namespace: str = "", *, metadata_only: bool = False
    ) -> Obj | None:
        """The cached object, or None when no informer covering namespace has one by that name
        (not yet seen, deleted, or outside every informer's selector). Raises NotCached when no
        informer of the kind covers namespace."""
        key = f"{namespace}/{name}" if resource.namespaced else name
        for informer in self._covering(resource, namespace, metadata_only):
            found = informer.store.get_by_key(key)
            if found is not None:
                return found
        return None

    def by_index(
        self, resource: Resource, index: str, value: str, *, metadata_only: bool = False
    ) -> list[Obj]:
        """Objects whose named index (installed with `add_indexers`) holds value, from every
        registered informer of the kind that has the index; [] when none match. KeyError when no
        informer of the kind has an index by that name."""
        informers = self._covering(resource, None, metadata_only)
        indexed = [i for i in informers if index in i.store.indexer_names] or informers[:1]
        return _distinct(informer.store.by_index(index, value) for informer in indexed)

    def _covering(
        self, resource: Resource, namespace: str | None, metadata_only: bool
    ) -> list[SharedInformer]:
        """The registered informers whose scope includes namespace (None or "": any), the manager's
        default scope first."""
        registered = self._informers.registered(resource, metadata_only=metadata_only)
        if resource.namespaced and namespace:
            covering = [i for i in registered if not i.namespaces or namespace in i.namespaces]
        else:
            covering = registered
        if not covering:
            kind = f"{resource} (metadata only)" if metadata_only else str(resource)
            asked = f" in namespace {namespace!r}" if resource.namespaced and namespace else ""
            scopes = "; ".join(describe_scope(i) for i in registered) or "none"
            raise NotCached(
                f"no informer for {kind}{asked} (registered: {scopes}): register it at setup "
                "(for_, owns, watches or informer, with namespace= covering it)"
            )
        return covering

    # Last in the class body: once `list` names this method, annotations below it would mean it.
    def list(
        self, resource: Resource, namespace: str | None = None, *, metadata_only: bool = False
    ) -> list[Obj]:
        """Every cached object of the kind, or only those of one namespace; [] when none.
        Raises NotCached when no informer of the kind covers namespace."""
        informers = self._covering(resource, namespace, metadata_only)
        objects = _distinct(informer.store.list() for informer in informers)
        if not namespace or not resource.namespaced:
            return objects
        return [obj for obj in objects if obj.get("metadata", {}).get("namespace") == namespace]


def _distinct(lists: Iterable[list[Obj]]) -> list[Obj]:
    """The objects of several informers, each key once (the first informer's copy)."""
    lists = list(lists)
    if len(lists) == 1:
        return lists[0]
    seen: dict[str, Obj] = {}
    for objects in lists:
        for obj in objects:
            seen.setdefault(meta_namespace_key(obj), obj)
    return list(seen.values())
