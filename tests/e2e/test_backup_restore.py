"""Backups to S3-compatible storage and restores into new clusters, end to end (SPEC 1.7).

A 3x1 cluster holding keys written through the valkey-py cluster client is
backed up to the test bed's real S3 server (versitygw) while that client keeps
writing. The ValkeyBackup takes one RDB per shard from an in-sync replica over
the replication protocol (no exec), streams it into a multipart upload with
its sha256, and writes the manifest last. New clusters restored from it at 3,
2 and 5 shards become Active only after every shard's server loaded the
manifest's key count, and then hold every key acknowledged before the backup
started, read back through the valkey-py cluster client.

Lines starting with `[backup]` report the measured times (run with -s).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from backup_support import destination, finished, restore_cluster, start_backup, storage_secret, writing
from chart_operator import ChartOperator
from cluster_support import Catalog, formed_cluster, settled
from keys_support import keys_of, read_back, write

from valkey_operator.core.client import Client
from valkey_testbed.objectstore import ObjectStoreServer

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

PREFILL = 3000
RESTORED = 300.0


@pytest.mark.timeout(900)
async def test_a_cluster_under_write_load_is_backed_up_and_restored_at_three_two_and_five_shards(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    status, _ = await formed_cluster(kube, catalog, namespace, "source", shards=3, replicas=1)
    before = keys_of("before", PREFILL)
    await write(status, before)
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    started = time.monotonic()
    async with writing(status, "during") as during:
        await start_backup(kube, namespace, "nightly", "source", destination(object_store, bucket, path="vk"))
        backup = await finished(kube, namespace, "nightly")
        written_during = len(during)
    took = time.monotonic() - started
    assert backup["phase"] == "Completed", backup
    shards = backup["shards"]
    assert [shard["index"] for shard in shards] == [0, 1, 2]
    assert {shard["sourceRole"] for shard in shards} == {"replica"}, "read from in-sync replicas"
    assert sum(shard["keys"] for shard in shards) == backup["totalKeys"] >= PREFILL
    assert backup["totalBytes"] == sum(shard["bytes"] for shard in shards) > 0
    assert backup["manifestKey"] == f"vk/{namespace}/source/nightly/manifest.json"
    listed = object_store.client().list_objects_v2(Bucket=bucket, Prefix=f"vk/{namespace}/source/nightly/")
    names = sorted(item["Key"].rsplit("/", 1)[1] for item in listed["Contents"])
    assert names == ["manifest.json", "shard-0.rdb", "shard-1.rdb", "shard-2.rdb"]
    manifest = json.loads(
        object_store.client().get_object(Bucket=bucket, Key=backup["manifestKey"])["Body"].read()
    )
    assert manifest["totalKeys"] == backup["totalKeys"] and len(manifest["shards"]) == 3
    print(
        f"[backup] 3 shards, {backup['totalKeys']} keys, {backup['size']} in {took:.1f}s while the "
        f"valkey-py cluster client wrote {written_during} more keys"
    )

    config = catalog("cfg")  # formed_cluster's config
    layouts = {"restored-3": (3, 1), "restored-2": (2, 0), "restored-5": (5, 0)}
    started = time.monotonic()
    for name, (count, replicas) in layouts.items():
        await restore_cluster(kube, namespace, name, config, "nightly", count, replicas)
    restored = await asyncio.gather(*(settled(kube, namespace, name, RESTORED) for name in layouts))
    took = time.monotonic() - started
    for name, state in zip(layouts, restored, strict=True):
        assert state["restore"]["phase"] == "Verified", state["restore"]
        assert state["restore"]["keys"] == state["restore"]["loadedKeys"] == backup["totalKeys"]
        assert state["shards"] == layouts[name][0]
        missing = await read_back(state, before)
        assert not missing, f"{name}: {len(missing)} keys acknowledged before the backup are missing"
    print(f"[backup] restored at 3x1, 2x0 and 5x0 shards, each Active and whole after {took:.1f}s")
