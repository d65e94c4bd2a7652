"""In-place resize end to end: a memory change under write load replaces no pod and restarts nothing.

The chart's operator and a 2x1 cluster whose ValkeyConfig sets the memory (maxmemory follows the
limit: the chain does not set it). Memory goes 256Mi -> 512Mi -> 384Mi while two writers run
(load_support.py) and an application on the valkey-py cluster client sets and gets keys, which
must see no error at all (nothing restarts). Each step ends with every pod's container running
the new limit (the test bed's kubelet reports it, as the real one does), every node's maxmemory
75% of it (read with valkey-cli), the same pod uids and restart counts, no roll and no failover.
Throughout, a sampler checks the order the operator promises: no node ever runs a maxmemory above
75% of the limit its container runs with (grow: the limit first; shrink: maxmemory first).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    SUPERUSER,
    SUPERUSER_PASSWORD,
    Catalog,
    admin_client,
    cli,
    coordinated_failovers,
    create_cluster,
    lives_of,
    owned_pods,
    settled,
)
from external_support import Traffic, read_back
from keys_support import cluster_client
from load_support import SHARD_GAP_LIMIT, Load, checker_for
from test_cluster_rollout import events

from controllers.shared.names import TEMPLATE_HASH_LABEL
from valkey_operator.api.quantity import quantity_bytes
from valkey_operator.api.resources import VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, ValkeyAdminError
from valkey_testbed import images
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

NAME = "resize"
MI = 2**20
START = 256
STEPS = (512, 384)
"""The memory (MiB) the config is changed to, one after another, from START."""


def running_limit(pod: Obj) -> int | None:
    """The memory limit (bytes) the kubelet reports the Valkey container running with."""
    for status in pod["status"].get("containerStatuses") or []:
        if status["name"] == "valkey":
            memory = ((status.get("resources") or {}).get("limits") or {}).get("memory")
            return quantity_bytes(memory) if memory else None
    return None  # a pod the kubelet has not started yet


class OrderSampler:
    """Samples every node's maxmemory and its container's running limit until stopped, and records
    each sample where the node ran more than 75% of its limit. maxmemory is read before the pods when
    memory grows, after them when it shrinks: a value read first is then never newer than the one read
    after it, so a sample taken mid-change cannot show a violation that never happened."""

    def __init__(self, kube: Client, namespace: str, admin: AdminClient, ips: dict[str, str]) -> None:
        self.kube, self.namespace, self.admin, self.ips = kube, namespace, admin, ips
        self.growing = True
        self.samples = 0
        self.violations: list[str] = []
        self.stop = asyncio.Event()

    async def maxmemory(self) -> dict[str, int]:
        found = {}
        for pod, ip in self.ips.items():
            try:
                async with self.admin.connect(ip) as node:
                    found[pod] = int((await node.config_get("maxmemory"))["maxmemory"])
            except ValkeyAdminError as error:  # a resize restarts nothing: never expected
                self.violations.append(f"{pod} did not answer: {error}")
        return found

    async def limits(self) -> dict[str, int | None]:
        return {
            pod["metadata"]["name"]: running_limit(pod)
            for pod in await owned_pods(self.kube, self.namespace, NAME)
        }

    async def run(self) -> None:
        """Samples until stop is set (not cancelled: a client may turn a cancellation into an error)."""
        while not self.stop.is_set():
            if self.growing:
                maxmemory = await self.maxmemory()
                limits = await self.limits()
            else:
                limits = await self.limits()
                maxmemory = await self.maxmemory()
            self.samples += 1
            for pod, value in maxmemory.items():
                limit = limits.get(pod)
                if limit is not None and value > limit * 3 // 4:
                    self.violations.append(f"{pod}: maxmemory {value} over 75% of its limit {limit}")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def sampling(sampler: OrderSampler) -> AsyncIterator[OrderSampler]:
    task = asyncio.create_task(sampler.run())
    try:
        yield sampler
    finally:
        sampler.stop.set()
        await asyncio.wait_for(task, 30)


async def resized(kube: Client, namespace: str, mib: int, ips: dict[str, str], timeout: float) -> float:
    """Waits until every pod runs mib and is labelled current, every node runs maxmemory 75% of it
    (valkey-cli, as a user of the cluster), and the cluster is Active; returns the seconds it took."""
    started = time.monotonic()
    want = str(mib * MI * 3 // 4)

    async def done() -> bool | NotYet:
        pods = await owned_pods(kube, namespace, NAME)
        limits = {pod["metadata"]["name"]: running_limit(pod) for pod in pods}
        assert set(limits) == set(ips), f"pods replaced: {sorted(ips)} -> {sorted(limits)}"
        if set(limits.values()) != {mib * MI}:
            return NotYet(f"running limits {limits}")
        if len({pod["metadata"]["labels"].get(TEMPLATE_HASH_LABEL) for pod in pods}) != 1:
            return NotYet("pods of more than one template hash")
        found = {
            pod: (await cli(ip, SUPERUSER, SUPERUSER_PASSWORD, "CONFIG", "GET", "maxmemory")).split()[-1:]
            for pod, ip in ips.items()
        }
        wrong = {pod: value for pod, value in found.items() if value != [want]}
        return not wrong or NotYet(f"maxmemory {wrong}, want {want}")

    await eventually(done, f"every pod resized to {mib}Mi", timeout, interval=0.5)
    took = time.monotonic() - started
    await settled(kube, namespace, NAME, 60)
    return took


@pytest.mark.timeout(600)
async def test_memory_is_resized_in_place_under_writes_with_maxmemory_in_the_safe_order(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    image = await catalog.image("img", images.valkey_version(images.newest_image()))
    config = catalog("cfg")
    spec = {
        "imageRef": image,
        "resources": {"cpu": "100m", "memory": f"{START}Mi"},
        "valkey": {"cluster-node-timeout": "5000"},
    }
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": config}, "spec": spec})
    await create_cluster(kube, namespace, NAME, config, shards=2, replicas=1)
    status = await settled(kube, namespace, NAME, 300)
    ips = {node["pod"]: node["ip"] for node in status["nodes"]}
    before = await lives_of(kube, namespace, NAME)
    assert len(before) == 4
    admin = await admin_client(kube, namespace, NAME)
    failovers = await coordinated_failovers(operator, namespace, NAME)
    sampler = OrderSampler(kube, namespace, admin, ips)
    app = Traffic(cluster_client(status), "app")
    took: dict[int, float] = {}
    async with (
        checker_for(status, admin, replicas=1) as durable,
        checker_for(status, admin, replicas=0, prefix="probe") as probe,
    ):
        async with Load(durable, probe, duration=300.0) as load, sampling(sampler):
            application = asyncio.create_task(app.run())
            previous = START
            for mib in STEPS:
                sampler.growing = mib > previous
                await kube.patch(VALKEY_CONFIGS, config, {"spec": {"resources": {"memory": f"{mib}Mi"}}})
                took[mib] = await resized(kube, namespace, mib, ips, 180)
                previous = mib
            report = await load.finish()
            app.stop.set()
            await asyncio.wait_for(application, 30)
        verified = await durable.verify()
    try:
        unread = await read_back(app.client, app.acknowledged)
    finally:
        await app.client.aclose()
    print(
        f"[resize] {START}Mi -> " + ", -> ".join(f"{mib}Mi in {took[mib]:.1f}s" for mib in STEPS),
        f"; {sampler.samples} samples",
    )
    print(f"[resize] {report}")
    print(f"[resize] valkey-py: {len(app.acknowledged)} SETs, {app.reads} GETs, errors {dict(app.errors)}")
    assert verified.ok, verified
    assert not app.errors and not app.wrong_reads and not unread, (app.errors, app.wrong_reads, unread[:5])
    assert len(app.acknowledged) > 20
    assert report.durable.acknowledged > 0
    gaps = report.probe.gaps_by_slots
    assert len(gaps) == 2 and all(gap < SHARD_GAP_LIMIT for gap in gaps.values()), gaps
    assert not sampler.violations, sampler.violations[:5]
    assert sampler.samples > 10
    assert await lives_of(kube, namespace, NAME) == before, "a pod was replaced or restarted"
    assert await coordinated_failovers(operator, namespace, NAME) == failovers
    assert await events(kube, namespace, "RolloutStarted") == 0
    assert await events(kube, namespace, "PodResizing") == 4 * len(STEPS)
