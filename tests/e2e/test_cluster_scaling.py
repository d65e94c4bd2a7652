"""Scaling a ValkeyCluster end to end (SPEC 1.4): real pods, real Valkey, atomic slot migration.

The data checker writes numbered keys (acknowledged only after WAIT reached the
replicas) before and during each step and reads every acknowledged key back
after it; keys of every data type (with TTLs) ride along through the slot
migrations, so the replication user's permissions are proven on live data.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    SUPERUSER,
    SUPERUSER_PASSWORD,
    Catalog,
    formed_cluster,
    node_reports,
    owned_pods,
    settled,
    status_of,
)
from valkey.asyncio.cluster import ClusterNode, ValkeyCluster

from controllers.cluster.decision.rebalance import quotas
from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_operator.valkey.slots import parse_slot_ranges, slot_count
from valkey_testbed.datachecker import DataChecker, WriterReport
from valkey_testbed.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

TYPED_KEYS = 40
"""Keys of each data type, spread over every shard by their hash tags."""


async def scale(kube: Client, namespace: str, name: str, **spec: int) -> None:
    await kube.patch(VALKEY_CLUSTERS, name, {"spec": spec}, namespace)


async def check_slots(admin: AdminClient, status: Obj, shards: int) -> None:
    """Every node sees all 16384 slots assigned and ok; each shard's primary holds its quota."""
    primaries = [node for node in status["nodes"] if node.get("role") == "primary"]
    assert sorted(node["shard"] for node in primaries) == list(range(shards)), status["nodes"]
    for node in primaries:
        assert slot_count(parse_slot_ranges(node["slots"])) == quotas(shards)[node["shard"]], node
    for node in status["nodes"]:
        report = await node_reports(admin, node["ip"])
        assert report["cluster"]["cluster_state"] == "ok", node
        assert report["cluster"]["cluster_slots_assigned"] == "16384", node


@pytest.fixture
async def typed_client(kube: Client, namespace: str) -> AsyncIterator[list[ValkeyCluster]]:
    """Filled by the test once the cluster is up; closed afterwards."""
    clients: list[ValkeyCluster] = []
    yield clients
    for client in clients:
        await client.aclose()


async def cluster_client(admin: AdminClient, status: Obj) -> ValkeyCluster:
    seeds = [ClusterNode(node["ip"], 6379) for node in status["nodes"] if node.get("role") == "primary"]
    client = ValkeyCluster(
        startup_nodes=seeds,
        username=SUPERUSER,
        password=SUPERUSER_PASSWORD,
        decode_responses=True,
        socket_timeout=5,
    )
    await client.initialize()
    return client


async def write_every_type(client: ValkeyCluster) -> None:
    for index in range(TYPED_KEYS):
        tag = f"{{t{index}}}"
        await client.set(f"{tag}:string", f"s{index}")
        await client.set(f"{tag}:ttl", f"t{index}", ex=3600)
        await client.hset(f"{tag}:hash", mapping={"a": index, "b": "x"})
        await client.rpush(f"{tag}:list", "a", "b", str(index))
        await client.sadd(f"{tag}:set", "a", "b", str(index))
        await client.zadd(f"{tag}:zset", {"a": 1.0, "b": float(index)})
        await client.xadd(f"{tag}:stream", {"n": str(index)}, id=f"{index + 1}-1")


async def check_every_type(client: ValkeyCluster) -> None:
    for index in range(TYPED_KEYS):
        tag = f"{{t{index}}}"
        assert await client.get(f"{tag}:string") == f"s{index}"
        assert await client.get(f"{tag}:ttl") == f"t{index}"
        assert 0 < await client.ttl(f"{tag}:ttl") <= 3600, "the TTL travelled with the key"
        assert await client.hgetall(f"{tag}:hash") == {"a": str(index), "b": "x"}
        assert await client.lrange(f"{tag}:list", 0, -1) == ["a", "b", str(index)]
        assert set(await client.smembers(f"{tag}:set")) == {"a", "b", str(index)}
        scores = sorted([("a", 1.0), ("b", float(index))], key=lambda pair: (pair[1], pair[0]))
        assert [tuple(pair) for pair in await client.zrange(f"{tag}:zset", 0, -1, withscores=True)] == scores
        entries = await client.xrange(f"{tag}:stream")
        assert [entry[1] for entry in entries] == [{"n": str(index)}]


async def write_during(checker: DataChecker, step: asyncio.Future[None], max_keys: int) -> WriterReport:
    """Write one key at a time while a step runs (bounded), so writes race the migrations."""
    stop = asyncio.Event()
    step.add_done_callback(lambda _: stop.set())
    return await checker.run_writer(max_keys=max_keys, duration=600, interval=0.01, stop=stop)


@pytest.mark.timeout(900)
async def test_three_to_five_to_two_shards_loses_no_acknowledged_key(
    operator: ChartOperator,
    kube: Client,
    catalog: Catalog,
    namespace: str,
    typed_client: list[ValkeyCluster],
) -> None:
    status, admin = await formed_cluster(kube, catalog, namespace, "grow", shards=3, replicas=1, timeout=360)
    client = await cluster_client(admin, status)
    typed_client.append(client)
    await write_every_type(client)
    seeds = [(node["ip"], 6379) for node in status["nodes"] if node["role"] == "primary"]
    async with DataChecker(seeds, replicas=1, username=SUPERUSER, password=SUPERUSER_PASSWORD) as checker:
        written = await checker.write(3000)
        assert written.acknowledged == 3000, written
        for shards in (5, 2):
            started = time.monotonic()
            await scale(kube, namespace, "grow", shards=shards)
            step = asyncio.ensure_future(settled(kube, namespace, "grow", 600))
            during = await write_during(checker, step, max_keys=20000)
            status = await step
            print(f"-> {shards} shards Active after {time.monotonic() - started:.1f}s; writes: {during}")
            assert during.acknowledged > 0, during
            await check_slots(admin, status, shards)
            verified = await checker.verify()
            assert verified.ok, verified
            await check_every_type(client)
    pods = await owned_pods(kube, namespace, "grow")
    assert sorted(int(pod["metadata"]["labels"]["valkey.gomomento.com/shard"]) for pod in pods) == [
        0,
        0,
        1,
        1,
    ]


@pytest.mark.timeout(900)
async def test_reverting_a_scale_midway_converges_without_slotless_shards(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    status, admin = await formed_cluster(kube, catalog, namespace, "turn", shards=3, replicas=0, timeout=300)
    seeds = [(node["ip"], 6379) for node in status["nodes"]]
    async with DataChecker(seeds, replicas=0, username=SUPERUSER, password=SUPERUSER_PASSWORD) as checker:
        written = await checker.write(5000)
        assert written.acknowledged == 5000, written
        await scale(kube, namespace, "turn", shards=5)

        async def some_slots_moved() -> bool:
            nodes = (await status_of(kube, namespace, "turn")).get("nodes") or []
            return any(node["shard"] >= 3 and node.get("slots") for node in nodes)

        await eventually(some_slots_moved, "the first batch on a new shard", 300)
        await scale(kube, namespace, "turn", shards=3)
        status = await settled(kube, namespace, "turn", 600)
        await check_slots(admin, status, 3)
        verified = await checker.verify()
        assert verified.ok, verified
    assert len(await owned_pods(kube, namespace, "turn")) == 3


@pytest.mark.timeout(900)
async def test_replicas_one_two_zero_one(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    status, admin = await formed_cluster(
        kube, catalog, namespace, "copies", shards=2, replicas=1, timeout=300
    )
    seeds = [(node["ip"], 6379) for node in status["nodes"] if node["role"] == "primary"]
    async with DataChecker(seeds, replicas=1, username=SUPERUSER, password=SUPERUSER_PASSWORD) as checker:
        written = await checker.write(2000)
        assert written.acknowledged == 2000, written
        primaries = {node["pod"] for node in status["nodes"] if node["role"] == "primary"}
        for replicas in (2, 0, 1):
            await scale(kube, namespace, "copies", replicasPerShard=replicas)
            status = await settled(kube, namespace, "copies", 300)
            nodes = status["nodes"]
            assert len(nodes) == 2 * (1 + replicas), nodes
            assert sum(1 for node in nodes if node["role"] == "replica") == 2 * replicas, nodes
            # Removing replicas never took a primary: the same two pods serve the slots throughout.
            assert {node["pod"] for node in nodes if node["role"] == "primary"} == primaries
            await check_slots(admin, status, 2)
            verified = await checker.verify()
            assert verified.ok, verified
