"""Shared informers: one reflector and one indexed store per watched kind, many handlers.

Modelled on client-go's `sharedIndexInformer` and `SharedInformerFactory`:
every controller that needs a kind asks the factory, which hands out the same
informer for the same (resource, namespace, metadata_only), so the process
keeps one watch and one cache per kind however many controllers read it.

Memory is scoped as with controller-runtime's cache options: a metadata-only
informer caches just `metadata` (for kinds where only names, labels and
owners matter, or whose payloads must not sit in memory, such as Secrets),
and the factory's `label_selectors` restrict a kind's full informer to the
objects the operator needs whole.

Handlers are called synchronously, in event order, on the event loop, after
the store has been updated. They must be quick and must not block (enqueue a
key and return) and must not mutate the objects they are given, which are the
cached objects themselves. A handler that raises is logged and skipped; it
never stops the informer or the other handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

import structlog

from valkey_operator.core.clock import Clock
from valkey_operator.core.reflector import Reflector, WatchBackoff
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj, RestClient
from valkey_operator.core.store import (
    DeletedFinalStateUnknown,
    IndexFunc,
    Store,
    Transform,
    meta_namespace_key,
    strip_managed_fields,
    then,
)

__all__ = [
    "NAMESPACE_ALL",
    "FuncHandler",
    "ResourceEventHandler",
    "SharedInformer",
    "SharedInformerFactory",
]

log = structlog.get_logger(__name__)

NAMESPACE_ALL = ""
"""Pass as `namespace` to watch every namespace (client-go's metav1.NamespaceAll)."""


class ResourceEventHandler(Protocol):
    """Notified of every change to an informer's cache, after the cache has it.

    `on_delete` receives the object's final state, or a
    `DeletedFinalStateUnknown` tombstone when the delete was only noticed by a
    relist. On a relist every object still present arrives as `on_update`,
    even when unchanged.
    """

    def on_add(self, obj: Obj) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None: ...


class FuncHandler:
    """A ResourceEventHandler from plain callables; a missing one ignores that event."""

    def __init__(
        self,
        on_add: Callable[[Obj], None] | None = None,
        on_update: Callable[[Obj, Obj], None] | None = None,
        on_delete: Callable[[Obj | DeletedFinalStateUnknown], None] | None = None,
    ) -> None:
        self._on_add = on_add
        self._on_update = on_update
        self._on_delete = on_delete

    def on_add(self, obj: Obj) -> None:
        if self._on_add is not None:
            self._on_add(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        if self._on_update is not None:
            self._on_update(old, new)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        if self._on_delete is not None:
            self._on_delete(obj)


def _safe_key(obj: Obj | DeletedFinalStateUnknown) -> str:
    try:
        return meta_namespace_key(obj)
    except Exception:
        return "?"


Namespaces = str | Collection[str] | None
"""One namespace, several, or every namespace (None or NAMESPACE_ALL)."""


def namespace_scope(namespace: Namespaces) -> tuple[str, ...]:
    """The namespaces named, sorted and distinct; () means all."""
    if namespace is None:
        return ()
    names = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    if NAMESPACE_ALL in names:
        return ()
    return tuple(sorted(set(names)))


class SharedInformer:
    """One indexed store fed by one reflector per watched namespace (one for all namespaces),
    fanning changes out to many handlers."""

    def __init__(
        self,
        rest: RestClient,
        resource: Resource,
        *,
        namespace: Namespaces = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        transform: Transform | None = strip_managed_fields,
        indexers: Mapping[str, IndexFunc] | None = None,
        watch_timeout: float | None = None,
        backoff: Callable[[], WatchBackoff] = WatchBackoff,
        clock: Clock | None = None,
    ) -> None:
        """`namespace` None or NAMESPACE_ALL watches all namespaces; several namespaces get one
        list and watch each into the same store (controller-runtime's multi-namespace cache).
        `backoff` makes each reflector's watch backoff; see Reflector for the rest.

        `metadata_only` caches PartialObjectMetadata: objects with kind,
        apiVersion and metadata only.
        """
        self.resource = resource
        self.namespaces = namespace_scope(namespace) if resource.namespaced else ()
        """The namespaces watched, sorted; () for all (and for cluster-scoped kinds)."""
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.metadata_only = metadata_only
        self.store = Store(transform=transform, indexers=indexers)
        """The cache: read it freely, never write it, never mutate what it returns."""
        # A tuple, replaced on add and remove: events iterate it without copying it first.
        self._handlers: tuple[ResourceEventHandler, ...] = ()
        self._reflectors = [
            Reflector(
                rest,
                resource,
                self.store,
                self,
                namespace=scope,
                label_selector=label_selector,
                field_selector=field_selector,
                metadata_only=metadata_only,
                watch_timeout=watch_timeout,
                backoff=backoff(),
                clock=clock,
            )
            for scope in self.namespaces or (None,)
        ]
        self._task: asyncio.Task[None] | None = None
        self._log = log.bind(
            resource=str(resource), namespace=",".join(self.namespaces), metadata_only=metadata_only
        )

    # -- handlers --------------------------------------------------------------

    def add_event_handler(self, handler: ResourceEventHandler) -> ResourceEventHandler:
        """Register a handler; it first gets an `on_add` for every object already cached.

        Returns the handler, to pass to `remove_event_handler` later.
        """
        for obj in self.store.list():
            try:
                handler.on_add(obj)
            except Exception:
                self._handler_failed("add", obj)
        self._handlers = (*self._handlers, handler)
        return handler

    def remove_event_handler(self, handler: ResourceEventHandler) -> None:
        """Stop notifying handler (a no-op if it is not registered)."""
        handlers = list(self._handlers)
        with contextlib.suppress(ValueError):
            handlers.remove(handler)
        self._handlers = tuple(handlers)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add named indexes to the shared store (names must be unique across all users)."""
        self.store.add_indexers(indexers)

    # -- EventSink: called by the reflector after each store change ---------------

    # Called once per event and handler: the loops call the handlers directly (no wrapper call).

    def on_add(self, obj: Obj) -> None:
        for handler in self._handlers:
            try:
                handler.on_add(obj)
            except Exception:
                self._handler_failed("add", obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        for handler in self._handlers:
            try:
                handler.on_update(old, new)
            except Exception:
                self._handler_failed("update", new)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        for handler in self._handlers:
            try:
                handler.on_delete(obj)
            except Exception:
                self._handler_failed("delete", obj)

    def _handler_failed(self, notification: str, subject: Obj | DeletedFinalStateUnknown) -> None:
        # Only the key: object contents (Secrets!) never reach the logs.
        self._log.exception("event_handler_failed", notification=notification, key=_safe_key(subject))

    # -- lifecycle -------------------------------------------------------------

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the store is current at; an informer of several namespaces has one
        per namespace and no single answer."""
        if len(self._reflectors) > 1:
            raise ValueError(f"informer for {self.resource} watches {len(self._reflectors)} namespaces")
        return self._reflectors[0].last_sync_resource_version

    def has_synced(self) -> bool:
        """True once the initial LIST of every namespace is in the store and was delivered to the
        handlers."""
        return all(reflector.has_synced for reflector in self._reflectors)

    async def wait_for_sync(self) -> None:
        """Wait for the initial sync; raises if the informer stops before it.

        Waits indefinitely otherwise (e.g. while RBAC forbids the list): bound it
        with `asyncio.timeout` where that matters.
        """
        if self.has_synced():
            return
        if self._task is None:
            raise RuntimeError(f"informer for {self.resource} is not running")
        synced = asyncio.ensure_future(self._wait_for_reflectors())
        try:
            await asyncio.wait({synced, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            synced.cancel()
        if not self.has_synced():
            raise RuntimeError(f"informer for {self.resource} stopped before its initial sync")

    async def _wait_for_reflectors(self) -> None:
        await asyncio.gather(*(reflector.wait_for_sync() for reflector in self._reflectors))

    async def run(self) -> None:
        """Run the reflectors until cancelled.

        `start`/`stop` manage this as a task; use either them or `run`, never both.
        """
        self._log.debug("informer_started")
        try:
            async with asyncio.TaskGroup() as group:
                for reflector in self._reflectors:
                    group.create_task(reflector.run())
        finally:
            self._log.debug("informer_stopped")

    def start(self) -> None:
        """Start running in a background task; a no-op if already running."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self.run(),
                name=f"informer:{self.resource}:{','.join(self.namespaces)}"
                f"{':metadata' if self.metadata_only else ''}",
            )

    @property
    def running(self) -> bool:
        """Whether start() launched it and it has not stopped."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Cancel the watch and wait until it has ended. The cache keeps its contents."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


InformerKey = tuple[Resource, tuple[str, ...], bool, str | None, str | None]
"""(resource, namespaces, metadata_only, label selector, field selector): one informer each."""


class SharedInformerFactory:
    """One SharedInformer per (resource, namespaces, metadata_only, selectors), so all controllers
    share watches."""

    def __init__(
        self,
        rest: RestClient,
        *,
        namespace: Namespaces = None,
        label_selectors: Mapping[Resource, str] | None = None,
        transform: Transform | None = strip_managed_fields,
        metadata_transforms: Mapping[Resource, Transform] | None = None,
        watch_timeout: float | None = None,
        backoff: Callable[[], WatchBackoff] = WatchBackoff,
        clock: Clock | None = None,
    ) -> None:
        """`namespace` is the default for `informer_for`: one, several, or None for all.

        `label_selectors` limits the full (not metadata-only) informer of a
        resource to matching objects, as controller-runtime's
        `cache.Options.ByObject[...].Label`; a metadata-only informer sees
        every object, so the rest of the kind can still be watched cheaply.

        `metadata_transforms` narrows what a resource's metadata-only informers keep, after
        `transform`, before an object enters the cache (controller-runtime's ByObject Transform), for
        example `keep_metadata(...)`: a Secret's annotations may hold its data.
        """
        self._rest = rest
        self.namespace = namespace
        self.label_selectors: Mapping[Resource, str] = dict(label_selectors or {})
        self._transform = transform
        self.metadata_transforms: Mapping[Resource, Transform] = dict(metadata_transforms or {})
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self._clock = clock
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._by_kind: dict[tuple[Resource, bool], list[SharedInformer]] = {}
        """Each kind's informers, the default scope's first: what every cache read looks through."""
        self._started = False
        # Every cache read looks its informer up by this key: the default scope is computed once.
        self._default_scope = namespace_scope(namespace)

    def _key(
        self,
        resource: Resource,
        namespace: Namespaces,
        metadata_only: bool,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> InformerKey:
        if label_selector is None and not metadata_only:
            label_selector = self.label_selectors.get(resource)
        if not resource.namespaced:
            scope: tuple[str, ...] = ()
        else:
            scope = self._default_scope if namespace is None else namespace_scope(namespace)
        return (resource, scope, metadata_only, label_selector or None, field_selector or None)

    def existing(
        self,
        resource: Resource,
        namespace: Namespaces = None,
        *,
        metadata_only: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> SharedInformer | None:
        """The informer `informer_for` would return, if one was handed out; never creates one."""
        key = self._key(resource, namespace, metadata_only, label_selector, field_selector)
        return self._informers.get(key)

    def registered(self, resource: Resource, *, metadata_only: bool = False) -> list[SharedInformer]:
        """Every informer of resource handed out so far, the factory's default scope first."""
        return self._by_kind.get((resource, metadata_only), [])

    def informer_for(
        self,
        resource: Resource,
        namespace: Namespaces = None,
        *,
        metadata_only: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> SharedInformer:
        """The shared informer for this resource.

        `namespace` None means the factory's namespaces; NAMESPACE_ALL means every
        namespace even when the factory has some; the same namespaces in any order share
        one informer. Ignored for cluster-scoped
        resources. `metadata_only` gives a separate informer that caches only
        metadata. `label_selector` and `field_selector` are sent with the LIST and WATCH, so the
        API server filters (controller-runtime's cache ByObject); the label selector defaults to
        the factory's `label_selectors` for a full informer. Each distinct scope and selector pair
        is its own informer. Informers created after `start` start at once.
        """
        key = self._key(resource, namespace, metadata_only, label_selector, field_selector)
        effective, label_selector, field_selector = key[1], key[3], key[4]
        informer = self._informers.get(key)
        if informer is None:
            informer = SharedInformer(
                self._rest,
                resource,
                namespace=effective,
                label_selector=label_selector,
                field_selector=field_selector,
                metadata_only=metadata_only,
                transform=(
                    then(self._transform, self.metadata_transforms.get(resource))
                    if metadata_only
                    else self._transform
                ),
                watch_timeout=self._watch_timeout,
                backoff=self._backoff,
                clock=self._clock,
            )
            self._informers[key] = informer
            kind = self._by_kind.setdefault((resource, metadata_only), [])
            default = key == self._key(resource, None, metadata_only)
            kind.insert(0 if default else len(kind), informer)
            if self._started:
                informer.start()
        return informer

    @property
    def informers(self) -> list[SharedInformer]:
        return list(self._informers.values())

    def start(self) -> None:
        """Start every informer handed out so far, and any handed out later."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def wait_for_cache_sync(self) -> None:
        """Wait until every started informer has synced (bound it with `asyncio.timeout`)."""
        await asyncio.gather(*(informer.wait_for_sync() for informer in self.informers if informer.running))

    async def stop(self) -> None:
        """Stop every informer and wait for their watches to end."""
        self._started = False
        await asyncio.gather(*(informer.stop() for informer in self._informers.values()))
