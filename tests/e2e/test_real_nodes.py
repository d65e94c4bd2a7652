"""The product on real nodes: the real kubelet, containerd, runc, a CNI bridge and CoreDNS
(valkey_testbed.realnodes), not the test bed's process kubelet.

One bed of three real nodes for the module (30 to 50 s to start with its binaries cached by
`python -m valkey_testbed build --nodes-runtime containerd`). In order: no packet for a test-bed
address can leave the machine (host routes and rules); a pod has no default route and reaches a
Service by name (CoreDNS, kube-proxy); the kernel OOM-kills a container at its memory limit and the
kubelet restarts it; then scenario_support's steps with the chart's default values: the operator
from its image makes a TLS 3x1 cluster with aof Active, resizes it in place, rolls it under load,
sees a primary OOM-killed at its memory limit and a primary's node fail, backs it up to an object
store on the bridge and restores it, and is uninstalled.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import scenario_support
from chart_support import kubectl

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS, SERVICES
from valkey_operator.core.rest import Obj
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.realnodes import network
from valkey_testbed.realnodes.bed import RealNodesBed
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.testbed_exclusive]

NETWORKS = (ipaddress.IPv4Network("127.0.0.0/8"), ipaddress.IPv4Network(network.POD_CIDR))
"""Where the data checker may dial here: loopback and the bed's own bridge."""
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
        left = bed.down()
        shutil.rmtree(state_dir, ignore_errors=True)
    # Shown as an error of the module's last test: down must leave the host as it found it.
    assert left == [], f"still on the host after down: {left}"


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
async def test_the_charts_operator_through_a_roll_an_oom_kill_a_node_failure_and_a_restore(
    real_nodes: RealNodesBed, kube: Client, namespace: str
) -> None:
    """scenario_support's steps, with the chart's default values (no test-bed setting)."""

    def index(node: str) -> int:
        return int(node.removeprefix("node-")) - 1

    async def fail(node: str) -> None:
        await asyncio.to_thread(real_nodes.fail_node, index(node))

    async def recover(node: str) -> None:
        await asyncio.to_thread(real_nodes.recover_node, index(node))

    nodes = scenario_support.Nodes(
        kind="real nodes",
        kubeconfig=real_nodes.kubeconfig,
        networks=NETWORKS,
        chart_values=(),
        store_host=network.GATEWAY,
        memory_limits=True,
        fail_node=fail,
        recover_node=recover,
    )
    await scenario_support.run(nodes, kube, namespace)
