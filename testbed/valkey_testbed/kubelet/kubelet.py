"""The process kubelet: several nodes in one asyncio process, running their pods as processes.

    kubelet = Kubelet(client, nodes=3, zones=("a", "b", "c"), sync_delay=2.0, state_dir=DIR,
                      api_port=6443)
    await kubelet.start()
    await kubelet.fail_node("node-2")     # heartbeats stop, its processes die, pods stay in the API
    await kubelet.recover_node("node-2")  # heartbeats resume, same pods, new pod IPs
    # like a reboot: disk emptyDirs and local-path volumes keep their contents, Memory (tmpfs)
    # emptyDirs come back empty
    await kubelet.fail_node("node-2", lose_disk=True)  # as above, and the node's disk is wiped:
    # its local-path volume directories and every emptyDir of its pods are gone
    await kubelet.stop()

Pods bound to our nodes come from one informer per node (fieldSelector
spec.nodeName=NODE). ConfigMaps and Secrets come from cluster-wide informers:
they feed env vars and volumes, and a change to one refreshes the volumes of
the pods that read it after `sync_delay` seconds (a real kubelet takes up to
its sync period plus its cache TTL, about a minute).

In-place resize (pods/resize): a pod whose spec resources differ from what its
worker allocated is admitted against its node's allocatable beside the other
pods' allocations (resize.py); an admitted resize is allocated and actuated by
the worker, one that is not leaves PodResizePending (Infeasible, or Deferred:
retried when a pod leaves the node, after another resize, and every resync).

The process also runs the nodes' service proxy (valkey_testbed.serviceproxy), as each real node
runs a kube-proxy: NodePort Services listen on the nodes' addresses, LoadBalancer Services get an
address of their own; a failed node's nodePorts close with it. `service_proxy=False` leaves it out.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from valkey_operator.core.client import Client
from valkey_operator.core.informer import FuncHandler, SharedInformer
from valkey_operator.core.resource import CONFIG_MAPS, PODS, SECRETS
from valkey_operator.core.store import DeletedFinalStateUnknown
from valkey_testbed import localpath
from valkey_testbed.images import ImageEntry, resolve_image
from valkey_testbed.kubelet import podprocs, resize
from valkey_testbed.kubelet.ipam import IPAllocator
from valkey_testbed.kubelet.logserver import LogServer
from valkey_testbed.kubelet.nodes import CAPACITY, NodeAgent, node_ip
from valkey_testbed.kubelet.pods import PodContext, PodWorker
from valkey_testbed.serviceproxy import ServiceProxy

Obj = dict[str, Any]
log = structlog.get_logger(__name__)

RESYNC_SECONDS = 60.0
SHUTDOWN_GRACE = 2.0


ZONES = ("a", "b", "c")
"""The zones nodes are labelled with, round robin (topology.kubernetes.io/zone)."""


def node_name(index: int) -> str:
    """The name of node `index` (0-based) of a bed, real nodes' too."""
    return f"node-{index + 1}"


def node_names(count: int) -> list[str]:
    return [node_name(index) for index in range(count)]


def zone_of(index: int, zones: Sequence[str] = ZONES) -> str:
    """The zone of node `index`, real nodes' too."""
    return zones[index % len(zones)]


def kubelet_dir(state_dir: Path) -> Path:
    return state_dir / "kubelet"


class Kubelet:
    """Nodes plus pod workers; see the module docstring."""

    def __init__(
        self,
        client: Client,
        nodes: int = 3,
        zones: Sequence[str] = ZONES,
        sync_delay: float = 10.0,
        state_dir: Path = Path("."),
        *,
        api_host: str = "127.0.0.1",
        api_port: int = 443,
        backoff_base: float = 10.0,
        backoff_max: float = 300.0,
        lease_interval: float = 3.0,
        images: Callable[[str], ImageEntry | None] = resolve_image,
        service_proxy: bool = True,
    ) -> None:
        self.client = client
        self.sync_delay = sync_delay
        self.state_dir = state_dir
        self.dir = kubelet_dir(state_dir)
        self.agents = {
            name: NodeAgent(client, name, zone_of(index, zones), node_ip(index), lease_interval)
            for index, name in enumerate(node_names(nodes))
        }
        rest = client.rest
        self.configmaps = SharedInformer(rest, CONFIG_MAPS)
        self.secrets = SharedInformer(rest, SECRETS)
        self.pod_informers = {
            name: SharedInformer(rest, PODS, field_selector=f"spec.nodeName={name}") for name in self.agents
        }
        self.ctx = PodContext(
            client=client,
            kubelet_dir=self.dir,
            ipam=IPAllocator(self.dir / "ipam.json"),
            configmaps=lambda ns, name: self.configmaps.store.get_by_key(f"{ns}/{name}"),
            secrets=lambda ns, name: self.secrets.store.get_by_key(f"{ns}/{name}"),
            api_host=api_host,
            api_port=api_port,
            resolve_image=images,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            node_allocatable=CAPACITY,
        )
        self.log_servers = {name: LogServer(agent.ip, self.worker) for name, agent in self.agents.items()}
        self.proxy = (
            ServiceProxy(client, {name: agent.ip for name, agent in self.agents.items()})
            if service_proxy
            else None
        )
        self.workers: dict[str, PodWorker] = {}
        self._dying: dict[str, PodWorker] = {}
        self._deferred_resizes: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resync: asyncio.Task[None] | None = None

    # -- life cycle ----------------------------------------------------------------------

    async def start(self, timeout: float = 60.0) -> None:
        """Register the nodes, sync the caches, and start running the pods bound to us."""
        self.dir.mkdir(parents=True, exist_ok=True)
        leftovers = podprocs.sweep(self.dir)  # a crashed predecessor's processes
        if leftovers:
            log.warning("killed_leftover_pod_processes", count=leftovers)
        async with asyncio.timeout(timeout):
            for kind, source in (("ConfigMap", self.configmaps), ("Secret", self.secrets)):
                source.add_event_handler(
                    FuncHandler(
                        on_add=lambda obj, kind=kind: self._source_changed(kind, obj),  # type: ignore[misc]
                        on_update=lambda old, new, kind=kind: self._source_changed(kind, new, old),  # type: ignore[misc]
                        on_delete=lambda obj, kind=kind: self._source_changed(kind, obj),  # type: ignore[misc]
                    )
                )
                source.start()
            await asyncio.gather(self.configmaps.wait_for_sync(), self.secrets.wait_for_sync())
            for name, agent in self.agents.items():
                await self.log_servers[name].start()
                agent.kubelet_port = self.log_servers[name].port
                await agent.register()
                agent.start()
            for name, informer in self.pod_informers.items():
                informer.add_event_handler(
                    FuncHandler(
                        on_add=lambda pod, node=name: self._pod_added(node, pod),  # type: ignore[misc]
                        on_update=lambda old, new: self._pod_updated(new),
                        on_delete=self._pod_deleted,
                    )
                )
                informer.start()
            await asyncio.gather(*(i.wait_for_sync() for i in self.pod_informers.values()))
            if self.proxy is not None:
                await self.proxy.start()
        self._remove_orphan_dirs()
        self._resync = asyncio.get_running_loop().create_task(self._resync_loop())
        log.info("kubelet_started", nodes=list(self.agents), sync_delay=self.sync_delay)

    async def stop(self) -> None:
        """Stop watching and kill every pod process (SIGTERM, then SIGKILL): the test bed goes down."""
        if self._resync is not None:
            self._resync.cancel()
        if self.proxy is not None:
            await self.proxy.stop()
        await asyncio.gather(*(i.stop() for i in self.pod_informers.values()))
        await asyncio.gather(*(w.shutdown(SHUTDOWN_GRACE) for w in self.workers.values()))
        await asyncio.gather(*(a.stop() for a in self.agents.values()))
        await asyncio.gather(*(server.stop() for server in self.log_servers.values()))
        await asyncio.gather(self.configmaps.stop(), self.secrets.stop())
        for task in list(self._tasks):
            task.cancel()
        log.info("kubelet_stopped")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- pods ----------------------------------------------------------------------------

    def _pod_added(self, node: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        if uid in self.workers:
            self.workers[uid].update(pod)
            self._consider_resize(self.workers[uid])
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            if pod["metadata"].get("deletionTimestamp"):
                meta = pod["metadata"]
                self._spawn(
                    self.client.delete(PODS, meta["name"], meta["namespace"], uid=uid, grace_period_seconds=0)
                )
            return
        agent = self.agents[node]
        worker = PodWorker(self.ctx, node, agent.ip, pod)
        worker.adopt_previous_status()
        self.workers[uid] = worker
        if agent.failed:
            worker.suspended = True
        else:
            worker.start()
            self._consider_resize(worker)  # a restarted kubelet meets a resize it had not admitted

    def _pod_updated(self, pod: Obj) -> None:
        worker = self.workers.get(pod["metadata"]["uid"])
        if worker is not None:
            worker.update(pod)
            self._consider_resize(worker)

    # -- in-place resize -------------------------------------------------------------------

    def _consider_resize(self, worker: PodWorker) -> None:
        """Admit the pod's resize, if it asks for one, against its node (see resize.py)."""
        if not worker.can_resize:
            return
        desired = resize.allocation_of(worker.pod)
        if resize.same_allocation(desired, worker.allocation):
            self._deferred_resizes.discard(worker.uid)
            worker.resize_settled()
            return
        others = [
            w.requests()
            for w in (*self.workers.values(), *self._dying.values())
            if w.node == worker.node and w is not worker and w.phase() not in ("Succeeded", "Failed")
        ]
        verdict = resize.admit(
            resize.pod_requests(worker.pod, desired), resize.sum_requests(others), self.ctx.node_allocatable
        )
        if not verdict.fit:
            worker.defer_resize(verdict)
            if verdict.reason == resize.DEFERRED:
                self._deferred_resizes.add(worker.uid)
            else:
                self._deferred_resizes.discard(worker.uid)
            return
        self._deferred_resizes.discard(worker.uid)
        worker.allocate(desired)
        self._retry_deferred_resizes(worker.node)  # it may have given room back

    def _retry_deferred_resizes(self, node: str | None = None) -> None:
        for uid in sorted(self._deferred_resizes):
            worker = self.workers.get(uid)
            if worker is None:
                self._deferred_resizes.discard(uid)
            elif node is None or worker.node == node:
                self._consider_resize(worker)

    def _pod_deleted(self, pod: Obj | DeletedFinalStateUnknown) -> None:
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        uid = (obj or {}).get("metadata", {}).get("uid")
        worker = self.workers.pop(uid, None) if uid else None
        if worker is not None:
            self._dying[uid] = worker  # still reported until its processes are gone
            self._spawn(self._forget(uid, worker))

    async def _forget(self, uid: str, worker: PodWorker) -> None:
        try:
            await worker.forget()
        finally:
            self._dying.pop(uid, None)
            self._retry_deferred_resizes(worker.node)  # its allocation is free now

    def _remove_orphan_dirs(self) -> None:
        """Directories of pods that no longer exist (deleted while no kubelet ran)."""
        pods = self.dir / "pods"
        if pods.is_dir():
            for entry in pods.iterdir():
                if entry.name not in self.workers:
                    shutil.rmtree(entry, ignore_errors=True)

    # -- configMaps and secrets ------------------------------------------------------------

    def _source_changed(self, kind: str, obj: Obj | DeletedFinalStateUnknown, old: Obj | None = None) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            return
        if old is not None and (old.get("data"), old.get("binaryData")) == (
            obj.get("data"),
            obj.get("binaryData"),
        ):
            return
        meta = obj["metadata"]
        ref = (kind, meta["namespace"], meta["name"])
        affected = [w for w in self.workers.values() if ref in w.volumes.references(w.pod)]
        if affected:
            loop = asyncio.get_running_loop()
            for worker in affected:
                loop.call_later(self.sync_delay, self._spawn, worker.refresh_volumes())

    async def _resync_loop(self) -> None:
        """Now and then refresh every pod's volumes (token rotation, missed events)."""
        while True:
            await asyncio.sleep(RESYNC_SECONDS)
            for worker in list(self.workers.values()):
                await worker.refresh_volumes()
            self._retry_deferred_resizes()

    # -- node failure ----------------------------------------------------------------------

    async def fail_node(self, name: str, lose_disk: bool = False) -> None:
        """Stop the node's heartbeats and kill its processes; its pods stay as the API shows them.

        Like a power loss: Memory (tmpfs) emptyDirs of its pods lose their contents, disk ones and the
        node's local-path volumes keep them. With lose_disk the node's disk is gone as well (a node
        replaced under the same name with a blank disk): its directory, holding its local-path
        volumes, is removed and so is every emptyDir of its pods.
        """
        agent = self.agents[name]
        await agent.fail()
        if self.proxy is not None:
            await self.proxy.node_down(name)
        workers = [w for w in self.workers.values() if w.node == name]
        await asyncio.gather(*(w.suspend(lose_disk) for w in workers))
        if lose_disk:
            await asyncio.to_thread(shutil.rmtree, localpath.node_dir(self.state_dir, name), True)
        log.info("node_failed", node=name, lose_disk=lose_disk)

    async def recover_node(self, name: str) -> None:
        """Heartbeats again; the node's pods start again on new pod IPs, disk emptyDirs intact."""
        agent = self.agents[name]
        await agent.recover()
        if self.proxy is not None:
            await self.proxy.node_up(name)
        for worker in list(self.workers.values()):
            if worker.node == name:
                worker.resume()
                self._consider_resize(worker)
        log.info("node_recovered", node=name)

    def snapshot(self) -> Obj:
        return {
            "nodes": [
                {"name": a.name, "zone": a.zone, "ip": a.ip, "failed": a.failed} for a in self.agents.values()
            ],
            "pods": [w.snapshot() for w in (*self.workers.values(), *self._dying.values())],
            "services": self.proxy.snapshot() if self.proxy is not None else [],
        }

    def worker(self, namespace: str, name: str) -> PodWorker | None:
        return next(
            (w for w in self.workers.values() if (w.namespace, w.name) == (namespace, name) and not w.gone),
            None,
        )
