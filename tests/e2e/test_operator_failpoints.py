"""Kill the operator at each step of a scale, restart it, and it finishes correctly (SPEC 5).

The operator runs as a real `python -m valkey_operator` process. One 3x1
cluster per test is scaled to four shards and back to three; on each way one
failpoint (valkey_operator.failpoints) is armed, so the process exits with 137
the first time it reaches that step, without cleanup or status writes. A fresh
process without failpoints must then finish the scale from what the cluster
really is: Active for the new generation, every slot served on every node, no
duplicate pod or node, no departed node left in anyone's CLUSTER NODES, and
every key the data checker had acknowledged (WAIT on the same connection)
still readable.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import attrs
import pytest
from cluster_support import (
    SUPERUSER,
    SUPERUSER_PASSWORD,
    Catalog,
    admin_client,
    create_cluster,
    image_config,
    owned_pods,
    settled,
)
from operator_process import OperatorProcess, OperatorProcesses

from controllers.cluster.decision.rebalance import quotas
from controllers.shared import names as render_names
from valkey_operator import failpoints
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, ValkeyAdminError
from valkey_operator.valkey.slots import parse_slot_ranges, slot_count
from valkey_testbed import images
from valkey_testbed.datachecker import DataChecker
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

NAME = "fp"
REPLICAS = 1
KEYS_BEFORE = 3000
KEYS_BETWEEN = 1000
FAILPOINT_TIMEOUT = 240.0
"""Seconds for an armed operator to reach its failpoint (a scale step is seconds to a minute)."""
SETTLE_TIMEOUT = 420.0

# (failpoint on the way up 3 -> 4, failpoint on the way down 4 -> 3): together every step a
# shard scale passes through. Up: Meet and Replicate join the new shard, MigrateSlots fills it.
# Down: MigrateSlots empties shard 3, DeletePod removes its pods, Forget drops their node ids.
# Slot migration, the step with the most state outside the operator, is cut on both sides both ways.
CASES = [
    pytest.param("after:Meet", "after:Forget", id="meet-forget"),
    pytest.param("after:Replicate", "after:DeletePod", id="replicate-deletepod"),
    pytest.param("before:MigrateSlots", "after:MigrateSlots", id="beforemigrate-aftermigrate"),
    pytest.param("after:MigrateSlots", "before:MigrateSlots", id="aftermigrate-beforemigrate"),
]


@attrs.frozen
class Resumed:
    process: OperatorProcess
    """The operator started without failpoints after the armed one died."""
    pods_at_kill: set[str]
    killed: float
    """Seconds from the spec change until the armed operator died at its failpoint."""
    finished: float
    """Seconds from the restart until the status said Active for the new generation."""


async def check_cluster(kube: Client, admin: AdminClient, namespace: str, status: Obj, shards: int) -> None:
    """The pods, the status and every node's own view agree on exactly `shards` x (1 + REPLICAS) nodes."""
    per_shard = 1 + REPLICAS
    pods = await owned_pods(kube, namespace, NAME)
    pod_names = sorted(pod["metadata"]["name"] for pod in pods)
    assert not [pod for pod in pods if pod["metadata"].get("deletionTimestamp")], pod_names
    labels = Counter(int(pod["metadata"]["labels"][render_names.SHARD_LABEL]) for pod in pods)
    assert labels == dict.fromkeys(range(shards), per_shard), f"duplicate or missing pods: {pod_names}"
    nodes = status["nodes"]
    assert sorted(node["pod"] for node in nodes) == pod_names, nodes
    node_ids = {node["nodeId"] for node in nodes}
    assert len(node_ids) == shards * per_shard, nodes
    primaries = [node for node in nodes if node.get("role") == "primary"]
    assert sorted(node["shard"] for node in primaries) == list(range(shards)), nodes
    for node in primaries:
        assert slot_count(parse_slot_ranges(node["slots"])) == quotas(shards)[node["shard"]], node
    for node in nodes:
        async with admin.connect(node["ip"]) as connection:
            info = await connection.cluster_info()
            table = await connection.cluster_nodes()
        where = f"{node['pod']} ({node['ip']})"
        assert info["cluster_state"] == "ok", (where, info)
        assert info["cluster_slots_assigned"] == "16384", (where, info)
        assert info["cluster_slots_ok"] == "16384", (where, info)
        known = {line.split()[0]: line for line in table.splitlines() if line.strip()}
        assert set(known) == node_ids, f"{where} knows other nodes than the pods run:\n{table}"
        flagged = [line for line in known.values() if "fail" in line.split()[2] or "noaddr" in line]
        assert not flagged, f"{where} flags nodes:\n{table}"


async def evidence(kube: Client, admin: AdminClient | None, namespace: str) -> str:
    """Status, pods, and every reachable node's CLUSTER NODES / INFO and slot migrations."""
    parts = []
    cluster = await kube.get_or_none(VALKEY_CLUSTERS, NAME, namespace)
    if cluster is not None:
        parts.append(f"generation {cluster['metadata'].get('generation')}, spec {cluster['spec']}")
        parts.append("status " + json.dumps(cluster.get("status"), indent=1))
    for pod in await owned_pods(kube, namespace, NAME):
        metadata = pod["metadata"]
        ip = (pod.get("status") or {}).get("podIP")
        parts.append(
            f"pod {metadata['name']} shard {metadata['labels'].get(render_names.SHARD_LABEL)} ip {ip} "
            f"phase {(pod.get('status') or {}).get('phase')} deleting {'deletionTimestamp' in metadata}"
        )
        if admin is None or not ip:
            continue
        try:
            async with admin.connect(ip) as connection:
                info = await connection.cluster_info()
                parts.append(
                    f"  cluster_state {info.get('cluster_state')} known {info.get('cluster_known_nodes')}"
                )
                parts.append("  " + (await connection.cluster_nodes()).strip().replace("\n", "\n  "))
                parts.append(f"  migrations {await connection.cluster_getslotmigrations()}")
        except (ValkeyAdminError, OSError) as exc:
            parts.append(f"  unreachable: {exc!r}")
    return "\n".join(parts)


async def scale_through_failpoint(
    kube: Client,
    operators: OperatorProcesses,
    namespace: str,
    shards: int,
    failpoint: str,
) -> Resumed:
    """Scale with `failpoint` armed until the operator dies there, then restart it until Active."""
    armed = operators.start(failpoint.replace(":", "-"), armed=[failpoint])
    started = time.monotonic()
    await kube.patch(VALKEY_CLUSTERS, NAME, {"spec": {"shards": shards}}, namespace)
    code = await armed.exit_code(FAILPOINT_TIMEOUT)
    if code is None:
        armed.kill()
    assert code == failpoints.EXIT_STATUS, (
        f"the operator armed with {failpoint} {'still ran' if code is None else f'exited {code}'} "
        f"after {FAILPOINT_TIMEOUT}s scaling to {shards} shards; log tail:\n{armed.tail()}\n"
        + await evidence(kube, None, namespace)
    )
    assert f"failpoint {failpoint}: exiting" in armed.log(), armed.tail()
    killed = time.monotonic() - started
    pods_at_kill = {pod["metadata"]["name"] for pod in await owned_pods(kube, namespace, NAME)}
    resumed = operators.start("resumed")
    started = time.monotonic()
    try:
        await settled(kube, namespace, NAME, SETTLE_TIMEOUT)
    except AssertionError as exc:
        admin = await admin_client(kube, namespace, NAME)
        raise AssertionError(
            f"{exc}\nafter {failpoint}; restarted operator's log tail:\n{resumed.tail(60)}\n"
            + await evidence(kube, admin, namespace)
        ) from None
    return Resumed(resumed, pods_at_kill, killed, time.monotonic() - started)


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("up", "down"), CASES)
async def test_killed_at_a_scale_step_the_restarted_operator_finishes_the_scale(
    up: str,
    down: str,
    kube: Client,
    catalog: Catalog,
    namespace: str,
    operators: OperatorProcesses,
) -> None:
    config = await image_config(catalog, images.newest_image())
    begun = time.monotonic()
    bootstrap = operators.start("bootstrap")
    await create_cluster(kube, namespace, NAME, config, shards=3, replicas=REPLICAS)
    status = await settled(kube, namespace, NAME, 360)
    await bootstrap.stop()
    timings = [f"3x{REPLICAS} Active {time.monotonic() - begun:.0f}s"]
    admin = await admin_client(kube, namespace, NAME)
    seeds = [(node["ip"], 6379) for node in status["nodes"] if node["role"] == "primary"]
    async with DataChecker(
        seeds, replicas=REPLICAS, username=SUPERUSER, password=SUPERUSER_PASSWORD
    ) as checker:
        written = await checker.write(KEYS_BEFORE)
        assert written.acknowledged == KEYS_BEFORE, written
        for shards, failpoint, keys_after in ((4, up, KEYS_BETWEEN), (3, down, 0)):
            resumed = await scale_through_failpoint(kube, operators, namespace, shards, failpoint)
            timings.append(
                f"->{shards}: {failpoint} hit {resumed.killed:.0f}s, Active {resumed.finished:.0f}s later"
            )
            try:
                # Every step the killed process could reach comes after the new pods exist: the
                # restarted one must finish with what it found, never create another pod.
                pods = {pod["metadata"]["name"] for pod in await owned_pods(kube, namespace, NAME)}
                assert pods <= resumed.pods_at_kill, (
                    f"after {failpoint} the restarted operator created {sorted(pods - resumed.pods_at_kill)}"
                )
                cluster = await kube.get(VALKEY_CLUSTERS, NAME, namespace)
                await check_cluster(kube, admin, namespace, cluster["status"], shards)
                verified = await checker.verify()
                assert verified.ok, f"after {failpoint}: {verified}"
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}\nrestarted operator's log tail:\n{resumed.process.tail(60)}\n"
                    + await evidence(kube, admin, namespace)
                ) from None
            await resumed.process.stop()
            if keys_after:
                written = await checker.write(keys_after)
                assert written.acknowledged == keys_after, written
    print(f"\n[{up} / {down}] " + "; ".join(timings) + f"; total {time.monotonic() - begun:.0f}s")


# A rolling update's steps, in the order a 1x1 shard meets them: the surge pod, the old replica
# deleted, the surge again, the failover request recorded and sent, the old primary deleted, its id
# forgotten. Each armed operator dies at its step and the next one starts armed for the next.
ROLL_STEPS = (
    "after:CreatePod",
    "after:DeletePod",
    "after:PatchPodMetadata",
    "after:Failover",
    "before:DeletePod",
    "after:Forget",
)


@pytest.mark.timeout(900)
async def test_killed_at_every_rollout_step_the_restarted_operators_finish_the_roll(
    kube: Client, catalog: Catalog, namespace: str, operators: OperatorProcesses
) -> None:
    old = await catalog.image("old", "9.1.0")
    new = await catalog.image("new", images.valkey_version(images.newest_image()))
    config = await catalog.config("cfg", old)
    bootstrap = operators.start("bootstrap")
    await create_cluster(kube, namespace, NAME, config, shards=1, replicas=REPLICAS)
    status = await settled(kube, namespace, NAME, 360)
    await bootstrap.stop()
    admin = await admin_client(kube, namespace, NAME)
    seeds = [(node["ip"], 6379) for node in status["nodes"]]
    timings = []
    async with DataChecker(
        seeds, replicas=REPLICAS, username=SUPERUSER, password=SUPERUSER_PASSWORD
    ) as checker:
        written = await checker.write(KEYS_BEFORE)
        assert written.acknowledged == KEYS_BEFORE, written
        await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": new}})
        started = time.monotonic()
        armed_ones = []
        for step in ROLL_STEPS:
            armed = operators.start(step.replace(":", "-"), armed=[step])
            armed_ones.append(armed)
            code = await armed.exit_code(FAILPOINT_TIMEOUT)
            if code is None:
                armed.kill()
            assert code == failpoints.EXIT_STATUS, (
                f"the operator armed with {step} {'still ran' if code is None else f'exited {code}'}; "
                f"log tail:\n{armed.tail()}\n" + await evidence(kube, None, namespace)
            )
            timings.append(f"{step} at {time.monotonic() - started:.0f}s")
        resumed = operators.start("resumed")
        status = await settled(kube, namespace, NAME, SETTLE_TIMEOUT)

        async def rolled() -> Obj | NotYet:
            current = (await kube.get(VALKEY_CLUSTERS, NAME, namespace)).get("status") or {}
            done = current.get("state") == "Active" and current.get("currentImage", "").endswith(
                images.valkey_version(images.newest_image())
            )
            return current if done else NotYet(current.get("message"))

        status = await eventually(rolled, "the roll finished by the restarted operator", SETTLE_TIMEOUT)
        try:
            await check_cluster(kube, admin, namespace, status, 1)
            # One handover: every process's log together shows exactly one CLUSTER FAILOVER sent
            # (a request recorded by a process killed before it sent it is asked again once its time
            # is up; that one never reached Valkey), and none after the shard was handed over.
            sent = sum(process.log().count('"action": "Failover(') for process in (*armed_ones, resumed))
            assert sent == 1, f"{sent} coordinated failovers sent"
            checker.seeds = [(node["ip"], 6379) for node in status["nodes"]]  # every old pod is gone
            verified = await checker.verify()
            assert verified.ok, verified
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\nrestarted operator's log tail:\n{resumed.tail(60)}\n"
                + await evidence(kube, admin, namespace)
            ) from None
    print("\n[rollout failpoints] " + "; ".join(timings) + f"; finished {time.monotonic() - started:.0f}s")
