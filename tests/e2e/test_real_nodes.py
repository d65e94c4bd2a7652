"""The product on real nodes: the real kubelet, containerd, runc, a CNI bridge and CoreDNS
(valkey_testbed.realnodes), not the test bed's process kubelet.

One bed of three real nodes for the module (30 to 50 s to start with its binaries cached by
`python -m valkey_testbed build --nodes-runtime containerd`). In order: no packet for a test-bed
address can leave the machine (host routes and rules); a pod has no default route and reaches a
Service by name (CoreDNS, kube-proxy); the kernel OOM-kills a container at its memory limit and the
kubelet restarts it; the chart with its default values runs the operator from its image, which
makes a TLS 3x1 cluster with aof persistence Active, resizes its CPU in place, rolls it under the
data checker and the valkey-py cluster client with no acknowledged write lost, and sees the node of
a primary fail (kubelet, containerd and containers killed at once) and come back; helm uninstall.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chart_support import CHART, helm, kubectl
from cluster_support import NODE_TIMEOUT_MS, create_cluster, owned_pods, status_of, wait_for_state
from keys_support import keys_of, read_back, write
from repair_support import primary_of

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS, SECRETS, SERVICES, Resource
from valkey_operator.core.rest import Obj
from valkey_testbed import certs
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.datachecker import DataChecker
from valkey_testbed.realnodes import network
from valkey_testbed.realnodes.bed import RealNodesBed
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.testbed_exclusive]

NETWORKS = (ipaddress.IPv4Network("127.0.0.0/8"), ipaddress.IPv4Network(network.POD_CIDR))
"""Where the data checker may dial here: loopback and the bed's own bridge."""
OPERATOR_NAMESPACE = "valkey-system"
CLUSTER = "durable"
SAMPLES = ("10.244.0.1", "10.244.1.2", "10.244.3.200", "10.244.250.9", "10.96.0.1", "10.96.123.45")


@pytest.fixture(scope="module")
def kube_control_plane() -> Iterator[ControlPlane]:
    """The module's bed of three real nodes (its control plane is what the plugin's fixtures use).
    Every test of the module asks for it, so the plugin's lock sees them all: the module is
    testbed_exclusive, as three kubelets and their containerds would slow the timed tests of
    modules running beside it on two cores."""
    state_dir = Path(tempfile.mkdtemp(prefix="valkey-operator-real-nodes-"))
    bed = RealNodesBed(state_dir)
    started = time.monotonic()
    try:
        bed.up(progress=lambda line: None)
        print(f"3 real nodes Ready in {time.monotonic() - started:.1f}s")
        yield bed.plane
    finally:
        bed.down()
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def real_nodes(kube_control_plane: ControlPlane) -> RealNodesBed:
    return RealNodesBed(kube_control_plane.state_dir)


@pytest.fixture(scope="module")
def kubeconfig_path(kube_control_plane: ControlPlane) -> Path:
    return kube_control_plane.kubeconfig


def _pod(name: str, namespace: str, command: list[str], memory: str = "64Mi") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999},
            "containers": [
                {
                    "name": "valkey",
                    "image": "valkey/valkey:9.1.2",
                    "imagePullPolicy": "IfNotPresent",
                    "command": command,
                    "resources": {"limits": {"memory": memory, "cpu": "500m"}},
                }
            ],
        },
    }


def _cluster_scoped(resource: Resource, name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def _cpu_request_applied(pod: Obj) -> str | None:
    """The CPU request the kubelet reports its container runs with (status, not spec)."""
    status = (pod.get("status", {}).get("containerStatuses") or [{}])[0]
    cpu: str | None = status.get("resources", {}).get("requests", {}).get("cpu")
    return cpu


async def _running(kube: Client, namespace: str, name: str, timeout: float = 60) -> Obj:
    async def running() -> Obj | NotYet:
        pod = await kube.get(PODS, name, namespace)
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return pod if statuses and statuses[0].get("ready") else NotYet(pod.get("status"))

    return await eventually(running, f"pod {name} running", timeout)


def test_no_packet_for_a_test_bed_address_can_leave_the_machine(real_nodes: RealNodesBed) -> None:
    assert network.leaks(SAMPLES) == [], "a test-bed address routed off the bridge"
    blackholes = json.loads(subprocess.run(["ip", "-j", "route", "show", "type", "blackhole"],
                                           capture_output=True, text=True, check=True).stdout)  # fmt: skip
    assert {network.POD_CIDR, network.SERVICE_CIDR} <= {route["dst"] for route in blackholes}
    rule = [
        "iptables",
        "-w",
        "-t",
        "mangle",
        "-C",
        "FORWARD",
        "-i",
        network.BRIDGE,
        "!",
        "-o",
        network.BRIDGE,
    ]
    assert subprocess.run([*rule, "-j", "DROP"], capture_output=True).returncode == 0
    forwarding = Path(f"/proc/sys/net/ipv4/conf/{network.BRIDGE}/forwarding").read_text().strip()
    assert forwarding == "1"


async def test_a_pod_has_no_default_route_and_finds_a_service_by_name(
    real_nodes: RealNodesBed, kube: Client, namespace: str
) -> None:
    command = ["valkey-server", "--port", "6379", "--protected-mode", "no", "--save", ""]
    await kube.create(PODS, _pod("probe", namespace, command))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {"selector": {"app": "probe"}, "ports": [{"port": 6379}]},
    }
    await kube.create(SERVICES, service)
    await _running(kube, namespace, "probe")
    routes = kubectl(real_nodes.kubeconfig, "-n", namespace, "exec", "probe", "--", "cat", "/proc/net/route")
    destinations = {line.split()[1] for line in routes.splitlines()[1:]}
    assert "00000000" not in destinations, routes  # no default route: nowhere to send a stray packet
    by_name = f"probe.{namespace}.svc.cluster.local"
    pong = kubectl(
        real_nodes.kubeconfig, "-n", namespace, "exec", "probe", "--", "valkey-cli", "-h", by_name, "ping"
    )
    assert pong.strip() == "PONG"  # CoreDNS's answer, then kube-proxy's rewrite of the ClusterIP


async def test_the_kernel_oom_kills_a_container_at_its_memory_limit_and_the_kubelet_restarts_it(
    real_nodes: RealNodesBed, kube: Client, namespace: str
) -> None:
    command = [
        "valkey-server",
        "--port",
        "6379",
        "--save",
        "",
        "--maxmemory",
        "0",
        "--enable-debug-command",
        "yes",
    ]
    await kube.create(PODS, _pod("hog", namespace, command, memory="64Mi"))
    await _running(kube, namespace, "hog")
    # 1.5 million 64-byte values: far past 64 MiB, which maxmemory 0 never stops.
    kubectl(real_nodes.kubeconfig, "-n", namespace, "exec", "hog", "--", "valkey-cli", "debug", "populate",
            "1500000", "key", "64", check=False)  # fmt: skip

    async def killed() -> Obj | NotYet:
        pod = await kube.get(PODS, "hog", namespace)
        status = (pod.get("status", {}).get("containerStatuses") or [{}])[0]
        terminated = status.get("lastState", {}).get("terminated") or {}
        return status if terminated.get("reason") == "OOMKilled" and status.get("ready") else NotYet(status)

    status = await eventually(killed, "hog OOMKilled and running again", 90)
    assert status["restartCount"] >= 1
    assert status["lastState"]["terminated"]["exitCode"] == 137


@pytest.mark.timeout(1200)
async def test_the_charts_operator_runs_a_tls_cluster_rolls_it_and_survives_a_node_failure(
    real_nodes: RealNodesBed, kube: Client, namespace: str
) -> None:
    kubectl(real_nodes.kubeconfig, "create", "namespace", OPERATOR_NAMESPACE)
    started = time.monotonic()
    helm(
        real_nodes.kubeconfig,
        "install",
        "vo",
        str(CHART),
        "-n",
        OPERATOR_NAMESPACE,
        "--wait",
        "--timeout",
        "4m",
    )
    print(f"helm install (chart defaults) in {time.monotonic() - started:.1f}s")
    ca, ca_key = certs.issue_ca("real-nodes-ca")
    leaf, key = certs.issue_leaf(ca, ca_key, "valkey", dns_names=("valkey",), server=True, client=True)
    await kube.create(
        SECRETS, certs.tls_secret("tls", namespace, certs.pem(leaf), certs.key_pem(key), certs.pem(ca))
    )
    image_spec = {"repository": "valkey/valkey", "tag": "9.1.2", "version": "9.1.2"}
    await kube.create(VALKEY_IMAGES, _cluster_scoped(VALKEY_IMAGES, "real-nodes", image_spec))
    config_spec = {
        "imageRef": "real-nodes",
        "resources": {"cpu": "100m", "memory": "256Mi"},
        "persistence": {"mode": "aof", "size": "1Gi"},
        "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS},
    }
    await kube.create(VALKEY_CONFIGS, _cluster_scoped(VALKEY_CONFIGS, "real-nodes", config_spec))
    started = time.monotonic()
    await create_cluster(kube, namespace, CLUSTER, "real-nodes", 3, 1, tls={"secretRef": "tls"})
    status = await wait_for_state(kube, namespace, CLUSTER, "Active", 180)
    print(f"TLS 3x1 with aof Active in {time.monotonic() - started:.1f}s")
    ca_pem = certs.pem(ca).decode()
    before = keys_of("before-roll", 2000)
    await write(status, before, ca_pem)

    context = ssl.create_default_context(cadata=ca_pem)
    context.check_hostname = False
    seeds = [(node["ip"], 6379) for node in status["nodes"]]
    pods_before = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, CLUSTER)}

    # A CPU change is applied in place by the real kubelet (pods/resize): no pod is replaced.
    started = time.monotonic()
    await kube.patch(VALKEY_CONFIGS, "real-nodes", {"spec": {"resources": {"cpu": "150m"}}})

    async def resized() -> bool | NotYet:
        pods = await owned_pods(kube, namespace, CLUSTER)
        applied = [pod for pod in pods if _cpu_request_applied(pod) == "150m"]
        return True if len(applied) == 6 else NotYet(len(applied))

    await eventually(resized, "every Valkey container running with 150m", 120)
    assert {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, CLUSTER)} == pods_before
    print(f"in-place resize of 6 pods in {time.monotonic() - started:.1f}s")

    async with DataChecker(seeds, replicas=1, username=SUPERUSER, password=SUPERUSER_PASSWORD, ssl=context,
                           networks=NETWORKS) as checker:  # fmt: skip
        stop = asyncio.Event()
        writer = asyncio.create_task(
            checker.run_writer(max_keys=200_000, duration=600, interval=0.01, stop=stop)
        )
        await asyncio.sleep(2)
        started = time.monotonic()
        # appendfsync is read at start: a change rolls every pod.
        await kube.patch(VALKEY_CONFIGS, "real-nodes", {"spec": {"persistence": {"appendfsync": "always"}}})

        async def rolled() -> Obj | NotYet:
            status = await status_of(kube, namespace, CLUSTER)
            uids = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, CLUSTER)}
            done = status.get("state") == "Active" and not uids & pods_before and len(uids) == 6
            return status if done else NotYet((status.get("state"), len(uids & pods_before)))

        status = await eventually(rolled, "every pod replaced, Active", 300)
        print(f"roll of 6 pods in {time.monotonic() - started:.1f}s")
        stop.set()
        report = await writer
        verified = await checker.verify()
    print(f"roll under load: {report}; {verified}")
    assert verified.ok, verified
    assert len(checker.acknowledged) > 100, report
    assert await read_back(status, before, ca_pem) == []

    await _fail_and_recover_a_primarys_node(real_nodes, kube, namespace)
    await kube.delete(VALKEY_CLUSTERS, CLUSTER, namespace)
    helm(real_nodes.kubeconfig, "uninstall", "vo", "-n", OPERATOR_NAMESPACE, "--wait")


async def _fail_and_recover_a_primarys_node(real_nodes: RealNodesBed, kube: Client, namespace: str) -> None:
    """The node of shard 0's primary fails (kubelet, containerd and containers killed at once): its replica
    is promoted; the node comes back and the cluster is whole again."""
    status = await status_of(kube, namespace, CLUSTER)
    victim = primary_of(status, 0)
    node_name = (await kube.get(PODS, victim["pod"], namespace))["spec"]["nodeName"]
    placement = {
        pod["metadata"]["name"]: pod["spec"]["nodeName"]
        for pod in [*await owned_pods(kube, namespace, CLUSTER), *await kube.list(PODS, OPERATOR_NAMESPACE)]
    }
    roles = [(node["pod"], node.get("role")) for node in status["nodes"]]
    print(f"before the failure of {node_name}: {placement}; roles {roles}")
    index = int(node_name.removeprefix("node-")) - 1
    started = time.monotonic()
    real_nodes.fail_node(index)

    async def failed_over() -> Obj | NotYet:
        status = await status_of(kube, namespace, CLUSTER)
        shard = [
            node for node in status.get("nodes", []) if node["shard"] == 0 and node.get("role") == "primary"
        ]
        return status if shard and shard[0]["pod"] != victim["pod"] else NotYet(shard)

    await eventually(failed_over, "shard 0's replica promoted", 120)
    print(f"{node_name} failed: shard 0 failed over in {time.monotonic() - started:.1f}s")
    started = time.monotonic()
    real_nodes.recover_node(index)

    async def whole() -> Obj | NotYet:
        status = await status_of(kube, namespace, CLUSTER)
        ready = status.get("readyNodes")
        return (
            status if status.get("state") == "Active" and ready == 6 else NotYet((status.get("state"), ready))
        )

    await eventually(whole, "6 of 6 ready, Active", 240)
    print(f"{node_name} back: Active with 6 of 6 in {time.monotonic() - started:.1f}s")
