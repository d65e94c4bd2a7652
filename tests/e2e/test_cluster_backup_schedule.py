"""Scheduled backups end to end (SPEC 1.7): a cluster's spec.backup takes backups every minute and
retention keeps the newest `keep`, deleting the older ValkeyBackups and their objects in the bucket.

Lines starting with `[backup]` report what happened (run with -s).
"""

from __future__ import annotations

import time

import pytest
from backup_support import destination, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, formed_cluster

from valkey_operator.api.resources import VALKEY_BACKUPS, VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]


@pytest.mark.timeout(600)
async def test_a_schedule_takes_backups_and_retention_deletes_the_old_ones_with_their_objects(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    await formed_cluster(kube, catalog, namespace, "nightly", shards=1, replicas=1)
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    schedule = {"schedule": "* * * * *", "keep": 1, "destination": destination(object_store, bucket)}
    started = time.monotonic()
    await kube.patch(VALKEY_CLUSTERS, "nightly", {"spec": {"backup": schedule}}, namespace)
    seen: dict[str, Obj] = {}

    async def two_taken() -> list[str] | NotYet:
        for backup in await kube.list(VALKEY_BACKUPS, namespace):
            seen[backup["metadata"]["name"]] = backup
        completed = sorted(n for n, b in seen.items() if (b.get("status") or {}).get("phase") == "Completed")
        return completed if len(completed) >= 2 else NotYet(sorted(seen))

    taken = await eventually(two_taken, "two scheduled backups completed", 240)
    first, second = taken[0], taken[-1]
    assert all(name.startswith("nightly-") for name in taken)

    def objects(name: str) -> list[str]:
        listed = object_store.client().list_objects_v2(Bucket=bucket, Prefix=f"{namespace}/nightly/{name}/")
        return sorted(item["Key"].rsplit("/", 1)[1] for item in listed.get("Contents") or [])

    async def retained() -> bool | NotYet:
        names = {backup["metadata"]["name"] for backup in await kube.list(VALKEY_BACKUPS, namespace)}
        gone = first not in names and not objects(first)
        return True if gone and second in names else NotYet(sorted(names))

    await eventually(retained, f"retention deleted {first} and its objects", 120)
    assert objects(second) == ["manifest.json", "shard-0.rdb"]

    async def last_backup() -> str | NotYet:
        cluster = await kube.get(VALKEY_CLUSTERS, "nightly", namespace)
        found = (cluster.get("status") or {}).get("lastBackup")
        return found if found and found >= second else NotYet(found)

    newest = await eventually(last_backup, "status.lastBackup names the newest scheduled backup", 60)
    print(
        f"[backup] schedule every minute, keep 1: {len(taken)} completed within "
        f"{time.monotonic() - started:.0f}s, {first} deleted with its objects, lastBackup {newest}"
    )
