"""Day-2 requests end to end: the switchover and restartedAt annotations, under write load.

Real pods and valkey-server binaries, the operator's reconcilers in this
process. A request is what a user (or `kubectl valkey`) writes by hand: one
annotation on the ValkeyCluster. The durable writer (load_support.py) checks
every WAIT-acknowledged key afterwards; the probe writer shows each shard's
longest time without writes.
"""

from __future__ import annotations

import time

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    Catalog,
    coordinated_failovers,
    formed_cluster,
    owned_pods,
    primaries_by_pod,
    settled,
    status_of,
    whole_passes,
)
from handover_support import primary_logs
from load_support import SHARD_GAP_LIMIT, Load, checker_for
from test_cluster_rollout import assert_handed_over_first

from valkey_operator.api.resources import (
    RESTARTED_AT_ANNOTATION,
    SWITCHOVER_ANNOTATION,
    VALKEY_CLUSTERS,
)
from valkey_operator.core.client import Client
from valkey_operator.core.resource import EVENTS
from valkey_operator.core.rest import Obj
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

PREFILL = 1000


async def annotate(kube: Client, namespace: str, name: str, key: str, value: str) -> None:
    await kube.patch(VALKEY_CLUSTERS, name, {"metadata": {"annotations": {key: value}}}, namespace)


async def switchover_ended(kube: Client, namespace: str, name: str, value: str, timeout: float) -> Obj:
    """status.switchover once it records `value` in a final phase."""

    async def done() -> Obj | NotYet:
        found = (await status_of(kube, namespace, name)).get("switchover") or {}
        if found.get("request") == value and found.get("phase") not in {None, "Running"}:
            return dict(found)
        return NotYet(found)

    return await eventually(done, f"switchover {value} handled", timeout, interval=0.5)


async def events_of(kube: Client, namespace: str, reason: str) -> list[Obj]:
    return [event for event in await kube.list(EVENTS, namespace) if event.get("reason") == reason]


def pods_of(status: Obj, shard: int, role: str) -> list[str]:
    return sorted(n["pod"] for n in status["nodes"] if n["shard"] == shard and n.get("role") == role)


@pytest.mark.timeout(900)
async def test_a_switchover_keeps_every_acknowledged_write_and_a_refused_one_changes_nothing(
    operator: ChartOperator, kube: Client, kubelet: KubeletControl, catalog: Catalog, namespace: str
) -> None:
    status, admin = await formed_cluster(kube, catalog, namespace, "sw", shards=2, replicas=1)
    (old,), (replica,) = pods_of(status, 1, "primary"), pods_of(status, 1, "replica")
    (other,) = pods_of(status, 0, "replica")
    assert all(n.get("inSync") is True for n in status["nodes"] if n.get("role") == "replica"), status
    assert all("inSync" not in n for n in status["nodes"] if n.get("role") == "primary"), status

    # Refused: a pod of another shard. Nothing moves, the message says why, a Warning Event says it.
    primaries = await primaries_by_pod(admin, status)
    failovers = await coordinated_failovers(operator, namespace, "sw")
    refused = f"1/{other}@{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    await annotate(kube, namespace, "sw", SWITCHOVER_ANNOTATION, refused)
    found = await switchover_ended(kube, namespace, "sw", refused, 60)
    assert found["phase"] == "Refused", found
    assert f"pod {other} is not a replica of shard 1" in found["message"], found
    await whole_passes(operator, kube, namespace, "sw", 3)
    assert (await status_of(kube, namespace, "sw"))["switchover"] == found, "handled once"
    assert await primaries_by_pod(admin, status) == primaries
    assert await coordinated_failovers(operator, namespace, "sw") == failovers
    (event,) = await events_of(kube, namespace, "SwitchoverRefused")
    assert event["type"] == "Warning" and other in event["note"], event

    # Carried out under write load: the named replica serves shard 1, every acknowledged write stays.
    value = f"1/{replica}@20261203T132000Z"
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
        primary_logs(kubelet, namespace, status) as logs,
    ):
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        async with Load(durable, probe, duration=300.0) as load:
            started = time.monotonic()
            await annotate(kube, namespace, "sw", SWITCHOVER_ANNOTATION, value)
            found = await switchover_ended(kube, namespace, "sw", value, 120)
            took = time.monotonic() - started
            report = await load.finish()
        verified = await durable.verify()
        handed = {handover.pod: handover for handover in logs.handovers()}
    print(f"[switchover] {value} {found['phase']} in {took:.1f}s; {report}")
    assert found["phase"] == "Succeeded", found
    assert (found["from"], found["to"]) == (old, replica), found
    # The old primary's own log: it became its replica's replica, and was never stopped.
    assert handed[old].became_replica_line is not None and handed[old].sigterm_line is None, handed
    assert verified.ok, verified
    assert verified.checked == PREFILL + report.durable.acknowledged, verified
    assert report.durable.acknowledged > 0
    gaps = report.probe.gaps_by_slots
    assert all(gap < SHARD_GAP_LIMIT for gap in gaps.values()), gaps
    status = await settled(kube, namespace, "sw", 120)
    assert replica in await primaries_by_pod(admin, status)
    assert old not in await primaries_by_pod(admin, status)
    assert await coordinated_failovers(operator, namespace, "sw", mode="takeover") == 0
    (event,) = await events_of(kube, namespace, "SwitchoverSucceeded")
    assert event["type"] == "Normal" and old in event["note"] and replica in event["note"], event
    # The same value again is never acted on: the status is unchanged after more passes.
    await whole_passes(operator, kube, namespace, "sw", 3)
    assert (await status_of(kube, namespace, "sw"))["switchover"] == found
    assert replica in await primaries_by_pod(admin, await status_of(kube, namespace, "sw"))


async def pod_uids(kube: Client, namespace: str, name: str) -> set[str]:
    return {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, name)}


@pytest.mark.timeout(900)
async def test_a_restart_rolls_every_pod_and_loses_no_acknowledged_write(
    operator: ChartOperator, kube: Client, kubelet: KubeletControl, catalog: Catalog, namespace: str
) -> None:
    status, admin = await formed_cluster(kube, catalog, namespace, "rs", shards=2, replicas=1)
    before = await pod_uids(kube, namespace, "rs")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
        primary_logs(kubelet, namespace, status) as logs,
    ):
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        async with Load(durable, probe, duration=600.0) as load:
            started = time.monotonic()
            await annotate(kube, namespace, "rs", RESTARTED_AT_ANNOTATION, stamp)

            async def rolled() -> Obj | NotYet:
                cluster = await kube.get(VALKEY_CLUSTERS, "rs", namespace)
                found: Obj = cluster.get("status") or {}
                uids = await pod_uids(kube, namespace, "rs")
                fresh = not before & uids and len(uids) == 4
                return (
                    found
                    if fresh and found.get("state") == "Active" and "rollout" not in found
                    else NotYet(found)
                )

            status = await eventually(rolled, "every pod replaced", 600, interval=0.5)
            took = time.monotonic() - started
            report = await load.finish()
        verified = await durable.verify()
        assert_handed_over_first(logs)
    print(f"[restart] 2x1 in {took:.1f}s; {report}")
    gaps = report.probe.gaps_by_slots
    assert all(gap < SHARD_GAP_LIMIT for gap in gaps.values()), gaps
    assert verified.ok, verified
    assert verified.checked == PREFILL + report.durable.acknowledged, verified
    assert report.durable.acknowledged > 0
    pods = await owned_pods(kube, namespace, "rs")
    assert {pod["metadata"]["annotations"].get(RESTARTED_AT_ANNOTATION) for pod in pods} == {stamp}
    assert len(await events_of(kube, namespace, "RolloutStarted")) == 1
    # Nothing else rolls afterwards: the same value is the current template.
    await whole_passes(operator, kube, namespace, "rs", 3)
    assert await pod_uids(kube, namespace, "rs") == {pod["metadata"]["uid"] for pod in pods}
