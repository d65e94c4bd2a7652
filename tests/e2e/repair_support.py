"""What the repair and persistence tests share: finding a shard's nodes in status, killing a server,
waiting for a repair, and checking the topology and data afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Collection
from pathlib import Path

from cluster_support import node_reports, owned_pods, status_of, warnings
from load_support import checker_for

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, ValkeyAdminError
from valkey_operator.valkey.replies import parse_cluster_nodes
from valkey_operator.valkey.slots import parse_slot_ranges
from valkey_testbed.datachecker import DataChecker
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import eventually

PREFILL = 3000
"""Keys written (and acknowledged) before each disruption."""
REPAIRED = 150.0


# --- arranging ---------------------------------------------------------------------------------------


def primary_of(status: Obj, shard: int) -> Obj:
    primaries: list[Obj] = [n for n in status["nodes"] if n["shard"] == shard and n.get("role") == "primary"]
    assert len(primaries) == 1, (shard, status["nodes"])
    return primaries[0]


def replicas_of(status: Obj, shard: int) -> list[Obj]:
    return [n for n in status["nodes"] if n["shard"] == shard and n.get("role") == "replica"]


def first_slot(node: Obj) -> int:
    return parse_slot_ranges(node["slots"])[0].start


def live(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return not pod["metadata"].get("deletionTimestamp") and phase not in ("Failed", "Succeeded")


async def live_pods(kube: Client, namespace: str, name: str) -> list[Obj]:
    return [pod for pod in await owned_pods(kube, namespace, name) if live(pod)]


def process_title(pid: int) -> bytes:
    """What the process shows as its command line (valkey-server rewrites it: 'valkey-server IP:PORT ...')."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()


async def kill_server(kubelet: KubeletControl, namespace: str, pod: str, ip: str) -> int:
    """SIGKILL the pod's valkey-server (found through the kubelet, checked by its command line)."""
    seen = await kubelet.pod(namespace, pod)
    assert seen is not None, f"the kubelet does not run {pod}"
    (container,) = [c for c in seen["containers"] if not c["init"]]
    pid = container["pid"]
    assert pid, seen
    title = process_title(pid)
    assert b"valkey-server" in title and f"{ip}:6379".encode() in title, title
    os.kill(pid, signal.SIGKILL)
    return int(pid)


# --- observing ---------------------------------------------------------------------------------------


async def cluster_nodes(admin: AdminClient, ip: str) -> str:
    async with admin.connect(ip) as node:
        return await node.cluster_nodes()


async def served_elsewhere(admin: AdminClient, observers: Collection[str], slot: int, old_id: str) -> bool:
    """Every observer that answers (one must) sees slot served by a healthy primary other than old_id."""
    answered = 0
    for ip in observers:
        try:
            text = await cluster_nodes(admin, ip)
        except ValkeyAdminError:
            continue
        answered += 1
        owners = [
            known
            for known in parse_cluster_nodes(text)
            if "master" in known.flags and any(r.start <= slot <= r.end for r in known.slots)
        ]
        if len(owners) != 1 or owners[0].node_id == old_id or owners[0].failed or owners[0].suspected:
            return False
    return answered > 0


async def takeover_time(
    admin: AdminClient, observers: Collection[str], primary: Obj, since: float, timeout: float
) -> float:
    """Seconds from since until the observers see primary's slots served by another node."""
    slot = first_slot(primary)

    async def moved() -> bool:
        return await served_elsewhere(admin, observers, slot, primary["nodeId"])

    await eventually(moved, f"slot {slot} of {primary['pod']} served by another node", timeout)
    return time.monotonic() - since


async def repaired(
    kube: Client,
    namespace: str,
    name: str,
    *,
    pods: int,
    gone: Collection[str] = (),
    old_ids: Collection[str] = (),
    timeout: float = REPAIRED,
) -> Obj:
    """Active again, from a pass that saw the repair: `pods` live pods, none of `gone` among them, each
    listed in status with a role and none with an old node id."""
    last: Obj = {}

    async def done() -> bool:
        nonlocal last
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        last = cluster.get("status") or {}
        if (
            last.get("state") != "Active"
            or last.get("observedGeneration") != cluster["metadata"]["generation"]
        ):
            return False
        running = {pod["metadata"]["name"] for pod in await live_pods(kube, namespace, name)}
        if len(running) != pods or running & set(gone):
            return False
        listed = {node["pod"]: node for node in last.get("nodes") or []}
        return all(
            listed.get(pod, {}).get("role") and listed[pod].get("nodeId") not in (None, *old_ids)
            for pod in running
        )

    try:
        await eventually(done, f"{name} Active again with {pods} repaired pods", timeout)
    except AssertionError as exc:
        seen = [pod_summary(pod) for pod in await owned_pods(kube, namespace, name)]
        raise AssertionError(f"{exc}; last status: {last}; pods as the API shows them: {seen}") from None
    return last


def pod_summary(pod: Obj) -> Obj:
    """What a failed wait needs to say which side is stuck: the kubelet's conditions and containers."""
    status = pod.get("status") or {}
    return {
        "name": pod["metadata"]["name"],
        "phase": status.get("phase"),
        "podIP": status.get("podIP"),
        "conditions": [
            (c.get("type"), c.get("status"), c.get("reason"), c.get("lastTransitionTime"))
            for c in status.get("conditions") or []
        ],
        "containers": [
            (c.get("name"), c.get("ready"), c.get("restartCount"), c.get("state"), c.get("lastState"))
            for c in status.get("containerStatuses") or []
        ],
    }


async def check_topology(
    admin: AdminClient, kube: Client, namespace: str, name: str, status: Obj, old_ids: Collection[str]
) -> list[Obj]:
    """Every live node: cluster_state ok, all slots assigned, exactly the live nodes known (no old id);
    one primary per shard followed by that shard's replicas. Returns the live nodes' status entries."""
    running = {pod["metadata"]["name"] for pod in await live_pods(kube, namespace, name)}
    nodes = [node for node in status["nodes"] if node["pod"] in running]
    ids = {node["nodeId"] for node in nodes}
    assert len(ids) == len(nodes) == len(running), status["nodes"]
    assert not ids & set(old_ids), status["nodes"]
    for node in nodes:
        report = await node_reports(admin, node["ip"])
        assert report["cluster"]["cluster_state"] == "ok", (node, report["cluster"])
        assert report["cluster"]["cluster_slots_assigned"] == "16384", (node, report["cluster"])
        known = {entry.node_id: entry for entry in parse_cluster_nodes(report["nodes"])}
        assert set(known) == ids, f"{node['pod']} knows {report['nodes']}"
        assert not any(entry.failed for entry in known.values()), report["nodes"]
    for shard in sorted({node["shard"] for node in nodes}):
        primary = primary_of({"nodes": nodes}, shard)
        for replica in replicas_of({"nodes": nodes}, shard):
            report = await node_reports(admin, replica["ip"])
            assert report["info"]["master_host"] == primary["ip"], (replica, report["info"])
            assert report["info"]["master_link_status"] == "up", (replica, report["info"])
    return nodes


async def no_data_lost_reported(kube: Client, namespace: str) -> None:
    """Every shard kept a copy: no Warning may claim data was lost."""
    lost = await warnings(kube, namespace, "DataLost")
    assert not lost, f"DataLost reported though no acknowledged key was lost: {[e.get('note') for e in lost]}"


async def prefilled(checker: DataChecker) -> None:
    written = await checker.write(PREFILL)
    assert written.acknowledged == PREFILL, written


@contextlib.asynccontextmanager
async def checkers(status: Obj, admin: AdminClient) -> AsyncIterator[tuple[DataChecker, DataChecker]]:
    """The durable checker (WAIT 1, PREFILL keys written) and the WAIT 0 probe of a 1-replica cluster."""
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
    ):
        await prefilled(durable)
        yield durable, probe


async def fail_every_node(kube: Client, kubelet: KubeletControl, namespace: str, names: list[str]) -> float:
    """Every test-bed node fails, the operator sees each cluster down, every node recovers: seconds
    from the failure to the recovery."""
    hosts = sorted(node["name"] for node in (await kubelet.status())["nodes"])
    started = time.monotonic()
    failed: list[str] = []
    try:
        for host in hosts:
            await kubelet.fail_node(host)
            failed.append(host)
        for name in names:

            async def noticed(name: str = name) -> bool:
                return (await status_of(kube, namespace, name)).get("state") != "Active"

            await eventually(noticed, f"the operator to see {name} down", 60)
    finally:  # the session's test bed keeps its nodes, whatever happens here
        for host in failed:
            await kubelet.recover_node(host)
    return time.monotonic() - started
