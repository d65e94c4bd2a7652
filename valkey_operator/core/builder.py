"""Builder-style wiring of a controller onto a manager (controller-runtime's `builder`).

build_controller(manager, "widgets")
    .for_(WIDGETS)
    .owns(CONFIG_MAPS)
    .watches(SECRETS, map_secret_to_widgets)
    .with_workers(4)
    .complete(WidgetReconciler(...))
"""

from __future__ import annotations

import attrs

from valkey_operator.core.controller import DEFAULT_RECONCILE_TIMEOUT, Controller
from valkey_operator.core.handler import (
    MapFunc,
    UpdateFilter,
    request_for_object,
    requests_for_controller_owner,
)
from valkey_operator.core.informer import Namespaces
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Reconciler
from valkey_operator.core.resource import Resource


@attrs.frozen
class _Watch:
    resource: Resource
    map_fn: MapFunc
    namespace: Namespaces
    update_filter: UpdateFilter | None
    metadata_only: bool = False
    label_selector: str | None = None
    field_selector: str | None = None


@attrs.frozen
class ControllerBuilder:
    """Immutable: each step returns a new builder, so partial builders can be shared."""

    manager: Manager
    name: str
    primary: Resource | None = None
    watched: tuple[_Watch, ...] = ()
    workers: int = 1
    reconcile_timeout: float | None = DEFAULT_RECONCILE_TIMEOUT

    def for_(
        self,
        resource: Resource,
        *,
        namespace: Namespaces = None,
        update_filter: UpdateFilter | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ControllerBuilder:
        """The reconciled kind: each of its objects is a Request.

        Here and below: `namespace` is one, several, or NAMESPACE_ALL (None: the manager's scope);
        `update_filter(old, new)` drops updates it returns False for; `label_selector` and
        `field_selector` ("app=web", "metadata.name=x") go to the API server with the LIST and
        WATCH, so the informer and its cache hold only matching objects, and an object that stops
        matching arrives as a delete. A field selector the kind does not support fails its LIST
        (400, retried with backoff and logged)."""
        if self.primary is not None:
            raise ValueError(f"controller {self.name}: for_() was already called")
        watch = _Watch(
            resource,
            request_for_object,
            namespace,
            update_filter,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        return attrs.evolve(self, primary=resource, watched=(*self.watched, watch))

    def owns(
        self,
        resource: Resource,
        *,
        namespace: Namespaces = None,
        update_filter: UpdateFilter | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ControllerBuilder:
        """A kind we create: its events enqueue the controlling owner of the primary kind."""
        if self.primary is None:
            raise ValueError(f"controller {self.name}: call for_() before owns()")
        map_fn = requests_for_controller_owner(self.primary)
        watch = _Watch(resource, map_fn, namespace, update_filter, False, label_selector, field_selector)
        return attrs.evolve(self, watched=(*self.watched, watch))

    def watches(
        self,
        resource: Resource,
        map_fn: MapFunc,
        *,
        namespace: Namespaces = None,
        update_filter: UpdateFilter | None = None,
        metadata_only: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ControllerBuilder:
        """Any kind: map_fn says which Requests an object's change affects.

        `metadata_only` (controller-runtime's `OnlyMetadata`) watches through the
        metadata-only informer: enough when map_fn reads only metadata.
        """
        watch = _Watch(
            resource, map_fn, namespace, update_filter, metadata_only, label_selector, field_selector
        )
        return attrs.evolve(self, watched=(*self.watched, watch))

    def with_workers(self, workers: int) -> ControllerBuilder:
        """Reconcile up to `workers` keys at once (never one key twice at once); default 1."""
        return attrs.evolve(self, workers=workers)

    def with_reconcile_timeout(self, seconds: float | None) -> ControllerBuilder:
        """Cancel a reconcile that runs longer (an error, requeued with backoff); None: no deadline."""
        return attrs.evolve(self, reconcile_timeout=seconds)

    def complete(self, reconciler: Reconciler) -> Controller:
        """Create the controller, hook its watches to shared informers, add it to the manager."""
        if self.primary is None:
            raise ValueError(f"controller {self.name}: for_() is required")
        controller = Controller(
            self.name,
            reconciler,
            workers=self.workers,
            reconcile_timeout=self.reconcile_timeout,
            clock=self.manager.clock,
            registry=self.manager.registry,
        )
        for watch in self.watched:
            informer = self.manager.informer(
                watch.resource,
                watch.namespace,
                metadata_only=watch.metadata_only,
                label_selector=watch.label_selector,
                field_selector=watch.field_selector,
            )
            controller.watch(informer, watch.map_fn, watch.update_filter)
        self.manager.add(controller)
        return controller


def build_controller(manager: Manager, name: str) -> ControllerBuilder:
    """Start wiring a controller named `name` (its metrics' and logs' label) onto manager."""
    return ControllerBuilder(manager, name)
