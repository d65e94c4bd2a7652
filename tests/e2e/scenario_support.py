"""One scenario, two kinds of nodes: what users do with the operator, run on the real kubelet
(test_real_nodes.py) and on the test bed's process kubelet (test_process_nodes_scenario.py), so
that each step's outcome and timing stand side by side (docs/testing.md, "Real nodes").

The steps: helm install of the chart (the operator from its image); a TLS 3x1 cluster with aof
persistence Active; a CPU change resized in place; a roll under the data checker (WAIT 1) and the
valkey-py cluster client, with no acknowledged write lost; where the kubelet enforces memory limits,
a primary's container OOM-killed at its limit under the data checker; the node of a primary failed
whole and brought back; a backup to an object store and a restore into a new cluster; helm
uninstall.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import attrs
from backup_support import destination, finished, restore_cluster, start_backup, storage_secret
from chart_support import CHART, helm
from cluster_support import NODE_TIMEOUT_MS, create_cluster, owned_pods, status_of, wait_for_state
from keys_support import cluster_client, keys_of, read_back, write
from repair_support import primary_of
from valkey.exceptions import ValkeyError

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import EVENTS, PODS, SECRETS, Resource
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.slots import parse_slot_ranges
from valkey_testbed import certs, objectstore
from valkey_testbed.datachecker import DataChecker, key_slot
from valkey_testbed.resp import encode_command
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD
from valkey_testbed.wait import NotYet, eventually

OPERATOR_NAMESPACE = "valkey-system"
CLUSTER = "durable"
IMAGE = {"repository": "valkey/valkey", "tag": "9.1.2", "version": "9.1.2"}
HOG_ELEMENTS = 400_000
"""A list of 400,000 100-byte elements: about 45 MB stored, about 43 MB per LRANGE reply."""
HOG_REPLIES = 10
"""Ten replies held unread: far past the 64 MiB the 256Mi limit leaves above a 192 MiB maxmemory."""
CLIENT_KEYS = 20_000
"""The valkey-py client's writes during the roll stop after this many (every load loop is bounded)."""


@attrs.frozen(kw_only=True)
class Nodes:
    """What the scenario needs to know of a bed's nodes beyond its API server."""

    kind: str
    kubeconfig: Path
    networks: tuple[ipaddress.IPv4Network, ...]
    """Where pods get their addresses: what the data checker may dial."""
    chart_values: tuple[str, ...]
    """helm --set values the bed needs (none on real nodes: the chart's defaults)."""
    store_host: str
    """The address of ours the object store listens on, where the operator's pods reach it."""
    memory_limits: bool
    """Whether the kernel enforces the pods' memory limits (the OOM step runs only then)."""
    fail_node: Callable[[str], Awaitable[None]]
    recover_node: Callable[[str], Awaitable[None]]


@attrs.define
class Timings:
    """Each step's seconds and outcome, printed as one table at the end."""

    kind: str
    steps: list[tuple[str, float, list[str]]] = attrs.Factory(list)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Times the block; what is appended to the yielded list (then or later) is its outcome."""
        outcome: list[str] = []
        started = time.monotonic()
        yield outcome
        self.steps.append((name, time.monotonic() - started, outcome))
        print(f"[{self.kind}] {name}: {self.steps[-1][1]:.1f}s {'; '.join(outcome)}")

    def table(self) -> str:
        width = max(len(name) for name, _, _ in self.steps)
        rows = [
            f"  {name:<{width}}  {seconds:6.1f}s  {'; '.join(said)}" for name, seconds, said in self.steps
        ]
        return "\n".join([f"scenario on {self.kind}:", *rows])


@attrs.frozen
class Tls:
    """The cluster's certificate authority, as clients verify it."""

    ca_pem: str

    @property
    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_pem)
        context.check_hostname = False  # the leaf names the service, clients dial pod addresses
        return context


async def run(nodes: Nodes, kube: Client, namespace: str) -> Timings:
    timings = Timings(nodes.kind)
    flags = [flag for value in nodes.chart_values for flag in ("--set", value)]
    with timings.step("helm install (--wait)"):
        helm(nodes.kubeconfig, "install", "vo", str(CHART), "-n", OPERATOR_NAMESPACE, "--create-namespace",
             "--wait", "--timeout", "4m", *flags)  # fmt: skip
    tls = await _tls_secret(kube, namespace)
    await kube.create(VALKEY_IMAGES, _cluster_scoped(VALKEY_IMAGES, "scenario", IMAGE))
    config_spec = {
        "imageRef": "scenario",
        "resources": {"cpu": "100m", "memory": "256Mi"},
        "persistence": {"mode": "aof", "size": "1Gi"},
        # A store, not a cache: a full node refuses writes instead of evicting acknowledged keys.
        "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS, "maxmemory-policy": "noeviction"},
    }
    await kube.create(VALKEY_CONFIGS, _cluster_scoped(VALKEY_CONFIGS, "scenario", config_spec))
    with timings.step("TLS 3x1 with aof: create to Active"):
        await create_cluster(kube, namespace, CLUSTER, "scenario", 3, 1, tls={"secretRef": "tls"})
        status = await wait_for_state(kube, namespace, CLUSTER, "Active", 180)
    before = keys_of("before", 2000)
    await write(status, before, tls.ca_pem)
    await _resize_in_place(kube, namespace, timings)
    status = await _roll_under_load(nodes, kube, namespace, status, tls, timings)
    if nodes.memory_limits:
        status = await _oom_kill_a_primary(nodes, kube, namespace, status, tls, timings)
    await _fail_and_recover_a_primarys_node(nodes, kube, namespace, timings)
    await _back_up_and_restore(nodes, kube, namespace, before, tls, timings)
    await kube.delete(VALKEY_CLUSTERS, CLUSTER, namespace)
    with timings.step("helm uninstall (--wait)"):
        helm(nodes.kubeconfig, "uninstall", "vo", "-n", OPERATOR_NAMESPACE, "--wait")
    print(timings.table())
    return timings


async def _tls_secret(kube: Client, namespace: str) -> Tls:
    ca, ca_key = certs.issue_ca("scenario-ca")
    leaf, key = certs.issue_leaf(ca, ca_key, "valkey", dns_names=("valkey",), server=True, client=True)
    await kube.create(
        SECRETS, certs.tls_secret("tls", namespace, certs.pem(leaf), certs.key_pem(key), certs.pem(ca))
    )
    return Tls(certs.pem(ca).decode())


def _cluster_scoped(resource: Resource, name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


async def _resize_in_place(kube: Client, namespace: str, timings: Timings) -> None:
    """A CPU change the kubelet applies in place (pods/resize): no pod is replaced."""
    uids = await _pod_uids(kube, namespace)
    with timings.step("CPU change applied in place to 6 pods") as outcome:
        await kube.patch(VALKEY_CONFIGS, "scenario", {"spec": {"resources": {"cpu": "150m"}}})

        async def resized() -> bool | NotYet:
            pods = await owned_pods(kube, namespace, CLUSTER)
            applied = [pod for pod in pods if _cpu_request_applied(pod) == "150m"]
            return True if len(applied) == 6 else NotYet(len(applied))

        await eventually(resized, "every Valkey container running with 150m", 120)
        assert await _pod_uids(kube, namespace) == uids
        outcome.append("no pod replaced")


def _cpu_request_applied(pod: Obj) -> str | None:
    """The CPU request the kubelet reports its container runs with (status, not spec)."""
    cpu: str | None = _container_status(pod, "valkey").get("resources", {}).get("requests", {}).get("cpu")
    return cpu


def _container_status(pod: Obj, name: str) -> Obj:
    statuses: list[Obj] = pod.get("status", {}).get("containerStatuses") or []
    return next((status for status in statuses if status.get("name") == name), {})


async def _pod_uids(kube: Client, namespace: str) -> set[str]:
    return {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, CLUSTER)}


def _checker(nodes: Nodes, status: Obj, tls: Tls) -> DataChecker:
    seeds = [(node["ip"], 6379) for node in status["nodes"]]
    return DataChecker(seeds, replicas=1, username=SUPERUSER, password=SUPERUSER_PASSWORD, ssl=tls.context,
                       networks=nodes.networks)  # fmt: skip


async def _roll_under_load(
    nodes: Nodes, kube: Client, namespace: str, status: Obj, tls: Tls, timings: Timings
) -> Obj:
    """appendfsync is read at start: changing it rolls every pod, while the data checker writes with
    WAIT 1 and the valkey-py cluster client writes as an application does (no WAIT); every write
    either saw acknowledged reads back."""
    uids = await _pod_uids(kube, namespace)
    async with _checker(nodes, status, tls) as checker, _client_writing(status, tls) as client:
        stop = asyncio.Event()
        writer = asyncio.create_task(
            checker.run_writer(max_keys=200_000, duration=600, interval=0.01, stop=stop)
        )
        await asyncio.sleep(2)
        with timings.step("roll of 6 pods (appendfsync) under load") as outcome:
            await kube.patch(VALKEY_CONFIGS, "scenario", {"spec": {"persistence": {"appendfsync": "always"}}})

            async def rolled() -> Obj | NotYet:
                status = await status_of(kube, namespace, CLUSTER)
                now = await _pod_uids(kube, namespace)
                done = status.get("state") == "Active" and not now & uids and len(now) == 6
                return status if done else NotYet((status.get("state"), len(now & uids)))

            status = await eventually(rolled, "every pod replaced, Active", 300)
            stop.set()
            report = await writer
            verified = await checker.verify()
            outcome.append(f"checker: {len(checker.acknowledged)} acknowledged, {verified}, {report}")
    lost = await read_back(status, client.acknowledged, tls.ca_pem)
    outcome.append(
        f"valkey-py: {len(client.acknowledged)} acknowledged, {len(lost)} lost, {client.errors} errors"
    )
    assert verified.ok, verified
    assert len(checker.acknowledged) > 100, report
    assert len(client.acknowledged) > 100 and lost == [], (len(client.acknowledged), lost[:10])
    return status


@attrs.define
class _ClientWrites:
    acknowledged: dict[bytes, bytes] = attrs.Factory(dict)
    errors: int = 0


@contextlib.asynccontextmanager
async def _client_writing(status: Obj, tls: Tls) -> AsyncIterator[_ClientWrites]:
    """The valkey-py cluster client setting keys one by one (at most CLIENT_KEYS) until the block
    ends; a write that raised is not acknowledged, and the next one goes on (the client rediscovers
    the cluster on its own)."""
    writes = _ClientWrites()
    client = cluster_client(status, tls.ca_pem)

    async def run() -> None:
        for index in range(CLIENT_KEYS):
            key, value = f"app:{index}".encode(), f"v{index}".encode()
            try:
                await client.set(key, value)
            except (ValkeyError, OSError):
                writes.errors += 1
            else:
                writes.acknowledged[key] = value
            await asyncio.sleep(0.01)

    task = asyncio.create_task(run())
    try:
        yield writes
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def _oom_kill_a_primary(
    nodes: Nodes, kube: Client, namespace: str, status: Obj, tls: Tls, timings: Timings
) -> Obj:
    """Shard 1's primary outgrows its memory limit and the kernel kills it. The cause is a classic one:
    a client asks for a large list again and again without reading the replies; maxmemory bounds
    the data, not the replies, and Valkey's normal clients have no output buffer limit by default.
    restartPolicy Never: the pod ends, the replica is promoted, the operator creates a new pod, and
    every write the data checker saw acknowledged reads back."""
    victim = primary_of(status, 1)
    key = _key_served_by(victim, "hog")
    client = cluster_client(status, tls.ca_pem)
    try:
        for _ in range(HOG_ELEMENTS // 10_000):
            await client.rpush(key, *[b"h" * 100] * 10_000)
    finally:
        await client.aclose()
    async with _checker(nodes, status, tls) as checker:
        stop = asyncio.Event()
        writer = asyncio.create_task(
            checker.run_writer(max_keys=200_000, duration=600, interval=0.01, stop=stop)
        )
        await asyncio.sleep(2)
        events_before = {event["metadata"]["name"] for event in await kube.list(EVENTS, namespace)}
        with timings.step("primary OOM-killed: to Active 6/6, pod replaced") as outcome:
            started = time.monotonic()
            _, hog = await asyncio.open_connection(victim["ip"], 6379, ssl=tls.context)
            hog.write(encode_command([b"AUTH", SUPERUSER.encode(), SUPERUSER_PASSWORD.encode()]))
            hog.write(encode_command([b"LRANGE", key.encode(), b"0", b"-1"]) * HOG_REPLIES)  # never read

            async def oom_killed() -> Obj | NotYet:
                pod = await kube.get(PODS, victim["pod"], namespace)
                terminated = (_container_status(pod, "valkey").get("state") or {}).get("terminated") or {}
                return pod if terminated.get("reason") == "OOMKilled" else NotYet(pod.get("status"))

            pod = await eventually(oom_killed, f"{victim['pod']} OOMKilled", 120)
            outcome.append(f"killed at {time.monotonic() - started:.1f}s")
            hog.close()
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                await asyncio.wait_for(hog.wait_closed(), 5)

            async def promoted() -> bool | NotYet:
                status = await status_of(kube, namespace, CLUSTER)
                primaries = [
                    n["pod"]
                    for n in status.get("nodes", [])
                    if n["shard"] == 1 and n.get("role") == "primary"
                ]
                return True if primaries and victim["pod"] not in primaries else NotYet(status.get("nodes"))

            await eventually(promoted, "shard 1's replica promoted", 120)
            outcome.append(f"replica promoted at {time.monotonic() - started:.1f}s")

            async def replaced() -> Obj | NotYet:
                status = await status_of(kube, namespace, CLUSTER)
                pods = {node["pod"] for node in status.get("nodes", [])}
                whole = status.get("state") == "Active" and status.get("readyNodes") == 6
                return status if whole and victim["pod"] not in pods else NotYet((status.get("state"), pods))

            status = await eventually(replaced, "Active with 6 of 6, the killed pod replaced", 240)
            stop.set()
            report = await writer
            verified = await checker.verify()
            outcome.append(f"checker: {len(checker.acknowledged)} acknowledged, {verified}, {report}")
    terminated = _container_status(pod, "valkey")["state"]["terminated"]
    assert terminated.get("exitCode") == 137, terminated

    async def failed() -> Obj | NotYet:
        pod = await kube.get(PODS, victim["pod"], namespace)
        return pod if pod["status"].get("phase") == "Failed" else NotYet(pod["status"].get("phase"))

    await eventually(failed, f"{victim['pod']} Failed (restartPolicy Never), kept as evidence", 60)

    async def oom_told() -> list[str] | NotYet:
        said = [
            f"{event.get('reason')}: {event.get('note')}"
            for event in await kube.list(EVENTS, namespace)
            if event.get("regarding", {}).get("kind") == "ValkeyCluster"
            and event["metadata"]["name"] not in events_before
        ]
        oom = f"PodFailed: pod {victim['pod']} (shard 1) failed: container valkey exited with code 137"
        return said if any(line.startswith(f"{oom} (OOMKilled)") for line in said) else NotYet(said)

    told = await eventually(oom_told, "the operator's PodFailed Event naming the OOM kill", 30)
    print(f"[{nodes.kind}] the killed pod: exit {terminated.get('exitCode')} {terminated.get('reason')}; "
          f"the cluster's events since: {told}")  # fmt: skip
    assert verified.ok, verified
    assert len(checker.acknowledged) > 100, report
    client = cluster_client(status, tls.ca_pem)
    try:
        assert await client.llen(key) == HOG_ELEMENTS
        await client.delete(key)
    finally:
        await client.aclose()
    return status


def _key_served_by(node: Obj, prefix: str) -> str:
    """A key in the first slot range that node serves."""
    span = parse_slot_ranges(node["slots"])[0]
    tags = (f"{{{prefix}{n}}}" for n in itertools.count())
    return next(f"{tag}:list" for tag in tags if span.start <= key_slot(tag.encode()) <= span.end)


async def _fail_and_recover_a_primarys_node(
    nodes: Nodes, kube: Client, namespace: str, timings: Timings
) -> None:
    """The node of shard 0's primary fails (kubelet, runtime and containers gone at once, its disk
    kept): its replica is promoted; the node comes back and the cluster is whole again. What became
    of the node's pods (kept or replaced, phase, address, restarts) is part of the outcome: it is
    where the two kubelets could differ."""
    status = await status_of(kube, namespace, CLUSTER)
    victim = primary_of(status, 0)
    node_name = (await kube.get(PODS, victim["pod"], namespace))["spec"]["nodeName"]
    on_node = {
        (pod["metadata"]["namespace"], pod["metadata"]["name"]): pod
        for pod in [*await owned_pods(kube, namespace, CLUSTER), *await kube.list(PODS, OPERATOR_NAMESPACE)]
        if pod["spec"].get("nodeName") == node_name
    }
    print(f"[{nodes.kind}] failing {node_name}, which runs {sorted(name for _, name in on_node)}")
    with timings.step("node of a primary failed: replica promoted"):
        await nodes.fail_node(node_name)

        async def failed_over() -> bool | NotYet:
            status = await status_of(kube, namespace, CLUSTER)
            shard = [n for n in status.get("nodes", []) if n["shard"] == 0 and n.get("role") == "primary"]
            return True if shard and shard[0]["pod"] != victim["pod"] else NotYet(shard)

        await eventually(failed_over, "shard 0's replica promoted", 120)
    with timings.step("that node back: Active with 6 of 6") as outcome:
        await nodes.recover_node(node_name)

        async def whole() -> bool | NotYet:
            status = await status_of(kube, namespace, CLUSTER)
            ready = status.get("readyNodes")
            return (
                True
                if status.get("state") == "Active" and ready == 6
                else NotYet((status.get("state"), ready))
            )

        await eventually(whole, "6 of 6 ready, Active", 240)
        for (pod_namespace, name), before in sorted(on_node.items()):
            outcome.append(f"{name}: {await _fate(kube, pod_namespace, name, before)}")


async def _fate(kube: Client, namespace: str, name: str, before: Obj) -> str:
    """What became of a pod of a failed node once it is back: gone, or its phase, address and
    restarts beside what they were."""
    pod = await kube.get_or_none(PODS, name, namespace)
    if pod is None:
        return "deleted"
    if pod["metadata"]["uid"] != before["metadata"]["uid"]:
        return f"replaced by a new pod of that name on {pod['spec'].get('nodeName')}"
    restarts = sum(status.get("restartCount", 0) for status in pod["status"].get("containerStatuses") or [])
    address = pod["status"].get("podIP")
    moved = "same address" if address == before["status"].get("podIP") else f"address {address}"
    ends = [
        f"{status.get('name')} {ended.get('reason')} {ended.get('exitCode')}"
        for status in pod["status"].get("containerStatuses") or []
        if (ended := (status.get("state") or {}).get("terminated"))
    ]
    return f"kept, {pod['status'].get('phase')}, {moved}, {restarts} restarts, ended {ends or 'none'}"


async def _back_up_and_restore(
    nodes: Nodes, kube: Client, namespace: str, keys: dict[bytes, bytes], tls: Tls, timings: Timings
) -> None:
    """A backup to an object store on an address of ours the operator's pod reaches, then a new
    cluster restored from it: the restoring pods' init containers fetch their shards from there."""
    store = await asyncio.to_thread(objectstore.start, host=nodes.store_host)
    try:
        bucket = await asyncio.to_thread(store.create_bucket)
        await storage_secret(kube, namespace, store)
        with timings.step("backup to the object store") as outcome:
            await start_backup(kube, namespace, "scenario-1", CLUSTER, destination(store, bucket))
            backup = await finished(kube, namespace, "scenario-1")
            assert backup["phase"] == "Completed", backup
            outcome.append(f"{backup['totalKeys']} keys")
        with timings.step("restore into a new TLS 3x0: create to Active") as outcome:
            await restore_cluster(
                kube, namespace, "restored", "scenario", "scenario-1", 3, 0, tls={"secretRef": "tls"}
            )
            restored = await wait_for_state(kube, namespace, "restored", "Active", 300)
            outcome.append(f"{restored['restore'].get('phase')}, {restored['restore'].get('keys')} keys")
        assert restored["restore"]["phase"] == "Verified", restored["restore"]
        assert restored["restore"]["keys"] == backup["totalKeys"]
        assert await read_back(restored, keys, tls.ca_pem) == []
        await kube.delete(VALKEY_CLUSTERS, "restored", namespace)
    finally:
        await asyncio.to_thread(store.stop)
