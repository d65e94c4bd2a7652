"""The bed's kube-proxy and load-balancer implementation, for NodePort and LoadBalancer Services.

Informers on Services and Pods (every namespace) mark the state dirty; one task then recomputes
everything (level-triggered: a missed or merged event cannot leave a stale listener) and
reconciles:

- every TCP port of a NodePort or LoadBalancer Service that has a nodePort is listened on at each
  live node's address (127.0.100.N:nodePort); with externalTrafficPolicy Local a node forwards to
  its own endpoints only, and resets the client when it has none;
- each LoadBalancer Service (without a loadBalancerClass) gets an ingress address from the pool
  (loopback.py), written to status.loadBalancer.ingress, and is listened on at address:port;
  the address is released when the Service goes or stops being a LoadBalancer;
- connections whose endpoint left the Service (pod deleted, new pod IP, label changed) are reset.

A listener that cannot bind (EADDRINUSE: another bed's Service, or any other process) is retried
every RETRY_SECONDS, with a Warning Event `PortInUse` on the Service and a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
from collections.abc import Mapping
from typing import Any

import structlog

from valkey_operator.core.client import Client
from valkey_operator.core.events import NORMAL, WARNING, EventRecorder
from valkey_operator.core.informer import FuncHandler, SharedInformer
from valkey_operator.core.resource import PODS, SERVICES
from valkey_operator.core.rest import ApiError, TransportError
from valkey_testbed.serviceproxy import endpoints as ep
from valkey_testbed.serviceproxy.endpoints import Backend, Route
from valkey_testbed.serviceproxy.listener import Listener
from valkey_testbed.serviceproxy.loopback import AddressPool, require_loopback

Obj = dict[str, Any]
Address = tuple[str, int]
log = structlog.get_logger(__name__)

RETRY_SECONDS = 1.0
ALLOCATION_ATTEMPTS = 64
CONTROLLER = "testbed-service-proxy"
BY_NAMESPACE = "namespace"


def _ingress_ips(service: Obj) -> list[str]:
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [str(entry["ip"]) for entry in ingress if entry.get("ip")]


def _reference(service: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": service["metadata"]}


class ServiceProxy:
    """NodePorts on `nodes` (name -> InternalIP) and load-balancer addresses from `pool`."""

    def __init__(self, client: Client, nodes: Mapping[str, str], pool: AddressPool | None = None) -> None:
        self.client = client
        self.nodes = {name: require_loopback(ip) for name, ip in nodes.items()}
        self.pool = pool or AddressPool()
        self.services = SharedInformer(client.rest, SERVICES)
        self.pods = SharedInformer(
            client.rest,
            PODS,
            transform=ep.slim_pod,
            indexers={BY_NAMESPACE: lambda pod: [pod["metadata"]["namespace"]]},
        )
        self.events = EventRecorder(client, CONTROLLER, "kubelet")
        self._listeners: dict[Address, Listener] = {}
        self._endpoints: dict[tuple[str, str], list[Backend]] = {}
        self._ingress: dict[str, str] = {}
        """Service uid -> its load-balancer address"""
        self._reported: dict[str, str] = {}
        """Service uid -> address written to its status, until the cache shows it"""
        self._failing: set[Address] = set()
        self._down: set[str] = set()
        self._dirty = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        kick = FuncHandler(
            on_add=lambda _: self._dirty.set(),
            on_update=lambda _old, _new: self._dirty.set(),
            on_delete=lambda _: self._dirty.set(),
        )
        self.services.add_event_handler(kick)
        self.pods.add_event_handler(
            FuncHandler(
                on_add=lambda _: self._dirty.set(),
                on_update=self._pod_updated,
                on_delete=lambda _: self._dirty.set(),
            )
        )
        self.services.start()
        self.pods.start()
        await asyncio.gather(self.services.wait_for_sync(), self.pods.wait_for_sync())
        await self.sync()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="service-proxy")
        log.info("service_proxy_started", nodes=self.nodes, pool=str(self.pool.network))

    async def stop(self) -> None:
        """Stop following the API, close every listener and reset every connection."""
        if self._retry is not None:
            self._retry.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.gather(self.services.stop(), self.pods.stop())
        async with self._lock:
            listeners, self._listeners = list(self._listeners.values()), {}
            await asyncio.gather(*(listener.close() for listener in listeners))

    async def node_down(self, node: str) -> None:
        """The node failed: its nodePorts close, as its kube-proxy would die with it."""
        self._down.add(node)
        await self.sync()

    async def node_up(self, node: str) -> None:
        self._down.discard(node)
        await self.sync()

    def snapshot(self) -> list[Obj]:
        """Every listener: address, Service, port, node (Local only), open connections."""
        return [
            {
                "listen": listener.address,
                "service": listener.route.service,
                "port": listener.route.port,
                "node": listener.route.node,
                "connections": len(listener.connections),
            }
            for listener in self._listeners.values()
        ]

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if not ep.same_pod(old, new):
            self._dirty.set()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.sync()
            except Exception:
                log.exception("service_proxy_sync_failed")
                self._later()

    def _later(self) -> None:
        """Another pass in RETRY_SECONDS (one pending at a time)."""
        loop = asyncio.get_running_loop()
        if self._retry is None or self._retry.when() <= loop.time():
            self._retry = loop.call_later(RETRY_SECONDS, self._dirty.set)

    # -- one pass --------------------------------------------------------------------------

    async def sync(self) -> None:
        """Make listeners, addresses and connections match the cached Services and Pods."""
        async with self._lock:
            want: dict[Address, Route] = {}
            endpoints: dict[tuple[str, str], list[Backend]] = {}
            balanced: dict[str, Obj] = {}
            nodes = {name: ip for name, ip in self.nodes.items() if name not in self._down}
            for service in self.services.store.list():
                if not ep.is_external(service):
                    continue
                key = ep.service_key(service)
                pods = self.pods.store.by_index(BY_NAMESPACE, service["metadata"]["namespace"])
                for port in ep.tcp_ports(service):
                    route = Route(key, ep.port_key(port))
                    endpoints[(key, route.port)] = ep.backends(service, port, pods)
                    if port.get("nodePort"):
                        for node, ip in nodes.items():
                            local = node if ep.is_local(service) else None
                            want[(ip, int(port["nodePort"]))] = Route(key, route.port, local)
                if ep.is_load_balancer(service) and ep.tcp_ports(service):
                    balanced[service["metadata"]["uid"]] = service
            self._endpoints = endpoints
            await self._release_gone(balanced)
            for uid, service in balanced.items():
                ingress = self._ingress.get(uid) or await self._allocate(service)
                if ingress is None:
                    continue
                for port in ep.tcp_ports(service):
                    want[(ingress, int(port["port"]))] = Route(ep.service_key(service), ep.port_key(port))
                await self._report(service, ingress)
            await self._reconcile(want)
            self._reset_gone()

    def _candidates(self, route: Route) -> list[Backend]:
        return ep.choose(self._endpoints.get((route.service, route.port), []), route.node)

    def _current(self, route: Route, backend: Backend) -> bool:
        return any(
            (b.ip, b.port) == (backend.ip, backend.port)
            for b in self._endpoints.get((route.service, route.port), [])
        )

    def _gone(self, route: Route, backend: Backend) -> bool:
        return not self._current(route, backend)

    def _reset_gone(self) -> None:
        """Reset the connections of endpoints that left their Service."""
        for listener in self._listeners.values():
            reset = listener.reset_where(functools.partial(self._gone, listener.route))
            if reset:
                log.info(
                    "service_proxy_reset",
                    listen=listener.address,
                    service=listener.route.service,
                    count=reset,
                )

    # -- listeners -------------------------------------------------------------------------

    async def _reconcile(self, want: dict[Address, Route]) -> None:
        for address, listener in list(self._listeners.items()):
            if address in want:
                listener.route = want[address]
            else:
                del self._listeners[address]
                await listener.close()
                log.info("service_proxy_closed", listen=listener.address, service=listener.route.service)
        self._failing &= set(want)
        for address, route in want.items():
            if address not in self._listeners:
                await self._listen(address, route)

    async def _listen(self, address: Address, route: Route) -> None:
        """Bind a listener; one that cannot is retried, reported once until it binds."""
        listener = Listener(address[0], address[1], route, self._candidates, self._current)
        try:
            await listener.open()
        except OSError as exc:
            self._later()
            if address not in self._failing:
                self._failing.add(address)
                await self._bind_failed(listener, exc)
            return
        self._listeners[address] = listener
        self._failing.discard(address)
        log.info("service_proxy_listening", listen=listener.address, service=route.service, node=route.node)

    async def _bind_failed(self, listener: Listener, exc: OSError) -> None:
        taken = exc.errno == errno.EADDRINUSE
        note = (
            f"{listener.address} is in use by another process (another test bed's Service?): "
            f"retrying every {RETRY_SECONDS:g}s"
            if taken
            else f"cannot listen on {listener.address}: {exc}; retrying every {RETRY_SECONDS:g}s"
        )
        log.warning(
            "service_proxy_bind_failed",
            listen=listener.address,
            service=listener.route.service,
            error=str(exc),
        )
        service = self.services.store.get_by_key(listener.route.service)
        if service is not None:
            await self.events.event(
                _reference(service), WARNING, "PortInUse" if taken else "ListenFailed", note, "Listen"
            )

    # -- load-balancer addresses ---------------------------------------------------------------

    async def _allocate(self, service: Obj) -> str | None:
        """An address with every port of the Service bound on it (the binding is the claim)."""
        key, uid = ep.service_key(service), service["metadata"]["uid"]
        current = _ingress_ips(service)
        candidates = self.pool.candidates(current[0] if current else None)
        for _, ip in zip(range(ALLOCATION_ATTEMPTS), candidates, strict=False):
            opened: list[Listener] = []
            for port in ep.tcp_ports(service):
                route = Route(key, ep.port_key(port))
                listener = Listener(ip, int(port["port"]), route, self._candidates, self._current)
                try:
                    await listener.open()
                except OSError as exc:
                    await asyncio.gather(*(o.close() for o in opened))
                    opened = []
                    if exc.errno != errno.EADDRINUSE:
                        await self._allocation_failed(service, f"{ip}:{port['port']}: {exc}")
                        return None
                    break
                opened.append(listener)
            if opened:
                self.pool.hold(ip)
                self._ingress[uid] = ip
                self._listeners.update({(o.ip, o.port): o for o in opened})
                log.info("service_proxy_ip_allocated", service=key, ip=ip)
                await self.events.event(
                    _reference(service), NORMAL, "IPAllocated", f"Assigned IP {ip}", "Allocate"
                )
                return ip
        await self._allocation_failed(service, f"no free address in {self.pool.network}")
        return None

    async def _allocation_failed(self, service: Obj, why: str) -> None:
        self._later()
        log.warning("service_proxy_allocation_failed", service=ep.service_key(service), error=why)
        await self.events.event(_reference(service), WARNING, "AllocationFailed", why, "Allocate")

    async def _report(self, service: Obj, ip: str) -> None:
        """Write the address to status.loadBalancer.ingress, once per change."""
        uid = service["metadata"]["uid"]
        if _ingress_ips(service) == [ip]:
            self._reported.pop(uid, None)
            return
        if self._reported.get(uid) == ip:
            return  # written; the watch has not brought it back yet
        patch = {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}
        meta = service["metadata"]
        try:
            await self.client.patch_status(SERVICES, meta["name"], patch, meta["namespace"])
        except (ApiError, TransportError) as exc:
            log.warning("service_proxy_status_failed", service=ep.service_key(service), error=str(exc))
            self._later()
            return
        self._reported[uid] = ip

    async def _release_gone(self, balanced: dict[str, Obj]) -> None:
        """Addresses of Services deleted or no longer LoadBalancers go back to the pool."""
        for uid, ip in list(self._ingress.items()):
            if uid in balanced:
                continue
            del self._ingress[uid]
            self._reported.pop(uid, None)
            for address in [a for a in self._listeners if a[0] == ip]:
                await self._listeners.pop(address).close()
            self.pool.release(ip)
            log.info("service_proxy_ip_released", ip=ip)
            still = next((s for s in self.services.store.list() if s["metadata"]["uid"] == uid), None)
            if still is not None and ip in _ingress_ips(still):
                meta = still["metadata"]
                with contextlib.suppress(ApiError, TransportError):
                    await self.client.patch_status(
                        SERVICES,
                        meta["name"],
                        {"status": {"loadBalancer": {"ingress": None}}},
                        meta["namespace"],
                    )
