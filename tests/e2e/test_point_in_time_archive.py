"""A cluster with spec.backup.pointInTime archives every node's history, end to end (issue 41 item 1).

The operator from the chart's image; a 3x1 cluster on persistence aof whose pods run the archiver
sidecar (the same image). An application on the valkey-py cluster client writes numbered keys across
every shard, each acknowledgement timed, and goes on writing. As soon as
status.pointInTime.archivedUntil covers its first seconds, each primary's history is fetched from
the bucket alone (the operator never reads it) and loaded by a fresh valkey-server: every key
acknowledged before archivedUntil must be there with its value, what the mark promises. The
writes go on meanwhile, so a mark ahead of what is stored fails it. The slot map is recorded
beside the histories (the primaries and their slots). The mark trails the present
by less than ARCHIVED_WITHIN, and the metric says the same.

Lines starting with `[archive]` report what was measured (run with -s or -rP).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from archive_support import fetch_history, loaded
from backup_support import destination, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, create_cluster, owned_pods, settled, status_of
from keys_support import cluster_client
from persistence_support import persistent_config

from controllers.cluster.render import archiver
from valkey_operator.api.quantity import quantity_bytes
from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.clock import parse_rfc3339
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.images import ImageEntry
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.valkeyproc import server_base_dir
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

MAX_WRITES = 200_000
"""Bounds the writer, which writes numbered keys one after another until the history is read."""
LEAD = 3
"""Seconds of writes the first archivedUntil waited for must cover."""
FORMED = 360.0
ARCHIVED_WITHIN = 45.0
"""docs/backups.md: archivedUntil trails the present by at most about 40 s while archiving keeps up
(an archiver's look every second, its progress every 5 s, the operator's read every 5 s, a pass
at least every 30 s)."""
LOADER_HOSTS = ("127.0.95.1", "127.0.95.2", "127.0.95.3")
PASSWORD = "archive-e2e"
METRIC = "valkey_operator_cluster_archived_until_timestamp_seconds"
ARCHIVER_LIMIT = quantity_bytes(archiver.RESOURCES["limits"]["memory"])


@contextlib.asynccontextmanager
async def writing_numbered(status: Obj) -> AsyncIterator[dict[bytes, tuple[bytes, float]]]:
    """key:<i> = v<i>, one after another (each acknowledged before the next), until the block ends
    or MAX_WRITES; yields key -> (value, when it was acknowledged), as it grows."""
    client = cluster_client(status)
    acked: dict[bytes, tuple[bytes, float]] = {}

    async def run() -> None:
        for index in range(MAX_WRITES):
            key, value = f"key:{index}".encode(), f"v{index}".encode()
            await client.set(key, value)
            acked[key] = (value, time.time())

    task = asyncio.create_task(run())
    try:
        yield acked
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


def replay_primaries(
    entry: ImageEntry, store: ObjectStoreServer, bucket: str, namespace: str, status: Obj
) -> dict[bytes, bytes]:
    """Every key the primaries' histories in the bucket hold once loaded by fresh servers, with its
    value: the bucket alone, as a restore will read it."""
    primaries = [node for node in status["nodes"] if node.get("role") == "primary"]
    assert len(primaries) == 3, status["nodes"]
    s3 = store.client()
    restored: dict[bytes, bytes] = {}
    for node, host in zip(primaries, LOADER_HOSTS, strict=True):
        data_dir = server_base_dir() / "node"
        prefix = "/".join(("vk", *layout.node_prefix(namespace, "pitr", node["nodeId"])))
        fetch_history(s3, bucket, prefix, data_dir / "appendonlydir", [])
        with loaded(entry, data_dir, host, PASSWORD) as server:
            keys = _bytes(server.command("KEYS", "key:*"))
            values = _bytes(server.command("MGET", *keys)) if keys else []
        restored.update(zip(keys, values, strict=True))
        print(f"[archive] {node['pod']}: {len(keys)} keys replayed from the bucket")
    return restored


def archiver_peaks(namespace: str, cluster: str) -> list[int]:
    """Peak resident memory (bytes) of the cluster's archiver processes: the process kubelet runs
    each container as a process of this machine."""
    wanted = ["archive", "--namespace", namespace, "--cluster", cluster]
    peaks = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if not all(arg in argv for arg in wanted):
                continue
            status = (proc / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]) * 1024)
    return peaks


def _bytes(reply: object) -> list[bytes]:
    assert isinstance(reply, list) and all(isinstance(item, bytes) for item in reply), reply
    return list(reply)


@pytest.mark.timeout(900)
async def test_every_acknowledged_write_is_in_the_bucket_by_archived_until(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    entry = images.resolve_image(images.newest_image())
    assert entry is not None, "the newest Valkey image is not installed (python -m valkey_testbed build)"
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    where = destination(object_store, bucket, path="vk")
    backup = {"schedule": "0 3 * * *", "keep": 1, "destination": where, "pointInTime": {}}
    config = await persistent_config(catalog, {"mode": "aof"})
    started = time.monotonic()
    await create_cluster(kube, namespace, "pitr", config, shards=3, replicas=1, backup=backup)
    status = await settled(kube, namespace, "pitr", FORMED)
    print(f"[archive] 3x1 on aof with archivers Active after {time.monotonic() - started:.1f}s")
    for pod in await owned_pods(kube, namespace, "pitr"):
        sidecars = {c["name"]: c for c in pod["spec"].get("initContainers", [])}
        assert sidecars["archiver"]["image"].endswith("@" + operator.image.digest), sidecars

    async with writing_numbered(status) as acked:
        began = time.time()

        async def archived() -> tuple[float, Obj] | NotYet:
            found = await status_of(kube, namespace, "pitr")
            until = parse_rfc3339((found.get("pointInTime") or {}).get("archivedUntil"))
            if until is None or until < int(began) + LEAD:
                return NotYet(found.get("pointInTime"))
            return until, found

        until, status = await eventually(
            archived, "archivedUntil past the first writes", ARCHIVED_WITHIN, interval=0.2
        )
        seen = time.time()
        # The writes go on while the bucket is read: a mark ahead of what is stored shows as
        # writes acknowledged before it and missing.
        restored = replay_primaries(entry, object_store, bucket, namespace, status)
        writes = len(acked)
    promised = {key: value for key, (value, at) in list(acked.items()) if at < until}
    print(
        f"[archive] {writes} writes; archivedUntil {until - began:.0f} s after the first, read "
        f"{seen - until:.1f} s after it; {len(promised)} acknowledged before it"
    )
    assert promised, "the mark covers some writes"
    missing = sorted(set(promised) - set(restored), key=lambda key: int(key.split(b":")[1]))
    assert not missing, f"{len(missing)} acknowledged before the mark, not archived (first {missing[:5]})"
    wrong = [key for key, value in promised.items() if restored[key] != value]
    assert not wrong, f"{len(wrong)} keys archived with another value (first {wrong[:5]})"
    assert seen - until < ARCHIVED_WITHIN, "the mark trails the present by what the docs promise"
    metric = await operator.sample(METRIC, {"namespace": namespace, "cluster": "pitr"})
    assert metric is not None and metric >= until, metric

    s3 = object_store.client()
    folder = "/".join(("vk", *layout.archive_prefix(namespace, "pitr"), layout.TOPOLOGY))
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=folder + "/").get("Contents", [])
    assert listed, "the slot map is recorded beside the histories"
    record = json.loads(s3.get_object(Bucket=bucket, Key=max(item["Key"] for item in listed))["Body"].read())
    serving = {node["nodeId"]: node["slots"] for node in status["nodes"] if node.get("role") == "primary"}
    assert {shard["primary"]: shard["slots"] for shard in record["shards"]} == serving, record

    peaks = archiver_peaks(namespace, "pitr")
    assert len(peaks) == 6, peaks
    print(f"[archive] archiver peak RSS {max(peaks) / 2**20:.1f} MiB, limit {ARCHIVER_LIMIT >> 20} MiB")
    assert max(peaks) < ARCHIVER_LIMIT * 0.8, "the archiver's memory limit leaves it room"
