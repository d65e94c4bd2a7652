"""Node objects and their heartbeats: what makes the scheduler and node lifecycle controller see a node.

Each node is registered with zone and hostname labels, capacity/allocatable
large enough for tests, an InternalIP on loopback (127.0.100.N, the pods'
hostIP) and a Ready condition. Heartbeats are a Lease in kube-node-lease,
renewed every few seconds, plus a node status update now and then, as a real
kubelet does. Stopping the heartbeats is how a node "fails": after
--node-monitor-grace-period the node lifecycle controller marks it NotReady
(Unknown) and its pods not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import uuid
from datetime import UTC, datetime
from typing import Any

import attrs
import structlog

from valkey_operator.core.client import Client
from valkey_operator.core.resource import LEASES, Resource
from valkey_operator.core.rest import ApiError
from valkey_testbed import kubeversion

Obj = dict[str, Any]
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "250", "ephemeral-storage": "200Gi"}

log = structlog.get_logger(__name__)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_ip(index: int) -> str:
    """The InternalIP (and pods' hostIP) of the index-th node: outside the pod IP pool."""
    return f"127.0.100.{index + 1}"


@attrs.define
class NodeAgent:
    """Registers one Node and keeps its heartbeats going until stopped or failed."""

    client: Client
    name: str
    zone: str
    ip: str
    lease_interval: float = 3.0
    status_interval: float = 20.0
    kubelet_port: int = 0
    """Where the node's log server listens (logserver.py); the API server dials ip:kubelet_port."""
    failed: bool = False
    _ready_since: str = attrs.field(init=False, factory=_now)
    _task: asyncio.Task[None] | None = attrs.field(init=False, default=None)
    _boot_id: str = attrs.field(init=False, factory=lambda: str(uuid.uuid4()))

    def labels(self) -> dict[str, str]:
        return {
            HOSTNAME_LABEL: self.name,
            ZONE_LABEL: self.zone,
            REGION_LABEL: "testbed",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }

    def status(self) -> Obj:
        now = _now()

        def condition(kind: str, status: str, reason: str, message: str) -> Obj:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._ready_since,
            }

        return {
            "capacity": CAPACITY,
            "allocatable": CAPACITY,
            "conditions": [
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition(
                    "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
                ),
                condition(
                    "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"
                ),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.ip},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "nodeInfo": {
                "machineID": self.name,
                "systemUUID": self.name,
                "bootID": self._boot_id,
                "kernelVersion": platform.release(),
                "osImage": "valkey-operator test bed (processes)",
                "containerRuntimeVersion": "testbed://1",
                "kubeletVersion": kubeversion.selected().kubernetes,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    async def register(self) -> Obj:
        """Create the Node (or adopt an existing one) and report it Ready."""
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": self.labels()}}
        try:
            node = await self.client.create(NODES, body)
        except ApiError as exc:
            if not exc.already_exists:
                raise
            node = await self.client.patch(NODES, self.name, {"metadata": {"labels": self.labels()}})
        await self.report_status()
        await self.renew_lease(node)
        return node

    async def report_status(self) -> None:
        await self.client.patch_status(NODES, self.name, {"status": self.status()})

    async def renew_lease(self, node: Obj | None = None) -> None:
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": _micro_now(),
        }
        try:
            await self.client.patch(LEASES, self.name, {"spec": spec}, LEASE_NAMESPACE)
        except ApiError as exc:
            if not exc.not_found:
                raise
            node = node or await self.client.get(NODES, self.name)
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node["metadata"]["uid"]}
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
                "spec": spec,
            }
            with contextlib.suppress(ApiError):
                await self.client.create(LEASES, lease)

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        last_status = loop.time()
        while True:
            await asyncio.sleep(self.lease_interval)
            try:
                await self.renew_lease()
                if loop.time() - last_status >= self.status_interval:
                    await self.report_status()
                    last_status = loop.time()
            except Exception as exc:
                log.warning("node_heartbeat_failed", node=self.name, error=repr(exc))

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._heartbeat(), name=f"node:{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def fail(self) -> None:
        """Stop heartbeating: the control plane will notice after its grace period."""
        self.failed = True
        await self.stop()

    async def recover(self) -> None:
        """Heartbeat again, at once: Ready is reported before the first lease renewal interval."""
        self.failed = False
        self._ready_since = _now()
        self._boot_id = str(uuid.uuid4())
        await self.register()
        self.start()
