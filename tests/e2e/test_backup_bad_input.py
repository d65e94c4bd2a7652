"""Bad input never half-works (SPEC 1.7): a backup with missing or wrong credentials, an unreachable
endpoint, a missing bucket or no such cluster fails with the reason; a restore from a backup that is
not whole (a corrupt or missing object, a manifest of another format or none, no such backup) or
not what the operator recorded (an object and its manifest entry rewritten together in the bucket)
is held with the reason and never reported Active."""

from __future__ import annotations

import hashlib
import json

import pytest
from backup_support import destination, finished, restore_cluster, start_backup, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, formed_cluster, warnings
from keys_support import keys_of, write

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]


@pytest.mark.timeout(600)
async def test_bad_storage_input_fails_the_backup_with_the_reason(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    await formed_cluster(kube, catalog, namespace, "small", shards=1, replicas=0)
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    await storage_secret(kube, namespace, object_store, name="wrong", secret="not-the-secret")
    cases = {
        "wrong-secret": (destination(object_store, bucket, secret="wrong"), "CredentialsRejected"),
        "no-secret": (destination(object_store, bucket, secret="absent"), "CredentialsMissing"),
        "no-bucket": (destination(object_store, "no-such-bucket"), "BucketMissing"),
        "unreachable": (
            {**destination(object_store, bucket), "endpoint": "http://127.0.0.1:9"},
            "EndpointUnreachable",
        ),
        "no-cluster": (destination(object_store, bucket), "ClusterNotFound"),
    }
    for name, (where, _) in cases.items():
        await start_backup(kube, namespace, name, "absent" if name == "no-cluster" else "small", where)
    for name, (_, reason) in cases.items():
        status = await finished(kube, namespace, name, timeout=120)
        assert (status["phase"], status.get("reason")) == ("Failed", reason), (name, status)
        assert "not-the-secret" not in status["message"]
    events = await warnings(kube, namespace, "BackupFailed")
    assert {event["regarding"]["name"] for event in events} >= set(cases)
    listed = object_store.client().list_objects_v2(Bucket=bucket)
    assert not listed.get("Contents"), "nothing written by a failed backup"


@pytest.mark.timeout(600)
async def test_a_restore_from_a_backup_that_is_not_whole_is_held_and_never_active(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    status, _ = await formed_cluster(kube, catalog, namespace, "small", shards=2, replicas=0)
    await write(status, keys_of("k", 500))
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    names = ("corrupt", "missing-object", "other-format", "missing-manifest", "rewritten")
    for name in names:
        await start_backup(kube, namespace, name, "small", destination(object_store, bucket))
    backups = {name: await finished(kube, namespace, name) for name in names}
    assert {backup["phase"] for backup in backups.values()} == {"Completed"}, backups
    s3 = object_store.client()
    s3.put_object(
        Bucket=bucket, Key=backups["corrupt"]["shards"][1]["objectKey"], Body=b"REDIS0011 not an rdb"
    )
    s3.delete_object(Bucket=bucket, Key=backups["missing-object"]["shards"][0]["objectKey"])
    manifest = json.loads(
        s3.get_object(Bucket=bucket, Key=backups["other-format"]["manifestKey"])["Body"].read()
    )
    s3.put_object(
        Bucket=bucket,
        Key=backups["other-format"]["manifestKey"],
        Body=json.dumps({**manifest, "format": "valkey-operator.backup/v0"}).encode(),
    )
    s3.delete_object(Bucket=bucket, Key=backups["missing-manifest"]["manifestKey"])
    # Whoever can write to the bucket swaps shard 0's object and puts its checksum and size in the
    # manifest, so the download would verify: the ValkeyBackup's status still has the original.
    forged = b"REDIS0011 someone else's data"
    rewritten = json.loads(
        s3.get_object(Bucket=bucket, Key=backups["rewritten"]["manifestKey"])["Body"].read()
    )
    rewritten["shards"][0] |= {"sha256": hashlib.sha256(forged).hexdigest(), "bytes": len(forged)}
    s3.put_object(Bucket=bucket, Key=rewritten["shards"][0]["objectKey"], Body=forged)
    s3.put_object(Bucket=bucket, Key=backups["rewritten"]["manifestKey"], Body=json.dumps(rewritten).encode())
    config = catalog("cfg")
    for name in (*names, "no-backup"):
        await restore_cluster(kube, namespace, f"from-{name}", config, name, 2, 0)
    expected = {
        "corrupt": "ChecksumMismatch",
        "missing-object": "ObjectMissing",
        "other-format": "ManifestUnsupported",
        "missing-manifest": "ObjectMissing",
        "rewritten": "disagrees with the ValkeyBackup",
        "no-backup": "BackupNotFound",
    }
    held = await _held(kube, namespace, {f"from-{name}": words for name, words in expected.items()})
    for name, restore in held.items():
        assert restore["phase"] == "Held", (name, restore)
    assert held["from-rewritten"]["reason"] == "ManifestUnsupported", held["from-rewritten"]
    assert "shard 0: the manifest's bytes" in held["from-rewritten"]["message"], held["from-rewritten"]
    for name in held:
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        assert cluster["status"]["state"] != "Active", cluster["status"]


async def _held(
    kube: Client, namespace: str, words: dict[str, str], timeout: float = 240.0
) -> dict[str, dict]:
    """Each cluster's status.restore once it is Held and its reason or message names the words."""

    async def all_held() -> dict[str, dict] | NotYet:
        found = {}
        for name, expected in words.items():
            cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
            restore = (cluster.get("status") or {}).get("restore") or {}
            text = f"{restore.get('reason')} {restore.get('message')}"
            if restore.get("phase") != "Held" or expected not in text:
                return NotYet({name: restore})
            found[name] = restore
        return found

    return await eventually(all_held, "every bad restore held with its reason", timeout)
