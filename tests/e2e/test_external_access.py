"""External access (issue 40) as clients outside Kubernetes meet it: they are given external addresses only.

With spec.externalAccess every pod gets a Service of its own and every node
announces that Service's address (docs/external-access.md). The valkey-py
cluster client, the data checker and valkey-cli are seeded with entries of
status.externalEndpoints and nothing else; every address a client is handed
(CLUSTER SLOTS) or dials (MOVED, ASK, any socket) is recorded
(external_support.py), and each must be a NodePort on a node's 127.0.100.N or
a load balancer's 127.0.200.0/21 address, never a pod IP. The chart's
operator runs the clusters.

Break-it: with the nodes left announcing their pod addresses (announce.wanted
returning POD_ADDRESSES while the Services and externalEndpoints stay), every
test here fails with "handed 127.1.x.y:6379 (a pod IP) first at ...".
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from chart_operator import ChartOperator
from cluster_support import Catalog, create_cluster, image_config, owned_pods
from external_support import (
    Dials,
    PodIPs,
    RecordingChecker,
    Traffic,
    cli,
    cli_session,
    delete_pod,
    endpoint_of,
    external_client,
    external_settled,
    pods_by_address,
    primaries,
    read_back,
    seeds,
)
from test_cluster_endpoint import OLD, rolled

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SERVICES
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.datachecker import key_slot
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

KEYS = 300
MAX_DURABLE_KEYS = 30_000
DURABLE_INTERVAL = 0.03
"""The data checker's pause between keys: ~25 keys/s (WAIT 1 each) leaves the 2 cores to the cluster."""


@pytest.mark.parametrize("kind", ["NodePort", "LoadBalancer"])
@pytest.mark.timeout(600)
async def test_a_client_given_one_external_address_is_handed_and_redirected_to_external_addresses_only(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, kind: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    started = time.monotonic()
    await create_cluster(kube, namespace, "ext", config, shards=3, replicas=1, externalAccess={"type": kind})
    status = await external_settled(kube, namespace, "ext", kind, 360)
    formed = time.monotonic() - started
    pods = {pod["metadata"]["name"]: pod for pod in await owned_pods(kube, namespace, "ext")}
    assert len(status["externalEndpoints"]) == len(pods) == 6, status["externalEndpoints"]
    pod_ips = {pod["status"]["podIP"] for pod in pods.values()}

    # valkey-py, seeded with one external address: it loads the slot map, writes and reads every shard.
    dials = Dials()
    client = external_client(status["externalEndpoints"][0], dials)
    try:
        keys = {f"ext:{i}".encode(): f"value-{i}".encode() for i in range(KEYS)}
        for key, value in keys.items():
            assert await client.set(key, value)
        assert await read_back(client, keys) == []
    finally:
        await client.aclose()
    # The client loaded the slot map at its external addresses, and dialled the three primaries there.
    everyone = set(pods_by_address(status))
    assert dials.outside(kind, pod_ips) == [], dials.outside(kind, pod_ips)
    assert set(dials.handed) <= everyone, (sorted(dials.handed), status["externalEndpoints"])
    assert {endpoint_of(status, node["pod"]) for node in primaries(status)} <= set(dials.dialled), dials

    # Replicas too, once the seed has seen them replicate (Valkey leaves a replica out of CLUSTER SLOTS
    # until it has a replication offset).
    async def every_node_in_the_map() -> set[tuple[str, int]] | NotYet:
        fresh = Dials()
        mapped = external_client(status["externalEndpoints"][0], fresh)
        try:
            await mapped.initialize()
        finally:
            await mapped.aclose()
        dials.handed.update(fresh.handed)
        return set(fresh.handed) if set(fresh.handed) == everyone else NotYet(sorted(fresh.handed))

    await eventually(every_node_in_the_map, "a slot map naming every node at its external address", 30)
    assert dials.outside(kind, pod_ips) == [], dials.outside(kind, pod_ips)

    # valkey-cli -c at shard 0's primary: a key of shard 1 is MOVED to shard 1's external address,
    # written there, and read back through shard 2's primary (MOVED again).
    first, second, third = (endpoint_of(status, node["pod"]) for node in primaries(status))
    key = next(f"cli:{i}" for i in range(10_000) if _owned(primaries(status)[1], f"cli:{i}"))
    slot = key_slot(key.encode())
    moved = await cli(*first, "GET", key)
    written = await asyncio.to_thread(cli_session, *first, [f"SET {key} through-moved"])
    read = await asyncio.to_thread(cli_session, *third, [f"GET {key}"])
    print(
        f"[external {kind}] 3x1 Active with {len(status['externalEndpoints'])} external endpoints in "
        f"{formed:.1f}s; valkey-cli: {moved.strip()!r}; SET: {written!r}; GET: {read!r}"
    )
    assert moved.strip() == f"MOVED {slot} {second[0]}:{second[1]}", moved
    redirected = f"-> Redirected to slot [{slot}] located at {second[0]}:{second[1]}\nOK\n"
    assert redirected in written, (written, redirected)
    redirected = f'-> Redirected to slot [{slot}] located at {second[0]}:{second[1]}\n"through-moved"\n'
    assert redirected in read, (read, redirected)
    assert not any(ip in moved + written + read for ip in pod_ips), (written, read, sorted(pod_ips))

    # Switched off: the per-pod Services go, the nodes announce their pod IPs again, no pod is replaced.
    await kube.patch(VALKEY_CLUSTERS, "ext", {"spec": {"externalAccess": None}}, namespace)

    owner = pods[next(node["pod"] for node in primaries(status) if _owned(node, key))]
    asker = pods[next(node["pod"] for node in primaries(status) if not _owned(node, key))]
    pod_moved = f"MOVED {slot} {owner['status']['podIP']}:6379"

    async def pod_addresses_again() -> str | NotYet:
        services = [
            service["metadata"]["name"]
            for service in await kube.list(SERVICES, namespace)
            if service["metadata"]["name"] in pods
        ]
        current = (await kube.get(VALKEY_CLUSTERS, "ext", namespace)).get("status") or {}
        answer = (await cli(*pod_address(asker), "GET", key)).strip()
        if services or current.get("externalEndpoints") or answer != pod_moved:
            return NotYet((services, current.get("externalEndpoints"), answer))
        return answer

    # The announced ports reach the other nodes by gossip: a MOVED may name the old client port
    # for a moment after the owner runs its real one again.
    await eventually(pod_addresses_again, "Services gone and pod addresses announced", 60, interval=0.5)
    assert {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, "ext")} == {
        pod["metadata"]["uid"] for pod in pods.values()
    }


def pod_address(pod: Obj) -> tuple[str, int]:
    return str(pod["status"]["podIP"]), 6379


def _owned(node: Obj, key: str) -> bool:
    """Whether key's slot is one of node's status slots ("0-5460" or "0-100,200-300")."""
    slot = key_slot(key.encode())
    for part in node["slots"].split(","):
        start, _, end = part.partition("-")
        if int(start) <= slot <= int(end or start):
            return True
    return False


@pytest.mark.parametrize("kind", ["NodePort", "LoadBalancer"])
@pytest.mark.timeout(1500)
async def test_an_outside_client_sees_external_addresses_only_and_keeps_its_writes_through_day_2_changes(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, kind: str
) -> None:
    """Through an image roll (every pod replaced: new Services, and for LoadBalancer new load
    balancers), a scale-out to 4 shards and a deleted primary pod."""
    newest = images.valkey_version(images.newest_image())
    config = await catalog.config("cfg", await catalog.image("old", OLD))
    new_image = await catalog.image("new", newest)
    await create_cluster(kube, namespace, "out", config, shards=3, replicas=1, externalAccess={"type": kind})
    status = await external_settled(kube, namespace, "out", kind, 360)
    first_pods = {pod["metadata"]["name"] for pod in await owned_pods(kube, namespace, "out")}

    dials = Dials()
    pod_ips = PodIPs(kube, namespace, "out")
    watching = asyncio.create_task(pod_ips.run())
    client = external_client(status["externalEndpoints"][0], dials)
    traffic = Traffic(client, "app")
    running = asyncio.create_task(traffic.run())
    durable = RecordingChecker(seeds(status), dials, replicas=1, prefix="durable")
    stop = asyncio.Event()
    writing = asyncio.create_task(
        durable.run_writer(max_keys=MAX_DURABLE_KEYS, duration=1200, interval=DURABLE_INTERVAL, stop=stop)
    )
    steps: dict[str, float] = {}
    acknowledged: dict[str, tuple[int, int]] = {}
    """Per step: keys the valkey-py client and the data checker had acknowledged when it ended."""
    try:

        async def baseline() -> bool | NotYet:
            assert not writing.done(), writing.result()
            counts = (len(traffic.acknowledged), len(durable.acknowledged))
            return min(counts) >= 50 or NotYet(f"acknowledged (valkey-py, data checker): {counts}")

        await eventually(baseline, "acknowledged writes of both clients before the disruptions", 60)
        acknowledged["start"] = (len(traffic.acknowledged), len(durable.acknowledged))
        started = time.monotonic()
        await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": new_image}})
        await rolled(kube, namespace, "out", f"valkey/valkey:{newest}", 600)
        status = await external_settled(kube, namespace, "out", kind, 120)
        steps["roll"] = time.monotonic() - started
        acknowledged["roll"] = (len(traffic.acknowledged), len(durable.acknowledged))

        started = time.monotonic()
        await kube.patch(VALKEY_CLUSTERS, "out", {"spec": {"shards": 4}}, namespace)
        status = await external_settled(kube, namespace, "out", kind, 600)
        steps["scale-out"] = time.monotonic() - started
        acknowledged["scale-out"] = (len(traffic.acknowledged), len(durable.acknowledged))

        started = time.monotonic()
        lost = primaries(status)[0]["pod"]
        await delete_pod(kube, namespace, lost)

        async def replaced() -> bool | NotYet:
            names = {pod["metadata"]["name"] for pod in await owned_pods(kube, namespace, "out")}
            return (lost not in names and len(names) == 8) or NotYet(sorted(names))

        await eventually(replaced, f"{lost} replaced", 300, interval=0.5)
        status = await external_settled(kube, namespace, "out", kind, 300)
        steps["lost primary"] = time.monotonic() - started
        acknowledged["lost primary"] = (len(traffic.acknowledged), len(durable.acknowledged))
        await asyncio.sleep(3)  # traffic over the final members
        stop.set()
        traffic.stop.set()
        report = await asyncio.wait_for(writing, 60)
        await asyncio.wait_for(running, 60)
        verified = await durable.verify()
    finally:
        stop.set()
        traffic.stop.set()
        pod_ips.stop.set()
        await asyncio.gather(running, watching, writing, return_exceptions=True)
        await durable.close()
        await client.aclose()
    # Every acknowledged key of the application read back, with its value, by a new client seeded
    # with an external address of the final members.
    reader = external_client(status["externalEndpoints"][-1], dials)
    try:
        unread = await read_back(reader, traffic.acknowledged)
    finally:
        await reader.aclose()

    pods = {pod["metadata"]["name"]: pod for pod in await owned_pods(kube, namespace, "out")}
    print(
        f"[external {kind}] "
        + ", ".join(f"{step} {seconds:.1f}s" for step, seconds in steps.items())
        + f"; valkey-py: {len(traffic.acknowledged)} acknowledged, {traffic.reads} reads, errors "
        f"{dict(traffic.errors)}, longest without an acknowledged write {traffic.longest_gap:.1f}s; "
        f"data checker: {report.acknowledged}/{report.attempted} acknowledged, longest gap "
        f"{report.longest_gap:.1f}s, errors "
        f"{dict(report.errors)}; "
        f"{len(dials.dialled)} addresses dialled, {len(pod_ips.seen)} pod IPs seen; acknowledged by step "
        f"{acknowledged}"
    )
    assert not first_pods & set(pods) and len(pods) == 8, sorted(pods)
    assert len(primaries(status)) == 4 and all(node["slots"] for node in primaries(status)), status["nodes"]
    roles = dict(sorted((node["pod"], node.get("role")) for node in status["nodes"]))
    assert set(roles) == set(pods) and list(roles.values()).count("replica") == 4, roles
    assert {e["pod"] for e in status["externalEndpoints"]} == set(pods), status["externalEndpoints"]
    assert dials.outside(kind, pod_ips.seen) == [], dials.outside(kind, pod_ips.seen)
    assert traffic.wrong_reads == [], traffic.wrong_reads[:20]
    assert unread == [], (len(unread), unread[:20])
    assert verified.ok, verified
    assert verified.checked == report.acknowledged, (verified, report)
    # Both clients wrote on through each step (not only before and after it).
    for (_, before), (step, after) in itertools.pairwise(acknowledged.items()):
        assert after[0] > before[0] and after[1] > before[1], (step, acknowledged)
    # The client followed the cluster to the new members: it dialled every final primary's address.
    final = {endpoint_of(status, node["pod"]) for node in primaries(status)}
    assert final <= set(dials.dialled), (sorted(final), sorted(dials.dialled))
