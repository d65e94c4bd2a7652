"""Clients outside Kubernetes, for the external-access tests: what they dial, and what they were promised.

A client here is given only a seed from status.externalEndpoints. Every
address it then dials comes from the cluster (CLUSTER SLOTS, MOVED, ASK), and
each one is recorded twice over: valkey-py's `address_remap` sees every address
of a slot map it loads (and changes none), and the connection class records
each socket it opens, which also covers MOVED and ASK targets (valkey-py dials
those without remapping them). The test bed serves NodePorts on the nodes'
127.0.100.N and load balancers on 127.0.200.0/21 (docs/testing.md, "Services
from outside"); pod IPs are 127.1.0.0/16, and are collected from the API too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import pty
import select
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Sequence

import attrs
from cluster_support import SUPERUSER, SUPERUSER_PASSWORD, owned_pods
from valkey.asyncio.cluster import ClusterNode, ValkeyCluster
from valkey.asyncio.connection import Connection

from controllers.shared import names
from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS, SERVICES
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.datachecker import Address, DataChecker
from valkey_testbed.wait import NotYet, eventually

EXTERNAL_NETWORKS = {
    "NodePort": ipaddress.ip_network("127.0.100.0/24"),
    "LoadBalancer": ipaddress.ip_network("127.0.200.0/21"),
}
"""Where the test bed serves each Service type (testbed/valkey_testbed/serviceproxy/)."""


@attrs.define
class Dials:
    """Every address a client was handed (slot maps) or dialled (sockets), and when first."""

    handed: dict[Address, float] = attrs.field(factory=dict)
    dialled: dict[Address, float] = attrs.field(factory=dict)

    def remap(self, address: tuple[str, int]) -> tuple[str, int]:
        """valkey-py's address_remap: records the address, changes nothing."""
        self.handed.setdefault((str(address[0]), int(address[1])), time.time())
        return address

    def connection_class(self) -> type[Connection]:
        dials = self

        class RecordingConnection(Connection):
            async def _connect(self) -> None:
                dials.dialled.setdefault((str(self.host), int(self.port)), time.time())
                await super()._connect()

        return RecordingConnection

    def outside(self, kind: str, pod_ips: Iterable[str]) -> list[str]:
        """Every handed or dialled address that is not of kind's external network, pod IPs named."""
        network, pods = EXTERNAL_NETWORKS[kind], set(pod_ips)
        wrong = []
        for what, seen in (("handed", self.handed), ("dialled", self.dialled)):
            for (host, port), when in sorted(seen.items()):
                if not _in(host, network):
                    stamp = time.strftime("%H:%M:%S", time.localtime(when))
                    pod = " (a pod IP)" if host in pods else ""
                    wrong.append(f"{what} {host}:{port}{pod} first at {stamp}")
        return wrong


def _in(host: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(host) in network
    except ValueError:  # "?" (a node without an announced hostname) or a name
        return False


def external_client(seed: Obj, dials: Dials) -> ValkeyCluster:
    """The valkey-py cluster client as SUPERUSER, seeded with one status.externalEndpoints entry only."""
    client = ValkeyCluster(
        startup_nodes=[ClusterNode(seed["host"], int(seed["port"]))],
        username=SUPERUSER,
        password=SUPERUSER_PASSWORD,
        address_remap=dials.remap,
        socket_timeout=5,
        socket_connect_timeout=5,
    )
    # valkey-py offers no connection_class argument for cluster clients: every node it creates from
    # here on (slot maps, MOVED, ASK) takes its connection class from these shared keyword arguments.
    client.nodes_manager.connection_kwargs["connection_class"] = dials.connection_class()
    for node in client.nodes_manager.startup_nodes.values():
        node.connection_class = client.nodes_manager.connection_kwargs["connection_class"]
    return client


class RecordingChecker(DataChecker):
    """The data checker (WAIT-acknowledged writes, MOVED followed by itself), seeded with external
    addresses, recording every address it opens a connection to."""

    def __init__(self, seeds: Iterable[Address], dials: Dials, **kwargs: object) -> None:
        super().__init__(seeds, username=SUPERUSER, password=SUPERUSER_PASSWORD, **kwargs)  # type: ignore[arg-type]
        self.dials = dials

    async def _open(self, address: Address) -> object:  # type: ignore[override]
        self.dials.dialled.setdefault(address, time.time())
        return await super()._open(address)


def seeds(status: Obj) -> list[Address]:
    return [(endpoint["host"], int(endpoint["port"])) for endpoint in status.get("externalEndpoints") or ()]


def _live(pod: Obj) -> bool:
    return pod["metadata"].get("deletionTimestamp") is None and (pod.get("status") or {}).get(
        "phase"
    ) not in (
        "Failed",
        "Succeeded",
    )


async def expected_endpoints(kube: Client, namespace: str, name: str, kind: str) -> dict[str, Address] | str:
    """Pod -> (host, port) each live pod's own Service gives it, or what is not there yet."""
    expected: dict[str, Address] = {}
    for pod in await owned_pods(kube, namespace, name):
        if not _live(pod):
            continue
        pod_name = pod["metadata"]["name"]
        service = await kube.get_or_none(SERVICES, pod_name, namespace)
        if service is None:
            return f"no Service {pod_name}"
        owners = service["metadata"].get("ownerReferences") or []
        assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [
            ("Pod", pod_name, pod["metadata"]["uid"])
        ], owners
        spec = service["spec"]
        assert spec["type"] == kind, spec
        assert spec["selector"].get(names.POD_NAME_LABEL) == pod_name, spec["selector"]
        if kind == "NodePort":
            host, port = (pod.get("status") or {}).get("hostIP"), spec["ports"][0].get("nodePort")
        else:
            ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [{}]
            host, port = ingress[0].get("ip"), spec["ports"][0]["port"]
        if not host or not port:
            return f"{pod_name}: Service without an address yet"
        expected[pod_name] = (host, int(port))
    return expected


async def external_settled(kube: Client, namespace: str, name: str, kind: str, timeout: float) -> Obj:
    """The status once it describes the current spec, says Active, and lists in externalEndpoints
    exactly the live pods, each at the address its own Service gives it."""

    async def done() -> Obj | NotYet:
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        status: Obj = cluster.get("status") or {}
        if not (
            status.get("observedGeneration") == cluster["metadata"]["generation"]
            and status.get("state") == "Active"
            and status.get("shards") == cluster["spec"]["shards"]
        ):
            return NotYet({key: status.get(key) for key in ("state", "message", "shards")})
        expected = await expected_endpoints(kube, namespace, name, kind)
        listed = {e["pod"]: (e["host"], int(e["port"])) for e in status.get("externalEndpoints") or ()}
        if listed != expected:
            return NotYet({"externalEndpoints": listed, "the pods' Services": expected})
        return status

    return await eventually(done, f"{name} Active, every pod in externalEndpoints", timeout, interval=0.5)


@attrs.define
class PodIPs:
    """Every pod IP the API showed for the cluster's pods while it ran."""

    kube: Client
    namespace: str
    name: str
    seen: set[str] = attrs.field(factory=set)
    stop: asyncio.Event = attrs.field(factory=asyncio.Event)

    async def run(self) -> None:
        while not self.stop.is_set():
            for pod in await owned_pods(self.kube, self.namespace, self.name):
                if ip := (pod.get("status") or {}).get("podIP"):
                    self.seen.add(ip)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), 1.0)


MAX_OPERATIONS = 100_000
"""Bounds the traffic loop (it stops far sooner: when the test is done)."""


@attrs.define
class Traffic:
    """One application on the valkey-py cluster client: a SET of a new key, then a GET of an
    earlier acknowledged one, over and over until stopped. A key is acknowledged when its SET
    returned OK (what the application was told); a GET of it that returns anything else is a lost
    or changed write seen while it happened."""

    client: ValkeyCluster
    prefix: str
    interval: float = 0.02
    acknowledged: dict[bytes, bytes] = attrs.field(factory=dict)
    errors: Counter[str] = attrs.field(factory=Counter)
    wrong_reads: list[str] = attrs.field(factory=list)
    reads: int = 0
    longest_gap: float = 0.0
    stop: asyncio.Event = attrs.field(factory=asyncio.Event)

    async def run(self) -> None:
        last_ok = time.monotonic()
        acked: list[bytes] = []
        for number in range(MAX_OPERATIONS):
            if self.stop.is_set():
                break
            key, value = f"{self.prefix}:{number}".encode(), f"v{number}-{time.time()}".encode()
            try:
                if await self.client.set(key, value):
                    self.acknowledged[key] = value
                    acked.append(key)
                    now = time.monotonic()
                    self.longest_gap, last_ok = max(self.longest_gap, now - last_ok), now
                earlier = acked[(number * 7919) % len(acked)] if acked else None
                if earlier is not None:
                    got = await self.client.get(earlier)
                    self.reads += 1
                    if got != self.acknowledged[earlier]:
                        self.wrong_reads.append(f"{time.strftime('%H:%M:%S')} {earlier!r}: {got!r}")
            except Exception as exc:  # any failure of a real client is counted, and the loop goes on
                self.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.1)
            await asyncio.sleep(self.interval)
        self.longest_gap = max(self.longest_gap, time.monotonic() - last_ok)


async def read_back(client: ValkeyCluster, keys: dict[bytes, bytes]) -> list[bytes]:
    """The keys the client does not read back with their acknowledged value."""
    wrong: list[bytes] = []
    items = list(keys.items())
    for start in range(0, len(items), 500):
        batch = items[start : start + 500]
        values = await client.mget_nonatomic([key for key, _ in batch])
        wrong += [key for (key, value), got in zip(batch, values, strict=True) if got != value]
    return wrong


def _cli_argv(host: str, port: int, *flags: str) -> list[str]:
    entry = images.resolve_image(images.newest_image())
    assert entry is not None
    return [
        str(entry.executable("valkey-cli")),
        *flags,
        *("-h", host, "-p", str(port)),
        *("--user", SUPERUSER, "--pass", SUPERUSER_PASSWORD, "--no-auth-warning"),
    ]


async def cli(host: str, port: int, *args: str) -> str:
    """One valkey-cli command (not in cluster mode: a MOVED is printed, not followed), as SUPERUSER."""
    process = await asyncio.create_subprocess_exec(
        *_cli_argv(host, port),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 15)
    return (out + err).decode()


def cli_session(host: str, port: int, lines: Sequence[str], timeout: float = 15.0) -> str:
    """valkey-cli -c typed at as a person does (on a terminal: it prints where it was redirected
    only then, and its prompt names the node it is connected to); the whole screen."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        _cli_argv(host, port, "-c"),
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "TERM": "dumb"},  # linenoise reads plain lines, no escape sequences
        close_fds=True,
    )
    os.close(terminal)
    os.write(controller, "".join(f"{line}\n" for line in [*lines, "quit"]).encode())
    screen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.2)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the terminal's other end closed, valkey-cli has exited
                break
            if not chunk:
                break
            screen += chunk
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(5)
        os.close(controller)
    return screen.decode(errors="replace").replace("\r\n", "\n")


def endpoint_of(status: Obj, pod: str) -> Address:
    (found,) = [(e["host"], int(e["port"])) for e in status["externalEndpoints"] if e["pod"] == pod]
    return found


def pods_by_address(status: Obj) -> dict[Address, str]:
    return {(e["host"], int(e["port"])): e["pod"] for e in status["externalEndpoints"]}


def primaries(status: Obj) -> Sequence[Obj]:
    return sorted((n for n in status["nodes"] if n.get("role") == "primary"), key=lambda n: n["shard"])


async def delete_pod(kube: Client, namespace: str, pod: str) -> None:
    await kube.delete(PODS, pod, namespace)
