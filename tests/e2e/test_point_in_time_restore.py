"""A cluster restored to a second from another cluster's archive, at another shard count (issue 41
items 2 and 4).

The operator from the chart's image. A 3x1 source on persistence aof archives every node's history
(spec.backup.pointInTime). An application on the valkey-py cluster client writes numbered keys
across every shard, one after another, each send and acknowledgement timed. The cut is a second
a few seconds into the writes; once status.pointInTime.archivedUntil is past it, the writes stop
and a new 2-shard cluster is created with spec.restore.pointInTime at the cut. It loads at the
source's 3 shards (each new primary's init container fetches one node's history and cuts it),
reports each shard's keys, then scales to 2 with atomic slot migration. Read back through the
valkey-py cluster client: every key acknowledged before the cut's second ended is there with its
value, and none sent after it (plus SKEW for the server's cached clock) is.

Lines starting with `[pitr]` report what was measured (run with -s or -rP).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from backup_support import destination, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, create_cluster, settled, status_of
from keys_support import cluster_client
from persistence_support import persistent_config

from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.clock import parse_rfc3339, rfc3339
from valkey_operator.core.rest import Obj
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

MAX_WRITES = 200_000
"""Bounds the writer, which writes until the archive passes the cut."""
INTO = 4
"""The cut is this many seconds after the first write."""
SKEW = 0.5
"""A write sent this long after the cut's second ended may still carry its second (the server's
cached clock); one machine, so no clock skew between nodes."""
FORMED = 360.0
ARCHIVED = 90.0
RESTORED = 420.0
READ_BATCH = 1000


@contextlib.asynccontextmanager
async def writing_numbered(status: Obj) -> AsyncIterator[list[tuple[float, float]]]:
    """key:<i> = v<i>, one after another, until the block ends (or MAX_WRITES); yields the (sent,
    acknowledged) Unix times of each, as they grow."""
    client = cluster_client(status)
    times: list[tuple[float, float]] = []

    async def run() -> None:
        for index in range(MAX_WRITES):
            sent = time.time()
            await client.set(f"key:{index}", f"v{index}")
            times.append((sent, time.time()))

    task = asyncio.create_task(run())
    try:
        yield times
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def read_back(status: Obj, count: int) -> dict[int, bytes]:
    """Every key:<i> (i < count) the cluster holds, through the valkey-py cluster client."""
    client = cluster_client(status)
    found: dict[int, bytes] = {}
    try:
        for start in range(0, count, READ_BATCH):
            indexes = range(start, min(start + READ_BATCH, count))
            values = await client.mget_nonatomic([f"key:{index}" for index in indexes])
            found.update((index, value) for index, value in zip(indexes, values, strict=True) if value)
    finally:
        await client.aclose()
    return found


@pytest.mark.timeout(1200)
async def test_a_cluster_restored_to_a_second_holds_what_was_acknowledged_then_and_nothing_later(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    where = destination(object_store, bucket, path="vk")
    config = await persistent_config(catalog, {"mode": "aof"})
    backup = {"schedule": "0 3 * * *", "keep": 1, "destination": where, "pointInTime": {}}
    await create_cluster(kube, namespace, "src", config, shards=3, replicas=1, backup=backup)
    status = await settled(kube, namespace, "src", FORMED)
    s3 = object_store.client()
    records = "/".join(("vk", *layout.archive_prefix(namespace, "src"), layout.TOPOLOGY)) + "/"

    def recorded() -> bool | NotYet:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=records).get("Contents", [])
        return bool(listed) or NotYet("no topology record yet")

    await eventually(recorded, "the slot map recorded", ARCHIVED)

    async with writing_numbered(status) as times:
        await eventually(lambda: bool(times) or NotYet("no write acknowledged yet"), "the first write", 30)
        cut = int(times[0][0]) + INTO

        async def archived_past_cut() -> float | NotYet:
            found = await status_of(kube, namespace, "src")
            until = parse_rfc3339((found.get("pointInTime") or {}).get("archivedUntil"))
            return until if until is not None and until >= cut + 1 else NotYet(found.get("pointInTime"))

        until = await eventually(archived_past_cut, "archivedUntil past the cut", ARCHIVED, interval=0.2)
    sent = len(times)
    before = {index for index, (_, acked) in enumerate(times) if acked < cut + 1}
    after = {index for index, (began, _) in enumerate(times) if began >= cut + 1 + SKEW}
    print(
        f"[pitr] {sent} writes over {times[-1][1] - times[0][0]:.1f} s; cut at the first write + {INTO} s; "
        f"archivedUntil {until - cut:.1f} s past it; {len(before)} acknowledged before the cut's second "
        f"ended, {len(after)} sent after it"
    )
    assert before and after, "the cut falls inside the writes"

    restore = {"pointInTime": rfc3339(cut), "clusterName": "src", "destination": where}
    started = time.monotonic()
    await create_cluster(kube, namespace, "dst", config, shards=2, replicas=0, restore=restore)

    async def verified() -> Obj | NotYet:
        found = await status_of(kube, namespace, "dst")
        return (
            found if (found.get("restore") or {}).get("phase") == "Verified" else NotYet(found.get("restore"))
        )

    loaded = await eventually(verified, "the restore verified", RESTORED, interval=0.5)
    took = time.monotonic() - started
    restored = await settled(kube, namespace, "dst", RESTORED)
    settled_after = time.monotonic() - started
    summary = loaded["restore"]
    message = summary["message"]
    print(f"[pitr] Verified after {took:.1f} s, Active at 2 shards after {settled_after:.1f} s: {message}")
    assert (summary["pointInTime"], summary["shards"]) == (rfc3339(cut), 3), summary
    primaries = [node for node in restored["nodes"] if node.get("role") == "primary"]
    assert restored["state"] == "Active" and len(primaries) == 2, restored["nodes"]

    found = await read_back(restored, sent)
    missing = sorted(before - set(found))
    assert not missing, f"{len(missing)} acknowledged before the cut are missing (first {missing[:5]})"
    wrong = sorted(index for index, value in found.items() if value != f"v{index}".encode())
    assert not wrong, f"{len(wrong)} keys restored with another value (first {wrong[:5]})"
    late = sorted(after & set(found))
    assert not late, f"{len(late)} sent after the cut are restored (first {late[:5]})"
    assert summary["loadedKeys"] == len(found), (summary["loadedKeys"], len(found))
    print(
        f"[pitr] {len(found)} keys restored: all {len(before)} acknowledged before the cut, "
        f"{len(found) - len(before)} from the cut's last moments, none of the {len(after)} later"
    )
