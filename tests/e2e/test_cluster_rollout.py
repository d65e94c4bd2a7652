"""Rolling updates end to end: every pod replaced under write load, no acknowledged write lost.

Real pods and valkey-server binaries of two versions (9.1.0 and the newest the
catalogue has), the operator's reconcilers in this process. Two continuous
writers run through the upgrade (load_support.py): WAIT-acknowledged keys are
all read back afterwards, and the WAIT 0 probe measures, per shard, the
longest time it took no writes (printed as `[rollout]` lines with -s).
"""

from __future__ import annotations

import time

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    Catalog,
    admin_client,
    coordinated_failovers,
    create_cluster,
    owned_pods,
    settled,
    status_of,
    superuser_client,
    warnings,
)
from handover_support import PrimaryLogs, primary_logs
from load_support import SHARD_GAP_LIMIT, Load, checker_for

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import EVENTS
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

OLD = "9.1.0"
PREFILL = 2000


def assert_handed_over_first(logs: PrimaryLogs) -> None:
    """Every starting primary became a replica by the operator's failover before its SIGTERM."""
    handovers = logs.handovers()
    late = [handover for handover in handovers if not handover.coordinated]
    assert not late, f"primaries stopped before they handed their slots over (log line numbers): {late}"


async def rolled(kube: Client, namespace: str, name: str, image: str, timeout: float) -> Obj:
    """Active again with currentImage the new image, for the current generation."""

    async def done() -> Obj | NotYet:
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        status: Obj = cluster.get("status") or {}
        if status.get("state") == "Active" and status.get("currentImage") == image:
            return status
        return NotYet({key: status.get(key) for key in ("state", "message", "currentImage")})

    return await eventually(done, f"{name} rolled to {image}", timeout, interval=0.5)


async def pod_uids(kube: Client, namespace: str, name: str) -> set[str]:
    return {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, name)}


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("shards", "replicas"), [pytest.param(3, 1, id="3x1"), pytest.param(2, 0, id="2x0-surge")]
)
async def test_an_image_upgrade_replaces_every_pod_and_loses_no_acknowledged_write(
    operator: ChartOperator,
    kube: Client,
    kubelet: KubeletControl,
    catalog: Catalog,
    namespace: str,
    shards: int,
    replicas: int,
) -> None:
    newest = images.valkey_version(images.newest_image())
    old_image = await catalog.image("old", OLD)
    new_image = await catalog.image("new", newest)
    config = await catalog.config("cfg", old_image)
    await create_cluster(kube, namespace, "roll", config, shards=shards, replicas=replicas)
    status = await settled(kube, namespace, "roll", 300)
    admin = await admin_client(kube, namespace, "roll")
    before = await pod_uids(kube, namespace, "roll")
    failovers_before = await coordinated_failovers(operator, namespace, "roll")
    async with (
        checker_for(status, admin, replicas=replicas) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
        primary_logs(kubelet, namespace, status) as logs,
    ):
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        async with Load(durable, probe, duration=600.0) as load:
            started = time.monotonic()
            await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": new_image}})
            status = await rolled(kube, namespace, "roll", f"valkey/valkey:{newest}", 600)
            took = time.monotonic() - started
            report = await load.finish()
        verified = await durable.verify()
        assert_handed_over_first(logs)
    gaps = report.probe.gaps_by_slots
    print(
        f"[rollout] {shards}x{replicas} {OLD} -> {newest} in {took:.1f}s; longest write gap per shard {gaps}"
    )
    print(f"[rollout] {report}")
    assert verified.ok, verified
    assert verified.checked == PREFILL + report.durable.acknowledged, verified
    assert report.durable.acknowledged > 0
    assert len(gaps) == shards and all(gap < SHARD_GAP_LIMIT for gap in gaps.values()), gaps
    # One coordinated failover per starting primary (each had to move off its old pod), no takeover.
    assert await coordinated_failovers(operator, namespace, "roll") - failovers_before >= shards
    assert await coordinated_failovers(operator, namespace, "roll", mode="takeover") == 0
    after = await pod_uids(kube, namespace, "roll")
    assert not before & after, "a pod of the old template is still there"
    assert len(after) == shards * (1 + replicas)
    assert {node.get("version") for node in status["nodes"]} == {newest}
    assert "rollout" not in status
    assert await events(kube, namespace, "RolloutStarted") == 1
    assert await events(kube, namespace, "ShardUpdated") >= shards - 1
    assert await events(kube, namespace, "RolloutFinished") == 1


async def events(kube: Client, namespace: str, reason: str) -> int:
    """How many times the operator recorded reason (an Event counts its repeats)."""
    found = [e for e in await kube.list(EVENTS, namespace) if e.get("reason") == reason]
    return sum(int((e.get("series") or {}).get("count") or 1) for e in found)


@pytest.mark.timeout(600)
async def test_an_image_below_the_floor_stops_the_roll_and_a_revert_resumes(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    """The ValkeyImage declares 9.0.1 (admission accepts it) but its binary is 9.0.0."""
    old_image = await catalog.image("old", OLD)
    liar = await catalog.image("liar", "9.0.0", version="9.0.1")
    config = await catalog.config("cfg", old_image)
    await create_cluster(kube, namespace, "floor", config, shards=1, replicas=1)
    await settled(kube, namespace, "floor", 300)
    before = await pod_uids(kube, namespace, "floor")
    await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": liar}})

    async def stopped() -> Obj | NotYet:
        status = await status_of(kube, namespace, "floor")
        progressing = find_condition(status.get("conditions"), "Progressing") or {}
        done = (progressing.get("status"), progressing.get("reason")) == ("False", "VersionBelowFloor")
        return status if done else NotYet(status.get("message"))

    status = await eventually(stopped, "the roll stopped at its surge pod", 180)
    assert "9.0.0" in status["message"] and "9.0.1" in status["message"], status["message"]
    # The old pods keep serving: Updating and Ready, not Failed (SPEC 1.8); a Warning and the metric say it.
    ready = find_condition(status["conditions"], "Ready") or {}
    assert status["state"] == "Updating" and ready.get("status") == "True", (status["state"], ready)
    assert await warnings(kube, namespace, "VersionBelowFloor")
    labels = {"namespace": namespace, "cluster": "floor"}
    assert await operator.sample("valkey_operator_rollouts_failed_total", labels) == 1
    assert before <= await pod_uids(kube, namespace, "floor"), "an old pod was replaced"
    await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": old_image}})
    status = await rolled(kube, namespace, "floor", f"valkey/valkey:{OLD}", 240)
    assert await pod_uids(kube, namespace, "floor") == before


@pytest.mark.timeout(600)
@pytest.mark.operator_values("operatorConfig.maxConcurrentRollouts=1")
async def test_two_clusters_on_one_config_roll_one_after_the_other_with_max_concurrent_rollouts_1(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    old_image = await catalog.image("old", OLD)
    new_image = await catalog.image("new", images.valkey_version(images.newest_image()))
    config = await catalog.config("cfg", old_image)
    for name in ("one", "two"):
        await create_cluster(kube, namespace, name, config, shards=1, replicas=0)
    for name in ("one", "two"):
        await settled(kube, namespace, name, 300)
    await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": new_image}})
    rolling_seen: list[set[str]] = []

    async def both_rolled() -> bool | NotYet:
        statuses = {name: await status_of(kube, namespace, name) for name in ("one", "two")}
        rolling_seen.append({name for name, status in statuses.items() if status.get("rollout")})
        newest = f"valkey/valkey:{images.valkey_version(images.newest_image())}"
        done = all(s.get("state") == "Active" and s.get("currentImage") == newest for s in statuses.values())
        return True if done else NotYet({n: s.get("message") for n, s in statuses.items()})

    await eventually(both_rolled, "both clusters rolled", 480, interval=0.3)
    assert max(len(rolling) for rolling in rolling_seen) == 1, rolling_seen
    assert {"one"} in rolling_seen and {"two"} in rolling_seen, "each rolled, one after the other"
    waited = [await status_of(kube, namespace, name) for name in ("one", "two")]
    assert all("rollout" not in status for status in waited)


@pytest.mark.timeout(900)
async def test_a_base_config_edit_a_config_ref_switch_and_an_image_tag_edit_each_roll_the_cluster(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    """Three more ways a pod template changes, one after the other under the same write load."""
    newest = images.valkey_version(images.newest_image())
    old_image = await catalog.image("old", OLD)
    new_image = await catalog.image("new", newest)
    base = await catalog.config("base", old_image)
    spec = {"baseRef": base, "valkey": {"cluster-node-timeout": "5000"}}
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": catalog("child")}, "spec": spec})
    other = await catalog.config("other", old_image)
    await create_cluster(kube, namespace, "paths", catalog("child"), shards=3, replicas=1)
    status = await settled(kube, namespace, "paths", 300)
    admin = await admin_client(kube, namespace, "paths")
    tag_edit = {"spec": {"tag": newest, "version": newest}}
    steps = [
        (
            "base config edit",
            f"valkey/valkey:{newest}",
            (VALKEY_CONFIGS, base, {"spec": {"imageRef": new_image}}),
        ),
        (
            "configRef switch",
            f"valkey/valkey:{OLD}",
            (VALKEY_CLUSTERS, "paths", {"spec": {"configRef": other}}),
        ),
        ("ValkeyImage tag edit", f"valkey/valkey:{newest}", (VALKEY_IMAGES, old_image, tag_edit)),
    ]
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
    ):
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        async with Load(durable, probe, duration=800.0) as load:
            for what, image, (resource, name, patch) in steps:
                before = await pod_uids(kube, namespace, "paths")
                started = time.monotonic()
                if resource is VALKEY_CLUSTERS:
                    await kube.patch(resource, name, patch, namespace)
                else:
                    await kube.patch(resource, name, patch)
                await rolled(kube, namespace, "paths", image, 600)
                after = await pod_uids(kube, namespace, "paths")
                assert not before & after, f"{what}: an old pod is still there"
                print(f"[rollout] {what}: rolled to {image} in {time.monotonic() - started:.1f}s")
            report = await load.finish()
        verified = await durable.verify()
    print(f"[rollout] three rolls: {report}")
    assert verified.ok, verified
    gaps = report.probe.gaps_by_slots
    assert len(gaps) == 3 and all(gap < SHARD_GAP_LIMIT for gap in gaps.values()), report


@pytest.mark.timeout(600)
async def test_an_unsatisfiable_new_placement_holds_the_roll_with_the_schedulers_reason(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await catalog.config("cfg", await catalog.image("img", OLD))
    await create_cluster(kube, namespace, "place", config, shards=1, replicas=0)
    status = await settled(kube, namespace, "place", 300)
    before = await pod_uids(kube, namespace, "place")
    await kube.patch(VALKEY_CLUSTERS, "place", {"spec": {"placement": {"zones": ["nowhere"]}}}, namespace)

    async def held() -> Obj | NotYet:
        current = await status_of(kube, namespace, "place")
        degraded = find_condition(current.get("conditions"), "Degraded") or {}
        return current if degraded.get("reason") == "PodsUnschedulable" else NotYet(current.get("message"))

    status = await eventually(held, "the surge pod unschedulable, said in status", 120)
    message = find_condition(status["conditions"], "Degraded")["message"]
    assert "cannot be scheduled" in message and "node" in message, message
    assert before <= await pod_uids(kube, namespace, "place"), "the old pod was replaced"
    (node,) = [node for node in status["nodes"] if node.get("role") == "primary"]
    async with superuser_client().connect(node["ip"]) as connection:  # the old pod still serves
        assert await connection.text("SET", "k", "v") == "OK"
    await kube.patch(VALKEY_CLUSTERS, "place", {"spec": {"placement": None}}, namespace)
    await settled(kube, namespace, "place", 180)
    assert await pod_uids(kube, namespace, "place") == before  # the surge pod went, the old one stayed
