"""An indexed cache of decoded JSON objects, as client-go's `cache.Indexer`.

The store is only touched from one event loop, so it needs no locks: every
method runs to completion without awaiting. The reflector writes it; readers
(reconcilers, handlers, index lookups) only read.

Objects in the store are shared, not copied: `get`, `list` and `by_index`
return the stored dicts themselves, and the same dicts are handed to event
handlers. Handlers and reconcilers must never mutate them; copy first
(`copy.deepcopy`) when an object is the base of a change to send.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import attrs
import structlog

from valkey_operator.core.rest import Obj

__all__ = [
    "DeletedFinalStateUnknown",
    "IndexFunc",
    "KeyFunc",
    "Store",
    "Transform",
    "keep_metadata",
    "meta_namespace_key",
    "split_meta_namespace_key",
    "strip_managed_fields",
    "then",
    "unwrap_tombstone",
]

log = structlog.get_logger(__name__)

IndexFunc = Callable[[Obj], list[str]]
"""The values an object is indexed under for one named index (may be empty or several)."""

KeyFunc = Callable[[Obj], str]
Transform = Callable[[Obj], Obj]


@attrs.frozen
class DeletedFinalStateUnknown:
    """A delete seen only through a relist: `obj` is the last state the cache had, maybe stale.

    Delivered to `on_delete` instead of the object when the watch missed the
    DELETED event (the object was simply absent from a later LIST).
    """

    key: str
    obj: Obj


def meta_namespace_key(obj: Mapping[str, Any] | DeletedFinalStateUnknown) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects; a tombstone yields its key."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise ValueError("object has no metadata.name")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def split_meta_namespace_key(key: str) -> tuple[str | None, str]:
    """The inverse of `meta_namespace_key`: (namespace or None, name)."""
    namespace, sep, name = key.partition("/")
    if not sep:
        return None, key
    if not namespace or not name or "/" in name:
        raise ValueError(f"malformed object key {key!r}")
    return namespace, name


def unwrap_tombstone(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    """The object an `on_delete` argument stands for, whether or not it is a tombstone."""
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop `metadata.managedFields`, often half an object's size (SPEC section 6).

    Mutates and returns its argument: the store applies it to objects it has
    just decoded and owns.
    """
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


def keep_metadata(fields: Collection[str]) -> Transform:
    """A transform that keeps apiVersion, kind and only these metadata fields of an object (no spec, no
    data, no annotations): for a metadata-only informer of a kind whose annotations may carry what must
    not sit in memory (`kubectl apply`'s last-applied-configuration holds a Secret's whole data)."""
    kept = tuple(fields)

    def transform(obj: Obj) -> Obj:
        metadata = obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        slim: Obj = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
        slim["metadata"] = {key: metadata[key] for key in kept if key in metadata}
        return slim

    return transform


def then(first: Transform | None, second: Transform | None) -> Transform | None:
    """first, then second (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(obj: Obj) -> Obj:
        return second(first(obj))

    return both


class Store:
    """Objects by key, plus named indexes kept exact on every add, update and delete."""

    def __init__(
        self,
        *,
        key_func: KeyFunc = meta_namespace_key,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = None,
    ) -> None:
        self._key_func = key_func
        self._transform = transform
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> indexed value -> keys of the objects with that value
        self._indices: dict[str, dict[str, set[str]]] = {}
        self.list_resource_version = ""
        """resourceVersion of the LIST the last `replace` came from."""
        if indexers:
            self.add_indexers(indexers)

    # -- keys and transform ------------------------------------------------------

    def key_of(self, obj: Obj) -> str:
        return self._key_func(obj)

    def transform_object(self, obj: Obj) -> Obj:
        """What the store would hold for `obj`: the transform applied (identity without one)."""
        return self._transform(obj) if self._transform is not None else obj

    # -- indexers ----------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register named indexes; objects already stored are indexed at once."""
        clashing = sorted(set(indexers) & set(self._indexers))
        if clashing:
            raise ValueError(f"indexers already registered: {', '.join(clashing)}")
        for name, func in indexers.items():
            self._indexers[name] = func
            index: dict[str, set[str]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in self._index_values(name, func, key, obj):
                    index.setdefault(value, set()).add(key)

    @property
    def indexer_names(self) -> list[str]:
        return list(self._indexers)

    # -- writes ------------------------------------------------------------------

    def add(self, obj: Obj) -> Obj:
        """Insert or replace the object under its key; returns what was stored (transformed)."""
        return self.upsert(obj)[1]

    def upsert(self, obj: Obj) -> tuple[Obj | None, Obj]:
        """`add`, also returning the object it replaced (None when new).

        The reflector's path for every watch event: one key computation and one look-up instead of
        `get_by_key` and then `add`.
        """
        stored = self.transform_object(obj)
        key = self._key_func(stored)
        items = self._items
        old = items.get(key)
        items[key] = stored
        if self._indexers:
            self._reindex(key, old, stored)
        return old, stored

    def update(self, obj: Obj) -> Obj:
        """Same as `add`: the store does not distinguish (client-go's threadSafeMap neither)."""
        return self.add(obj)

    def delete(self, obj: Obj | DeletedFinalStateUnknown) -> Obj | None:
        """Remove the object with `obj`'s key; returns the object that was stored, if any."""
        key = obj.key if isinstance(obj, DeletedFinalStateUnknown) else self._key_func(obj)
        return self.delete_by_key(key)

    def delete_by_key(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None and self._indexers:
            self._reindex(key, old, None)
        return old

    def replace(
        self, objects: Iterable[Obj], resource_version: str, *, namespace: str | None = None
    ) -> list[Obj]:
        """Make the store hold exactly `objects` (a full LIST); returns them as stored, in order.

        With `namespace`, only that namespace's objects are replaced and the rest stay: one store
        can then be fed by one reflector per namespace (a multi-namespace informer).
        """
        items: dict[str, Obj] = {}
        if namespace is not None:
            items = {key: obj for key, obj in self._items.items() if _namespace_of(obj) != namespace}
        listed: list[Obj] = []
        for obj in objects:
            stored = self.transform_object(obj)
            items[self._key_func(stored)] = stored
            listed.append(stored)
        self._items = items
        self._indices = {name: {} for name in self._indexers}
        for key, obj in items.items():
            for name, func in self._indexers.items():
                index = self._indices[name]
                for value in self._index_values(name, func, key, obj):
                    index.setdefault(value, set()).add(key)
        self.list_resource_version = resource_version
        return listed

    # -- reads -------------------------------------------------------------------

    def get(self, obj_or_key: Obj | str) -> Obj | None:
        """The stored object with this key (or with the key of the given object)."""
        key = obj_or_key if isinstance(obj_or_key, str) else self._key_func(obj_or_key)
        return self._items.get(key)

    def get_by_key(self, key: str) -> Obj | None:
        return self._items.get(key)

    def list_keys(self) -> list[str]:
        return list(self._items)

    def snapshot(self, namespace: str | None = None) -> dict[str, Obj]:
        """A shallow copy of key -> object (the objects themselves are still shared), or of one
        namespace's objects."""
        if namespace is None:
            return dict(self._items)
        return {key: obj for key, obj in self._items.items() if _namespace_of(obj) == namespace}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def index_keys(self, index_name: str, value: str) -> list[str]:
        """Keys of the objects indexed under `value`, sorted."""
        return sorted(self._index(index_name).get(value, ()))

    def by_index(self, index_name: str, value: str) -> list[Obj]:
        """Objects indexed under `value`, in key order."""
        return [self._items[key] for key in self.index_keys(index_name, value)]

    def list_index_values(self, index_name: str) -> list[str]:
        """Every value at least one stored object is indexed under, sorted."""
        return sorted(self._index(index_name))

    # -- internals ---------------------------------------------------------------

    def _index(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"no index named {index_name!r}") from None

    def _index_values(self, index_name: str, func: IndexFunc, key: str, obj: Obj) -> set[str]:
        # A broken index function must not wedge the watch loop on one object:
        # the object is left out of that index and the failure is logged.
        try:
            return set(func(obj))
        except Exception:
            log.exception("index_function_failed", index=index_name, key=key)
            return set()

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            old_values = self._index_values(name, func, key, old) if old is not None else set()
            new_values = self._index_values(name, func, key, new) if new is not None else set()
            for value in old_values - new_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values - old_values:
                index.setdefault(value, set()).add(key)

    # Last in the class body: once `list` names this method, annotations below it
    # would resolve `list[...]` to the method instead of the builtin.
    def list(self) -> list[Obj]:
        """Every stored object."""
        return list(self._items.values())


def _namespace_of(obj: Obj) -> str:
    namespace: str = obj.get("metadata", {}).get("namespace") or ""
    return namespace
