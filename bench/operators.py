"""Two Valkey operators behind one interface, for benchmarks that compare them on one test bed.

A side runs its operator as a process of its own (so CPU seconds and peak RSS
are that operator's), makes one cluster per namespace through its own API, and
says when its own status calls the current spec done. Whether the cluster
really serves is judged the same way for both sides, from the pods and from
Valkey itself (`serving`), so neither side is timed by its own word alone.

    ours   python -m valkey_operator, a ValkeyImage per image and a ValkeyConfig
           per cluster (the roll moves the config's imageRef)
    peer   the official valkey-io/valkey-operator, found through
           valkey_testbed.peer (VALKEY_PEER_OPERATOR, VALKEY_PEER_CRDS)

Both get cluster-node-timeout 5000 (2 shared cores starve 2 s timeouts into
false failovers), the peer through its own API (spec.containers args).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from valkey.asyncio import Valkey
from valkey.exceptions import ValkeyError

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS, Resource
from valkey_operator.core.rest import RestClient
from valkey_testbed import peer, processes
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.crds import install_crds
from valkey_testbed.images import valkey_version
from valkey_testbed.operatorproc import start_operator
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD, ensure_role, with_superuser
from valkey_testbed.wait import NotYet, eventually

Obj = dict[str, Any]
Address = tuple[str, int]
Auth = tuple[str | None, str | None]
CLUSTER = "bench"
PORT = 6379
SLOTS = 16384
NODE_TIMEOUT_MS = 5000
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@attrs.frozen
class Usage:
    """What an operator process cost while it ran."""

    cpu_seconds: float
    peak_rss_mib: float


def machine() -> dict[str, Any]:
    """When and on what a bench record was measured: the date (UTC), the cores, and the load
    average (1, 5, 15 min) at the end, which says whether the machine was shared."""
    return {
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }


def process_usage(pid: int) -> Usage:
    """User + system CPU and VmHWM of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    hwm_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm_kib = int(line.split()[1])
    return Usage(ticks / CLOCK_TICKS, hwm_kib / 1024)


def custom(kind: str, name: str, spec: Obj) -> Obj:
    """A cluster-scoped object of ours (the API server wants apiVersion and kind on a create)."""
    return {"apiVersion": VALKEY_CLUSTERS.api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


class Side(Protocol):
    name: str

    async def start(self) -> None: ...
    def usage(self) -> Usage: ...
    async def stop(self) -> None: ...
    async def delete(self, namespace: str) -> None: ...
    async def create(self, namespace: str, shards: int, replicas: int, image: str) -> None: ...
    async def credentials(self, namespace: str) -> Auth: ...
    async def set_image(self, namespace: str, image: str) -> None: ...
    async def set_shards(self, namespace: str, shards: int) -> None: ...
    async def done(self, namespace: str) -> str:
        """'' when the side's own status says the current spec is done; else what it says."""
        ...


class Ours:
    name = "ours"

    def __init__(self, kube: Client, kubeconfig: str, images: Sequence[str], log_dir: Path) -> None:
        self.kube, self.kubeconfig, self.log_dir = kube, kubeconfig, log_dir
        self.stamp = time.strftime("%H%M%S")
        self.images = {
            image: f"bench-{self.stamp}-{valkey_version(image).replace('.', '-')}" for image in images
        }
        self.process: processes.ProcessRecord | None = None

    async def start(self) -> None:
        await install_crds(self.kube)
        for reference, name in self.images.items():
            repository, _, tag = reference.rpartition(":")
            spec = {"repository": repository, "tag": tag, "version": valkey_version(reference)}
            if await self.kube.get_or_none(VALKEY_IMAGES, name) is None:
                await self.kube.create(VALKEY_IMAGES, custom(VALKEY_IMAGES.kind, name, spec))
        self.process = start_operator(self.kubeconfig, self.log_dir / "ours")

    def usage(self) -> Usage:
        assert self.process is not None
        return process_usage(self.process.pid)

    async def stop(self) -> None:
        if self.process is not None:
            processes.stop([self.process])
        self.process = None

    async def cleanup(self) -> None:
        for name in self.images.values():
            with contextlib.suppress(Exception):
                await self.kube.delete(VALKEY_IMAGES, name)

    async def create(self, namespace: str, shards: int, replicas: int, image: str) -> None:
        config = {"imageRef": self.images[image], "valkey": {"cluster-node-timeout": str(NODE_TIMEOUT_MS)}}
        await self.kube.create(VALKEY_CONFIGS, custom(VALKEY_CONFIGS.kind, namespace, config))
        body = {
            "apiVersion": VALKEY_CLUSTERS.api_version,
            "kind": VALKEY_CLUSTERS.kind,
            "metadata": {"name": CLUSTER, "namespace": namespace},
            "spec": with_superuser({"configRef": namespace, "shards": shards, "replicasPerShard": replicas}),
        }
        await ensure_role(self.kube)
        await self.kube.create(VALKEY_CLUSTERS, body)

    async def delete(self, namespace: str) -> None:
        await gone(self.kube, VALKEY_CLUSTERS, CLUSTER, namespace)
        await gone(self.kube, VALKEY_CONFIGS, namespace)

    async def credentials(self, namespace: str) -> Auth:
        return SUPERUSER, SUPERUSER_PASSWORD

    async def set_image(self, namespace: str, image: str) -> None:
        await self.kube.patch(VALKEY_CONFIGS, namespace, {"spec": {"imageRef": self.images[image]}})

    async def set_shards(self, namespace: str, shards: int) -> None:
        await self.kube.patch(VALKEY_CLUSTERS, CLUSTER, {"spec": {"shards": shards}}, namespace)

    async def done(self, namespace: str) -> str:
        cluster = await self.kube.get(VALKEY_CLUSTERS, CLUSTER, namespace)
        status: Obj = cluster.get("status") or {}
        if status.get("observedGeneration") != cluster["metadata"]["generation"]:
            return "status not observed yet"
        return "" if status.get("state") == "Active" else f"{status.get('state')}: {status.get('message')}"


class Peer:
    """The official operator, unchanged, out of cluster; settings only through its own API."""

    name = "peer"

    def __init__(self, kube: Client, kubeconfig: str, found: peer.Peer, log_dir: Path) -> None:
        self.kube, self.kubeconfig, self.found, self.log_dir = kube, kubeconfig, found, log_dir
        self.process: peer.PeerProcess | None = None

    async def start(self) -> None:
        await peer.install_peer_crds(self.kube, self.found)
        self.process = peer.start_peer(self.found, self.kubeconfig, self.log_dir / "peer.log")

    def usage(self) -> Usage:
        assert self.process is not None
        return process_usage(self.process.pid)

    async def stop(self) -> None:
        if self.process is not None:
            await self.process.stop()
        self.process = None

    async def cleanup(self) -> None:
        return None

    async def create(self, namespace: str, shards: int, replicas: int, image: str) -> None:
        body = peer.cluster_manifest(
            CLUSTER, namespace, shards=shards, replicas=replicas, image=image, node_timeout_ms=NODE_TIMEOUT_MS
        )
        await self.kube.create(peer.VALKEY_CLUSTERS, body)

    async def delete(self, namespace: str) -> None:
        await gone(self.kube, peer.VALKEY_CLUSTERS, CLUSTER, namespace)

    async def credentials(self, namespace: str) -> Auth:
        return None, None  # the peer leaves the default user open

    async def set_image(self, namespace: str, image: str) -> None:
        await self.kube.patch(peer.VALKEY_CLUSTERS, CLUSTER, {"spec": {"image": image}}, namespace)

    async def set_shards(self, namespace: str, shards: int) -> None:
        await self.kube.patch(peer.VALKEY_CLUSTERS, CLUSTER, {"spec": {"shards": shards}}, namespace)

    async def done(self, namespace: str) -> str:
        cluster = await self.kube.get(peer.VALKEY_CLUSTERS, CLUSTER, namespace)
        status: Obj = cluster.get("status") or {}
        generation = cluster["metadata"]["generation"]
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        if not ready or ready[0].get("observedGeneration") != generation or ready[0].get("status") != "True":
            return (
                f"Ready not True for generation {generation}: {status.get('state')} {status.get('message')}"
            )
        return "" if status.get("state") == "Ready" else f"{status.get('state')}: {status.get('message')}"


# -- judged from the pods and from Valkey, the same for both sides --------------------------------


@attrs.frozen
class Shape:
    """What a serving cluster looks like: its layout and every pod's image."""

    shards: int
    replicas: int
    image: str


def loopback(ip: str) -> str:
    if ipaddress.ip_address(ip) not in LOOPBACK:
        raise RuntimeError(f"refusing to connect to {ip}: not in {LOOPBACK}")
    return ip


async def command(address: Address, auth: Auth, *args: str) -> str:
    client = Valkey(
        host=loopback(address[0]),
        port=address[1],
        username=auth[0],
        password=auth[1],
        socket_timeout=5,
        socket_connect_timeout=3,
        decode_responses=True,
    )
    try:
        return str(await client.execute_command(*args))  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()


async def pod_addresses(
    kube: Client, namespace: str, image: str | None = None, selector: str | None = None
) -> list[Address] | str:
    """The serving pods' addresses (of the namespace, or of a label selector in it); with image, a
    reason unless every pod is ready on that image."""
    found = await kube.list(PODS, namespace, label_selector=selector)
    pods = [pod for pod in found if not pod["metadata"].get("deletionTimestamp")]
    addresses = []
    for pod in pods:
        status = pod.get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        if image is not None:
            images = {container["image"] for container in pod["spec"]["containers"]}
            if image not in images:
                return f"{pod['metadata']['name']} runs {sorted(images)}"
            if not ready:
                return f"{pod['metadata']['name']} not ready"
        if status.get("podIP") and ready:
            addresses.append((loopback(status["podIP"]), PORT))
    return addresses


def parse_nodes(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


async def serving(kube: Client, namespace: str, shape: Shape, auth: Auth, selector: str | None = None) -> str:
    """'' when the namespace's cluster (the pods of selector, when several share it) has shape's
    layout on shape's image, every slot served once, replicas linked, no migration under way, and
    every node says cluster_state:ok; else why not."""
    addresses = await pod_addresses(kube, namespace, shape.image, selector)
    if isinstance(addresses, str):
        return addresses
    want = shape.shards * (1 + shape.replicas)
    if len(addresses) != want:
        return f"{len(addresses)} ready pods, want {want}"
    try:
        infos = await asyncio.gather(*(command(address, auth, "CLUSTER", "INFO") for address in addresses))
        nodes = parse_nodes(await command(addresses[0], auth, "CLUSTER", "NODES"))
    except (OSError, TimeoutError, ValkeyError) as exc:
        return f"unreachable: {exc!r}"
    for address, info in zip(addresses, infos, strict=True):
        if "cluster_state:ok" not in info:
            return f"{address[0]} not ok"
    primaries = [n for n in nodes if "master" in n[2].split(",") and len(n) > 8]
    if len(primaries) != shape.shards:
        return f"{len(primaries)} primaries with slots, want {shape.shards}"
    served = 0
    for fields in primaries:
        for part in fields[8:]:
            if part.startswith("["):
                return f"slot {part} migrating"
            start, _, end = part.partition("-")
            served += int(end or start) - int(start) + 1
    if served != SLOTS:
        return f"{served} slots served"
    for fields in primaries:
        linked = [n for n in nodes if n[3] == fields[0] and n[7] == "connected" and "fail" not in n[2]]
        if len(linked) != shape.replicas:
            return f"primary {fields[1]} has {len(linked)} linked replicas, want {shape.replicas}"
    return ""


async def settled(side: Side, kube: Client, namespace: str, shape: Shape, timeout: float) -> None:
    """Both the side's own status and Valkey itself say shape is reached."""

    async def both() -> bool | NotYet:
        why = await side.done(namespace) or await serving(
            kube, namespace, shape, await side.credentials(namespace)
        )
        return True if not why else NotYet(why)

    await eventually(both, f"{side.name} {namespace} at {shape}", timeout, interval=0.25)


async def gone(kube: Client, resource: Resource, name: str, namespace: str | None = None) -> None:
    """Delete and wait until the object is gone (its operator still running to release finalizers)."""
    with contextlib.suppress(Exception):
        await kube.delete(resource, name, namespace)

    async def absent() -> bool:
        return await kube.get_or_none(resource, name, namespace) is None

    try:
        await eventually(absent, f"{resource.kind} {name} deleted", 120, interval=0.5)
    except AssertionError as exc:
        print(f"  warning: {exc}", flush=True)


async def open_client(kubeconfig: str) -> tuple[k8s.ApiClient, Client]:
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    api = k8s.ApiClient(configuration)
    return api, Client(RestClient(api), field_manager="bench")


async def new_namespace(kube: Client, name: str) -> None:
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def delete_namespace(kube: Client, name: str, timeout: float = 120.0) -> None:
    """Pods killed at once (the bench is done with them), then the namespace, waited for (a warning
    on timeout: a stuck namespace must not fail the measurement taken before it)."""
    if await kube.get_or_none(NAMESPACES, name) is None:
        return
    for pod in await kube.list(PODS, name):
        with contextlib.suppress(Exception):
            await kube.delete(PODS, pod["metadata"]["name"], name, grace_period_seconds=0)
    with contextlib.suppress(Exception):
        await kube.delete(NAMESPACES, name)

    async def gone() -> bool:
        return await kube.get_or_none(NAMESPACES, name) is None

    try:
        await eventually(gone, f"namespace {name} to be deleted", timeout, interval=1.0)
    except AssertionError as exc:
        print(f"  warning: {exc}", flush=True)


Drive = Callable[[str, Path], Coroutine[Any, Any, int]]


def run_on_testbed(drive: Drive, kubeconfig: str | None, log_dir: str | None, prefix: str) -> int:
    """drive(kubeconfig, log_dir) on the given test bed, or on a fresh 3-node one stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as temp:
        logs = Path(log_dir or temp)
        logs.mkdir(parents=True, exist_ok=True)
        if kubeconfig:
            return asyncio.run(drive(kubeconfig, logs))
        with ControlPlane(Path(temp) / "plane", nodes=3) as plane:
            return asyncio.run(drive(str(plane.kubeconfig), logs))
