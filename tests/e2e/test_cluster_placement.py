"""Placement on the real kube-scheduler, and primaries spread over Kubernetes nodes.

The test bed has three nodes, one per zone (a, b, c, labelled
topology.kubernetes.io/zone); the real scheduler binds every pod. Each case
asserts where the scheduler put the pods, read back from spec.nodeName and the
nodes' labels.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import own_bed
import pytest
from chart_operator import ChartOperator
from cluster_support import (
    Catalog,
    coordinated_failovers,
    create_cluster,
    crowding,
    fail_over_by_hand,
    formed_cluster,
    image_config,
    owned_pods,
    pause,
    primaries_by_pod,
    resume,
    settled,
    status_of,
    warnings,
)
from load_support import SHARD_GAP_LIMIT, Load, checker_for

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NODES, Resource
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

# The placement-rule test taints a node and adds a PriorityClass, which other modules' pods would
# meet: the module runs on a test bed of its own (own_bed.py).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

ZONE = "topology.kubernetes.io/zone"
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)


async def zones_of_nodes(kube: Client) -> dict[str, str]:
    return {node["metadata"]["name"]: node["metadata"]["labels"][ZONE] for node in await kube.list(NODES)}


async def placed(kube: Client, namespace: str, name: str, count: int, timeout: float = 90) -> list[Obj]:
    """The cluster's pods once `count` of them are bound to a node."""

    async def bound() -> list[Obj] | NotYet:
        pods = [pod for pod in await owned_pods(kube, namespace, name) if pod["spec"].get("nodeName")]
        return pods if len(pods) >= count else NotYet([pod["metadata"]["name"] for pod in pods])

    return await eventually(bound, f"{count} pod(s) of {name} scheduled", timeout)


@pytest.mark.timeout(600)
async def test_primaries_are_spread_one_per_node_and_a_crowded_node_is_relieved_under_load(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    status, admin = await formed_cluster(kube, catalog, namespace, "spread", shards=3, replicas=1)
    pods = {pod["metadata"]["name"]: pod for pod in await owned_pods(kube, namespace, "spread")}
    zones = await zones_of_nodes(kube)
    hosts = {name: pod["spec"]["nodeName"] for name, pod in pods.items()}
    # The scheduler's spreads are soft: it may use two of the three nodes. The share is counted
    # over the nodes that host the cluster, per node and per zone (one node per zone here).
    used = set(hosts.values())
    share = math.ceil(3 / len(used))

    async def balanced() -> Obj | NotYet:  # one coordinated failover per pass moves primaries there
        status = await status_of(kube, namespace, "spread")
        done = status.get("maxPrimariesPerNode") == share and status.get("state") == "Active"
        return status if done else NotYet(status.get("maxPrimariesPerNode"))

    status = await eventually(balanced, f"at most {share} primary per node", 120)
    per_node = Counter(hosts[node["pod"]] for node in status["nodes"] if node["role"] == "primary")
    print(f"[placement] 3x1 primaries per node {dict(per_node)}, pods {hosts}")
    assert max(per_node.values()) == share, (per_node, used)
    assert status["maxPrimariesPerNode"] == share
    assert max(Counter(zones[host] for host in per_node.elements()).values()) == share
    for shard in range(3):  # the soft per-shard hostname spread kept each shard's copies apart
        shard_hosts = [hosts[node["pod"]] for node in status["nodes"] if node["shard"] == shard]
        assert len(set(shard_hosts)) == 2, shard_hosts
    gauge = await operator.sample(
        "valkey_operator_cluster_max_primaries_per_node", {"namespace": namespace, "cluster": "spread"}
    )
    assert gauge == share

    # Crowd one node by hand (the cluster paused), then let the operator undo it under write load.
    crowded, wanted = crowding(hosts, status)
    assert len(wanted) > share, f"no node holds copies of more than {share} shards: {hosts}"
    await pause(kube, namespace, "spread")
    replicas = [node["ip"] for node in status["nodes"] if node["pod"] in wanted and node["role"] == "replica"]
    await fail_over_by_hand(admin, replicas)
    on_crowded = {pod for pod in await primaries_by_pod(admin, status) if hosts[pod] == crowded}
    assert len(on_crowded) == len(wanted) > share, (on_crowded, wanted)
    failovers_before = await coordinated_failovers(operator, namespace, "spread")
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
    ):
        written = await durable.write(1000)
        assert written.acknowledged == 1000, written

        async def relieved() -> Counter[str] | NotYet:  # what the servers do, and what status says
            current = await status_of(kube, namespace, "spread")
            serving = Counter(hosts[pod] for pod in await primaries_by_pod(admin, current))
            done = current.get("state") == "Active" and current.get("maxPrimariesPerNode") == share
            return serving if done and max(serving.values()) == share else NotYet(dict(serving))

        async with Load(durable, probe, duration=300.0) as load:
            await resume(kube, namespace, "spread")
            resumed = time.monotonic()
            serving = await eventually(relieved, f"{crowded} relieved to {share} primary", 180, interval=0.5)
            relief = time.monotonic() - resumed
            report = await load.finish()
        verified = await durable.verify()
    moves = await coordinated_failovers(operator, namespace, "spread") - failovers_before
    print(
        f"[placement] crowded {crowded} with {len(wanted)}, {moves} move(s) to {dict(serving)} "
        f"in {relief:.2f} s after resume: {report}"
    )
    assert serving[crowded] <= share, serving
    assert moves >= len(wanted) - share
    assert await coordinated_failovers(operator, namespace, "spread", mode="takeover") == 0
    assert verified.ok, verified
    assert verified.checked == 1000 + report.durable.acknowledged, verified
    gaps = report.probe.gaps_by_slots
    assert len(gaps) == 3 and all(gap < SHARD_GAP_LIMIT for gap in gaps.values()), gaps


@pytest.mark.timeout(600)
async def test_each_placement_rule_is_where_the_scheduler_puts_the_pods(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    zones = await zones_of_nodes(kube)
    node_in = {zone: node for node, zone in zones.items()}
    priority = f"valkey-{namespace[-6:]}"
    await kube.create(PRIORITY_CLASSES, {"metadata": {"name": priority}, "value": 1000})
    await create_cluster(kube, namespace, "zoned", config, 1, 2, placement={"zones": ["a", "b"]})
    await create_cluster(kube, namespace, "required", config, 1, 2, placement={"zoneSpread": "required"})
    await create_cluster(kube, namespace, "selected", config, 1, 1, placement={"nodeSelector": {ZONE: "b"}})
    zoned = await placed(kube, namespace, "zoned", 3)
    # Required affinity: only a and b (how the soft spreads share them out is the scheduler's score).
    assert {zones[pod["spec"]["nodeName"]] for pod in zoned} <= {"a", "b"}
    affinity = zoned[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a", "b"]
    soft = zoned[0]["spec"]["topologySpreadConstraints"]  # bestEffort (the default): ScheduleAnyway
    assert {(c["topologyKey"], c["whenUnsatisfiable"]) for c in soft} == {
        (ZONE, "ScheduleAnyway"),
        ("kubernetes.io/hostname", "ScheduleAnyway"),
    }
    required = await placed(kube, namespace, "required", 3)
    assert sorted(zones[pod["spec"]["nodeName"]] for pod in required) == ["a", "b", "c"]
    spread = required[0]["spec"]["topologySpreadConstraints"]
    assert {c["whenUnsatisfiable"] for c in spread if c["topologyKey"] == ZONE} == {
        "DoNotSchedule",
        "ScheduleAnyway",  # the cluster-wide soft zone spread of required mode
    }
    selected = await placed(kube, namespace, "selected", 2)
    assert {pod["spec"]["nodeName"] for pod in selected} == {node_in["b"]}
    assert all(pod["spec"]["nodeSelector"] == {ZONE: "b"} for pod in selected)

    taint = {"key": f"dedicated-{namespace[-6:]}", "value": "valkey", "effect": "NoSchedule"}
    tainted = node_in["c"]
    node = await kube.get(NODES, tainted)
    await kube.patch(NODES, tainted, {"spec": {"taints": [*(node["spec"].get("taints") or []), taint]}})
    try:
        toleration = {"key": taint["key"], "operator": "Equal", "value": "valkey", "effect": "NoSchedule"}
        await create_cluster(
            kube,
            namespace,
            "tolerant",
            config,
            1,
            0,
            placement={"zones": ["c"], "tolerations": [toleration], "priorityClassName": priority},
        )
        await create_cluster(kube, namespace, "intolerant", config, 1, 0, placement={"zones": ["c"]})

        (tolerant,) = await placed(kube, namespace, "tolerant", 1)
        assert tolerant["spec"]["nodeName"] == tainted
        assert tolerant["spec"]["priorityClassName"] == priority and tolerant["spec"]["priority"] == 1000

        # No node takes the pod without the toleration: Pending, the scheduler's words in the status.
        async def unschedulable() -> Obj | NotYet:
            status = await status_of(kube, namespace, "intolerant")
            return (
                status if "untolerated taint" in status.get("message", "") else NotYet(status.get("message"))
            )

        status = await eventually(unschedulable, "the scheduler's reason in the status", 60)
        print(f"[placement] intolerant: {status['message']}")
        # The Event is a write of its own after the status: the operator's pod may make it a moment later.
        await eventually(lambda: warnings(kube, namespace, "PodsUnschedulable"), "the Warning Event", 30)
        (pending,) = await owned_pods(kube, namespace, "intolerant")
        assert not pending["spec"].get("nodeName")
    finally:
        node = await kube.get(NODES, tainted)
        kept = [t for t in node["spec"].get("taints") or [] if t.get("key") != taint["key"]]
        await kube.patch(NODES, tainted, {"spec": {"taints": kept or None}})
        await kube.delete(PRIORITY_CLASSES, priority)
    # The taint gone, the pending pod is placed and its cluster forms.
    await settled(kube, namespace, "intolerant", 180)
    # A zoneSpread change replaces no pod: it applies to pods created later.
    await settled(kube, namespace, "selected", 180)
    uids = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, "selected")}
    await kube.patch(
        VALKEY_CLUSTERS, "selected", {"spec": {"placement": {"zoneSpread": "required"}}}, namespace
    )
    await settled(kube, namespace, "selected", 60)  # a pass saw the change and found nothing to roll
    assert {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, "selected")} == uids
    assert (await status_of(kube, namespace, "selected"))["state"] == "Active"


@pytest.mark.timeout(900)
async def test_a_zones_change_moves_the_pods_by_a_roll_and_loses_no_key(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    status, admin = await formed_cluster(
        kube, catalog, namespace, "moving", shards=2, replicas=1, placement={"zones": ["a", "b"]}
    )
    zones = await zones_of_nodes(kube)
    before = await owned_pods(kube, namespace, "moving")
    assert {zones[pod["spec"]["nodeName"]] for pod in before} <= {"a", "b"}
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
    ):
        written = await durable.write(1000)
        assert written.acknowledged == 1000, written
        async with Load(durable, probe, duration=600.0) as load:
            await kube.patch(
                VALKEY_CLUSTERS, "moving", {"spec": {"placement": {"zones": ["b", "c"]}}}, namespace
            )

            async def moved() -> list[Obj] | NotYet:
                pods = await owned_pods(kube, namespace, "moving")
                where = sorted(zones.get(pod["spec"].get("nodeName") or "", "?") for pod in pods)
                current = await status_of(kube, namespace, "moving")
                done = current.get("state") == "Active" and len(pods) == 4 and set(where) <= {"b", "c"}
                return pods if done else NotYet((current.get("message"), where))

            after = await eventually(moved, "every pod in zones b and c, Active", 600, interval=0.5)
            report = await load.finish()
        verified = await durable.verify()
    print(f"[placement] zones a,b -> b,c: {report}")
    assert not {pod["metadata"]["uid"] for pod in before} & {pod["metadata"]["uid"] for pod in after}
    assert verified.ok, verified
    assert verified.checked == 1000 + report.durable.acknowledged, verified
