"""The manager: shared informers, controllers, leader election, metrics and probes, graceful stop.

Start order: HTTP endpoints, then informers (standbys keep warm caches, so a
takeover starts reconciling at once), then leader election, then
controllers. Stop order (SIGTERM): controllers drain in-flight reconciles,
the lease is released, informers and endpoints stop, and the session made
from a RestConfig closes. A leader that misses its renew deadline stops
acting immediately and `run` raises LeadershipLost, so the process exits and
restarts as a standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import structlog
from prometheus_client import REGISTRY, CollectorRegistry

from valkey_operator.core.cache import CacheReader
from valkey_operator.core.client import Client
from valkey_operator.core.clock import Clock, RealClock
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import EventRecorder
from valkey_operator.core.informer import (
    Namespaces,
    SharedInformer,
    SharedInformerFactory,
    namespace_scope,
)
from valkey_operator.core.leaderelection import KubernetesLeaseLock, LeaderElector
from valkey_operator.core.metrics import controller_metrics
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import RestClient
from valkey_operator.core.store import Transform

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from valkey_operator.core import httpserver
    from valkey_operator.core.restconfig import RestConfig

log = structlog.get_logger(__name__)


def default_identity() -> str:
    """Unique per process: hostname (the pod name in a cluster) plus a random suffix, as client-go
    does. Not the pid: in a container it is 1 in every restart, and a restarted process must not
    take over the lease its dead predecessor held as if it were the same holder."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:12]}"


@attrs.frozen
class LeaderElectionConfig:
    """The Lease `lease_name` in `namespace` elects one leader; `identity` names this replica in the
    Lease's holderIdentity (default: hostname, or $POD_NAME, plus a random suffix, new per process);
    timings are client-go's (seconds). Replicas must share lease_name and namespace."""

    lease_name: str
    namespace: str
    identity: str = attrs.field(factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """':8080' -> ('0.0.0.0', 8080); '127.0.0.1:0' -> ephemeral port; '0' -> disabled (None)."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return (host.strip("[]") or "0.0.0.0", int(port))


class Manager:
    """Owns everything controllers share; `run()` until `stop()` (or lost leadership)."""

    def __init__(
        self,
        api_client: RestConfig | ApiClient,
        *,
        field_manager: str,
        namespace: Namespaces = None,
        label_selectors: Mapping[Resource, str] | None = None,
        metadata_transforms: Mapping[Resource, Transform] | None = None,
        metrics_bind_address: str = ":8080",
        metrics_secure: bool = False,
        health_probe_bind_address: str = ":8081",
        leader_election: LeaderElectionConfig | None = None,
        registry: CollectorRegistry = REGISTRY,
        graceful_shutdown_timeout: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        """`api_client`: a RestConfig (the manager's own session, closed when `run()` ends) or an
        embedder's kubernetes-asyncio ApiClient (its owner closes it). `label_selectors` limits what
        a resource's full informer caches, `metadata_transforms` what its metadata-only informers keep (see
        SharedInformerFactory). `metrics_secure`: /metrics over HTTPS, only for callers allowed
        `get /metrics` (core/metricsauth.py)."""
        self.rest = RestClient(api_client)
        self.client = Client(self.rest, field_manager)
        self.namespaces = namespace_scope(namespace)
        """The namespaces the manager's informers watch by default, sorted; () for all."""
        self.informers = SharedInformerFactory(
            self.rest,
            namespace=self.namespaces,
            label_selectors=label_selectors,
            metadata_transforms=metadata_transforms,
        )
        self.registry = registry
        self.clock = clock or RealClock()
        self.leader_election = leader_election
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.controllers: list[Controller] = []
        self._metrics_address = parse_bind_address(metrics_bind_address)
        self._metrics_secure = metrics_secure
        self._probe_address = parse_bind_address(health_probe_bind_address)
        self.metrics_endpoint: httpserver.HttpEndpoint | None = None
        self.probe_endpoint: httpserver.HttpEndpoint | None = None
        self._scrape_hooks: list[Callable[[], Awaitable[bytes]]] = []
        self._stop = asyncio.Event()
        self._caches_synced = False
        self._identity = leader_election.identity if leader_election else default_identity()

    # -- wiring ------------------------------------------------------------------

    @property
    def cache(self) -> CacheReader:
        """Reads of the registered informers' caches; reading an unregistered kind is an error."""
        return CacheReader(self.informers)

    def in_scope(self, namespace: str) -> bool:
        """Whether objects of namespace are the manager's to reconcile (always, when it has no scope)."""
        return not self.namespaces or namespace in self.namespaces

    def informer(
        self,
        resource: Resource,
        namespace: Namespaces = None,
        *,
        metadata_only: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> SharedInformer:
        """The shared informer for resource, scoped to namespace(s) (default: the manager's scope).

        Pass NAMESPACE_ALL to watch every namespace regardless of the manager's scope,
        `metadata_only=True` for an informer that caches only metadata, and selectors for one the
        API server filters (each distinct scope and selector pair is its own informer).
        """
        return self.informers.informer_for(
            resource,
            namespace=namespace,
            metadata_only=metadata_only,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def add(self, controller: Controller) -> None:
        """Run controller with the others (the builder's `complete` calls this)."""
        self.controllers.append(controller)

    def add_scrape_hook(self, hook: Callable[[], Awaitable[bytes]]) -> None:
        """Await hook at each /metrics request and append the exposition text it returns: for families
        read on scrape and rendered by their owner (not registered in the registry). The hook bounds
        its own time (a scrape waits for it); if it raises, its families are left out of that scrape."""
        self._scrape_hooks.append(hook)

    def event_recorder(self, controller_name: str) -> EventRecorder:
        """An EventRecorder whose Events name controller_name and this replica as their source."""
        return EventRecorder(self.client, controller_name, self._identity, self.clock)

    # -- lifecycle ---------------------------------------------------------------

    def healthy(self) -> bool:
        """What /healthz serves: always True while the process runs its loop."""
        return True

    def ready(self) -> bool:
        """What /readyz serves: the caches have synced and stop() was not called."""
        return self._caches_synced and not self._stop.is_set()

    def stop(self) -> None:
        """Ask run() to shut down gracefully (safe from a signal handler)."""
        self._stop.set()

    async def run(self) -> None:
        """Run until stop(); raises LeadershipLost if the lease is lost while leading."""
        await self._start_endpoints()
        self.informers.start()
        try:
            if not await self._until_stopped(self.informers.wait_for_cache_sync()):
                return
            self._caches_synced = True
            if self.leader_election is None:
                await self._run_controllers(renewal=None)
                return
            elector = self._new_elector(self.leader_election)
            self._set_leader(False)
            if not await self._until_stopped(elector.acquire()):
                return
            self._set_leader(True)
            try:
                await self._run_controllers(renewal=elector.keep_renewing())
            finally:
                self._set_leader(False)
            await elector.release()
        finally:
            await self.informers.stop()
            await self._stop_endpoints()
            await self.rest.close()
            log.info("manager stopped")

    async def _run_controllers(self, renewal: Coroutine[None, None, None] | None) -> None:
        """Run controllers until stop() (then drain them) or until renewal fails (then abandon them)."""
        tasks = [asyncio.create_task(c.run(), name=f"controller-{c.name}") for c in self.controllers]
        stopping = asyncio.create_task(self._stop.wait())
        renewing = asyncio.create_task(renewal, name="lease-renewal") if renewal else None
        waiting: set[asyncio.Task[Any]] = {stopping, *tasks, *([renewing] if renewing else [])}
        try:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopping}:
                task.result()  # LeadershipLost, or a controller that crashed
            await self._shutdown_controllers()
        finally:
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)

    def _set_leader(self, leading: bool) -> None:
        assert self.leader_election is not None
        gauge = controller_metrics(self.registry).leader_election_master_status
        gauge.labels(name=self.leader_election.lease_name).set(1 if leading else 0)

    def _new_elector(self, config: LeaderElectionConfig) -> LeaderElector:
        return LeaderElector(
            KubernetesLeaseLock(self.client, config.namespace, config.lease_name),
            config.identity,
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
            clock=self.clock,
        )

    async def _until_stopped(self, awaitable: Awaitable[Any]) -> bool:
        """Await awaitable unless stop() comes first; True when it completed."""
        work = asyncio.ensure_future(awaitable)
        stopping = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            stopping.cancel()
            work.result()
            return True
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        return False

    async def _shutdown_controllers(self) -> None:
        await asyncio.gather(
            *(controller.shutdown(self.graceful_shutdown_timeout) for controller in self.controllers)
        )

    async def _start_endpoints(self) -> None:
        if self._metrics_address is None and self._probe_address is None:
            return
        from valkey_operator.core import httpserver  # aiohttp's server side: imported only when used

        if self._metrics_address is not None:
            middlewares, context = [], None
            if self._metrics_secure:
                from valkey_operator.core import metricsauth  # cryptography: imported only when used

                middlewares.append(metricsauth.guarded(metricsauth.MetricsAuthorizer(self.rest, self.clock)))
                context = metricsauth.self_signed_context(self._metrics_address[0], self.clock)
            app = httpserver.metrics_app(self.registry, self._scrape_hooks, middlewares)
            self.metrics_endpoint = httpserver.HttpEndpoint(app, *self._metrics_address, ssl_context=context)
            await self.metrics_endpoint.start()
        if self._probe_address is not None:
            app = httpserver.probes_app(self.healthy, self.ready)
            self.probe_endpoint = httpserver.HttpEndpoint(app, *self._probe_address)
            await self.probe_endpoint.start()

    async def _stop_endpoints(self) -> None:
        for endpoint in (self.metrics_endpoint, self.probe_endpoint):
            if endpoint is not None:
                await endpoint.stop()
