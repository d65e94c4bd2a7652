"""Services from outside the bed: NodePort on 127.0.100.N:nodePort and LoadBalancer ingress addresses,
forwarded by the kubelet process's service proxy to real valkey-server pods.

The module runs on a bed of its own: one test fails a node, one starts a second bed beside it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import socket
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

import own_bed
import pytest
from kubelet_support import Pods
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from service_support import (
    NODE_IPS,
    VALKEY_PORT,
    Session,
    ask,
    create_service,
    events_of,
    node_port,
    outcome,
    served_by,
    service,
    until,
    valkey_pod,
)
from valkey.asyncio.cluster import ClusterNode, ValkeyCluster

from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.resource import PODS, SERVICES, Resource
from valkey_operator.core.rest import RestClient
from valkey_testbed import images
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.serviceproxy import LB_POOL, NotLoopback, require_loopback
from valkey_testbed.serviceproxy.noderange import SIZE
from valkey_testbed.sessionbed import KUBELET_ARGS
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BUS_PORT = 16379
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")


@pytest.fixture(scope="module", autouse=True)
def valkey_installed() -> None:
    image = images.newest_image()
    assert images.resolve_image(image), f"{image} is not installed: run `python -m valkey_testbed build`"


async def ingress_ip(kube: Client, name: str, namespace: str) -> str:
    async def assigned() -> str | None:
        svc = await kube.get(SERVICES, name, namespace)
        ingress = (svc.get("status", {}).get("loadBalancer") or {}).get("ingress") or []
        return str(ingress[0]["ip"]) if ingress else None

    found: str = await eventually(assigned, f"an ingress IP for {name}", 10, interval=0.05)
    return found


async def test_node_port_reaches_its_pod_through_every_node(
    kube: Client, pods: Pods, namespace: str, kube_control_plane: ControlPlane
) -> None:
    """Cluster policy: each node's address forwards to the one pod, wherever it runs."""
    await pods.create(valkey_pod("one", node="node-2"))
    svc = await create_service(kube, service("one", namespace, "NodePort", {"app": "one"}))
    port = node_port(svc)
    claimed = kube_control_plane.node_port_range()
    assert claimed is not None, "a bed with nodes claims a slice of the nodePort range"
    first, last = map(int, claimed.split("-"))
    assert (last - first + 1, first <= port <= last) == (SIZE, True), (claimed, port)
    pod = await pods.ready("one")
    for ip in NODE_IPS.values():
        await until(ip, port, "PONG", 10)
        assert await served_by(ip, port) == pod["status"]["podIP"]


async def test_local_policy_answers_only_on_the_pods_node(kube: Client, pods: Pods, namespace: str) -> None:
    await pods.create(valkey_pod("local", node="node-1"))
    body = service("local", namespace, "NodePort", {"app": "local"}, policy="Local")
    port = node_port(await create_service(kube, body))
    await pods.ready("local")
    await until(NODE_IPS["node-1"], port, "PONG", 10)
    for node in ("node-2", "node-3"):
        assert await outcome(NODE_IPS[node], port) == "reset", f"{node} has no endpoint of its own"


async def test_load_balancer_gets_an_ingress_address_and_serves_through_it(
    kube: Client, pods: Pods, namespace: str
) -> None:
    await pods.create(valkey_pod("balanced"))
    started = time.monotonic()
    svc = await create_service(kube, service("balanced", namespace, "LoadBalancer", {"app": "balanced"}))
    ip = await ingress_ip(kube, "balanced", namespace)
    assigned_after = time.monotonic() - started
    assert ipaddress.ip_address(ip) in LB_POOL
    assert assigned_after < 2.0, f"ingress assigned after {assigned_after:.2f}s"
    pod = await pods.ready("balanced")
    await until(ip, VALKEY_PORT, "PONG", 10)
    assert await served_by(ip, VALKEY_PORT) == pod["status"]["podIP"]
    await until(NODE_IPS["node-3"], node_port(svc), "PONG", 10)  # a LoadBalancer's nodePort serves too
    assert await events_of(kube, namespace, "balanced", ["IPAllocated"]), "an IPAllocated Event"

    await kube.patch(SERVICES, "balanced", {"spec": {"type": "NodePort"}}, namespace)
    await until(ip, VALKEY_PORT, "refused", 5)  # no longer a LoadBalancer: the address is released

    async def cleared() -> bool | NotYet:
        status = (await kube.get(SERVICES, "balanced", namespace)).get("status", {})
        return True if not (status.get("loadBalancer") or {}).get("ingress") else NotYet(status)

    await eventually(cleared, "the ingress cleared from the status", 5)
    await until(NODE_IPS["node-1"], node_port(svc), "PONG", 5)
    await kube.delete(SERVICES, "balanced", namespace)
    await until(NODE_IPS["node-1"], node_port(svc), "refused", 5)


async def test_an_endpoint_that_leaves_the_service_loses_its_connections(
    kube: Client, pods: Pods, namespace: str
) -> None:
    """The pod keeps running; only its label changes: the proxy itself resets the connection."""
    await pods.create(valkey_pod("moving", labels={"app": "moving"}))
    port = node_port(await create_service(kube, service("moving", namespace, "NodePort", {"app": "moving"})))
    await pods.ready("moving")
    await until(NODE_IPS["node-1"], port, "PONG", 10)
    session = await Session.open(NODE_IPS["node-1"], port)
    try:
        assert await session.ask() == b"PONG"
        await kube.patch(PODS, "moving", {"metadata": {"labels": {"app": "elsewhere"}}}, namespace)
        assert await session.ended(5), "the proxy resets a connection whose endpoint left"
    finally:
        session.close()
    assert await outcome(NODE_IPS["node-1"], port) == "reset", "no endpoint left"


async def test_a_deleted_pods_connections_close_and_its_successor_is_reached(
    kube: Client, pods: Pods, namespace: str
) -> None:
    await pods.create(valkey_pod("first", labels={"app": "shard"}))
    port = node_port(await create_service(kube, service("shard", namespace, "NodePort", {"app": "shard"})))
    first = await pods.ready("first")
    await until(NODE_IPS["node-2"], port, "PONG", 10)
    session = await Session.open(NODE_IPS["node-2"], port)
    try:
        assert await session.ask("SET", "k", "v") == b"OK"
        await kube.delete(PODS, "first", namespace)
        assert await session.ended(15), "a deleted pod's connection closes"
    finally:
        session.close()
    await pods.create(valkey_pod("second", labels={"app": "shard"}))
    second = await pods.ready("second")
    assert second["status"]["podIP"] != first["status"]["podIP"]
    await until(NODE_IPS["node-2"], port, "PONG", 10)
    assert await served_by(NODE_IPS["node-2"], port) == second["status"]["podIP"]


async def test_a_deleted_service_stops_listening_and_closes_its_connections(
    kube: Client, pods: Pods, namespace: str
) -> None:
    await pods.create(valkey_pod("gone"))
    port = node_port(await create_service(kube, service("gone", namespace, "NodePort", {"app": "gone"})))
    await pods.ready("gone")
    await until(NODE_IPS["node-3"], port, "PONG", 10)
    session = await Session.open(NODE_IPS["node-3"], port)
    try:
        assert await session.ask() == b"PONG"
        await kube.delete(SERVICES, "gone", namespace)
        assert await session.ended(5)
    finally:
        session.close()
    for ip in NODE_IPS.values():
        await until(ip, port, "refused", 5)


async def test_either_side_closing_closes_the_other(kube: Client, pods: Pods, namespace: str) -> None:
    """The server's close reaches the client (QUIT), the client's reaches the server (its count)."""
    await pods.create(valkey_pod("pipe"))
    port = node_port(await create_service(kube, service("pipe", namespace, "NodePort", {"app": "pipe"})))
    await pods.ready("pipe")
    address = (NODE_IPS["node-1"], port)
    await until(*address, "PONG", 10)
    quitting = await Session.open(*address)
    try:
        assert await quitting.ask("QUIT") == b"OK"
        assert await quitting.ended(2), "the server closed: so does the proxy, towards the client"
    finally:
        quitting.close()

    async def clients() -> int:
        info = await ask(*address, "INFO", "clients")
        assert isinstance(info, bytes), info
        return int(info.split(b"connected_clients:")[1].split(b"\r\n")[0])

    leaving = await Session.open(*address)
    assert await leaving.ask() == b"PONG"
    assert await clients() == 2, "the session and the one asking"
    leaving.close()
    await eventually(lambda: _equals(clients(), 1), "the server to see the client go", 5, interval=0.1)


async def _equals(count: Awaitable[int], wanted: int) -> bool | NotYet:
    seen = await count
    return True if seen == wanted else NotYet(seen)


async def test_a_taken_node_port_is_reported_and_taken_once_free(
    kube: Client, pods: Pods, namespace: str, kube_control_plane: ControlPlane
) -> None:
    """Another process holds 127.0.100.1:P: a Warning Event names it, and P serves once freed."""
    claimed = kube_control_plane.node_port_range()
    assert claimed is not None
    first, last = map(int, claimed.split("-"))
    used = {p.get("nodePort") for s in await kube.list(SERVICES) for p in s["spec"].get("ports") or []}
    port = next(p for p in range(last, first, -1) if p not in used)
    blocker = socket.create_server((NODE_IPS["node-1"], port))
    try:
        await pods.create(valkey_pod("blocked"))
        body = service("blocked", namespace, "NodePort", {"app": "blocked"}, nodePort=port)
        await kube.create(SERVICES, body)
        await pods.ready("blocked")
        await until(NODE_IPS["node-2"], port, "PONG", 10)
        warned = await eventually(
            lambda: events_of(kube, namespace, "blocked", ["PortInUse"]), "a PortInUse Event", 10
        )
        assert f"{NODE_IPS['node-1']}:{port}" in warned[0]["note"]
    finally:
        blocker.close()
    await until(NODE_IPS["node-1"], port, "PONG", 10)


async def test_a_failed_node_closes_its_node_ports_until_it_recovers(
    kube: Client, pods: Pods, namespace: str, kubelet: KubeletControl
) -> None:
    await pods.create(valkey_pod("survivor", node="node-1"))
    port = node_port(
        await create_service(kube, service("survivor", namespace, "NodePort", {"app": "survivor"}))
    )
    await pods.ready("survivor")
    await until(NODE_IPS["node-3"], port, "PONG", 10)
    await kubelet.fail_node("node-3")
    try:
        assert await outcome(NODE_IPS["node-3"], port) == "refused"
        assert await outcome(NODE_IPS["node-2"], port) == "PONG"
    finally:
        await kubelet.recover_node("node-3")
    await until(NODE_IPS["node-3"], port, "PONG", 10)


async def test_the_api_server_refuses_loopback_endpoint_slices(kube: Client, namespace: str) -> None:
    """Why the proxy computes endpoints from pods: an EndpointSlice cannot hold a 127.x address
    (so the EndpointSlice controller stays off). Should a release accept them, this fails."""
    body = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "loopback",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": "x"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.1.2.3"]}],
        "ports": [{"port": VALKEY_PORT, "protocol": "TCP"}],
    }
    with pytest.raises(ApiError) as refused:
        await kube.create(ENDPOINT_SLICES, body)
    assert refused.value.status == 422 and "loopback" in str(refused.value)


async def test_two_beds_hold_apart_node_port_ranges_and_serve_the_same_node_addresses(
    kube: Client, pods: Pods, namespace: str, kube_control_plane: ControlPlane
) -> None:
    """A second bed on this machine claims another slice of the range; both beds' Services then
    answer on 127.0.100.1 at once, each from its own pod."""
    await pods.create(valkey_pod("here"))
    port = node_port(await create_service(kube, service("here", namespace, "NodePort", {"app": "here"})))
    here = await pods.ready("here")
    state_dir = Path(tempfile.mkdtemp(prefix="valkey-operator-second-bed-"))
    other = ControlPlane(state_dir, nodes=1, kubelet_args=KUBELET_ARGS)
    try:
        await asyncio.to_thread(other.up)
        ours, theirs = kube_control_plane.node_port_range(), other.node_port_range()
        assert ours and theirs, (ours, theirs)
        a, b = (tuple(map(int, claimed.split("-"))) for claimed in (ours, theirs))
        assert a[1] < b[0] or b[1] < a[0], f"{ours} and {theirs} overlap"
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(
            config_file=str(other.kubeconfig), client_configuration=configuration
        )
        async with k8s.ApiClient(configuration) as api:
            second = Client(RestClient(api), field_manager="tests")
            body = valkey_pod("there")
            body["metadata"]["namespace"] = "default"
            await second.create(PODS, body)
            their_port = node_port(
                await create_service(second, service("there", "default", "NodePort", {"app": "there"}))
            )
            await until(NODE_IPS["node-1"], their_port, "PONG", 60)
            there = await second.get(PODS, "there", "default")
        assert await served_by(NODE_IPS["node-1"], port) == here["status"]["podIP"]
        assert await served_by(NODE_IPS["node-1"], their_port) == there["status"]["podIP"]
    finally:
        await asyncio.to_thread(other.down)
        shutil.rmtree(state_dir, ignore_errors=True)
    await until(NODE_IPS["node-1"], port, "PONG", 5)


def test_listeners_bind_loopback_only() -> None:
    """Listening or dialling anywhere else is refused before any socket is made."""
    assert require_loopback("127.0.200.9") == "127.0.200.9"
    for address in ("10.0.0.1", "0.0.0.0", "::1", "node-1"):
        with pytest.raises(NotLoopback):
            require_loopback(address)


async def test_a_valkey_cluster_client_works_through_node_ports_alone(
    kube: Client, pods: Pods, namespace: str, kubelet: KubeletControl
) -> None:
    """The operator's external access, by hand: three servers announce their node's address and
    their Service's nodePorts (client and bus), form a cluster through the proxy, and a cluster
    client that is given, and learns, only those addresses reads and writes every slot."""
    names = [f"ext-{i}" for i in range(3)]
    nodes = list(NODE_IPS)
    announced = []
    for name, node in zip(names, nodes, strict=True):
        body = service(name, namespace, "NodePort", {"member": name}, policy="Local")
        body["spec"]["ports"].append({"name": "bus", "port": BUS_PORT, "targetPort": BUS_PORT})
        svc = await create_service(kube, body)
        client_port, bus_port = node_port(svc), node_port(svc, "bus")
        announced.append((NODE_IPS[node], client_port))
        args = [
            "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
            "--cluster-announce-ip", NODE_IPS[node],
            "--cluster-announce-port", str(client_port),
            "--cluster-announce-bus-port", str(bus_port),
        ]  # fmt: skip
        await pods.create(valkey_pod(name, node, {"member": name}, *args))
    for name in names:
        await pods.ready(name)
    for host, port in announced:
        await until(host, port, "PONG", 10)
    created = await kubelet.exec(
        namespace,
        names[0],
        "main",
        ["valkey-cli", "--cluster", "create", *(f"{h}:{p}" for h, p in announced), "--cluster-yes"],
        timeout=60,
    )
    assert created.exit_code == 0, created.output.decode()[-2000:]

    async def cluster_ok() -> bool:
        info = await ask(*announced[1], "CLUSTER", "INFO")
        return isinstance(info, bytes) and b"cluster_state:ok" in info

    await eventually(cluster_ok, "cluster_state:ok through the proxy", 60)
    cluster = ValkeyCluster(startup_nodes=[ClusterNode(*announced[2])], decode_responses=True)
    try:
        for index in range(50):
            await cluster.set(f"key-{index}", f"value-{index}")
        assert [await cluster.get(f"key-{i}") for i in range(50)] == [f"value-{i}" for i in range(50)]
        assert {(n.host, n.port) for n in cluster.get_nodes()} == set(announced)
    finally:
        await cluster.aclose()
