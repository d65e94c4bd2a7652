"""A restore trusts nothing it reads from the bucket (RestoreSources on the real API server and a real
S3 server): a manifest too large or listing too many shards, a key outside the backup's prefix, or a
manifest rewritten to match swapped objects is held with ManifestUnsupported, and an endpoint on
loopback is refused unless the operator allows it.

Each ValkeyBackup is stored through the API with the status the backup reconciler writes (the API
server's schema checks it), and its objects are put in the bucket as a backup writes them; then
the bucket is tampered with as a tenant who can write to it could.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.restore_source import RestoreSources
from controllers.shared.manifest import MANIFEST_NAME, Manifest, ShardEntry, shard_object_name
from controllers.shared.manifest_trust import backup_prefix
from valkey_operator.api.backup import Restore
from valkey_operator.api.destination_keys import CREDENTIAL_KEYS
from valkey_operator.api.resources import VALKEY_BACKUPS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.usefixtures("valkey_crds")]

PATH = "team-a"
CLUSTER = "cache"
SHARDS = 2


class Bed:
    """A namespace, a bucket, and the storage Secret, as a tenant sets them up."""

    def __init__(self, kube: Client, namespace: str, server: ObjectStoreServer) -> None:
        self.kube = kube
        self.namespace = namespace
        self.server = server
        self.bucket = server.create_bucket()
        self.s3 = server.client()

    async def secret(self) -> None:
        values = dict(
            zip(CREDENTIAL_KEYS, (self.server.access_key_id, self.server.secret_access_key), strict=True)
        )
        await self.kube.create(
            SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s3", "namespace": self.namespace},
                "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
            },
        )

    def prefix(self, backup: str) -> str:
        return backup_prefix(PATH, self.namespace, CLUSTER, backup)

    async def completed(self, backup: str) -> tuple[Manifest, Obj]:
        """A Completed backup: its objects and manifest in the bucket, its status in the API."""
        prefix = self.prefix(backup)
        entries = []
        for index in range(SHARDS):
            body = f"REDIS0011 shard {index} of {backup}".encode()
            key = f"{prefix}/{shard_object_name(index)}"
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
            entries.append(
                ShardEntry(
                    index=index,
                    slots="0-8191" if index == 0 else "8192-16383",
                    object_key=key,
                    bytes=len(body),
                    sha256=hashlib.sha256(body).hexdigest(),
                    keys=10 + index,
                    source_pod=f"{CLUSTER}-{index}-abcde",
                    source_role="replica",
                )
            )
        manifest = Manifest(
            backup=backup,
            namespace=self.namespace,
            cluster=CLUSTER,
            started_at="2026-12-04T00:00:00Z",
            completed_at="2026-12-04T00:00:05Z",
            valkey_version="9.0.1",
            shards=tuple(entries),
        )
        self.put_manifest(backup, manifest.to_dict())
        endpoint = self.server.endpoint
        await self.kube.create(
            VALKEY_BACKUPS,
            {
                "apiVersion": VALKEY_BACKUPS.api_version,
                "kind": VALKEY_BACKUPS.kind,
                "metadata": {"name": backup, "namespace": self.namespace},
                "spec": {
                    "clusterName": CLUSTER,
                    "destination": {
                        "endpoint": endpoint,
                        "bucket": self.bucket,
                        "path": PATH,
                        "credentialsSecretName": "s3",
                    },
                },
            },
        )
        status = {
            "phase": "Completed",
            "manifestKey": f"{prefix}/{MANIFEST_NAME}",
            "shards": [
                {key: value for key, value in entry.to_dict().items() if key != "rdbVersion"}
                for entry in entries
            ],
        }
        stored = await self.kube.patch_status(VALKEY_BACKUPS, backup, {"status": status}, self.namespace)
        assert stored["status"]["shards"][1]["sha256"] == entries[1].sha256
        return manifest, stored

    def put_manifest(self, backup: str, document: Any) -> None:
        body = document if isinstance(document, bytes) else json.dumps(document, indent=2).encode()
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix(backup)}/{MANIFEST_NAME}", Body=body)

    async def source(
        self, backup: str, endpoints: EndpointPolicy = TEST_BED_ENDPOINTS
    ) -> RestoreSource | RestoreHeld:
        stored = await self.kube.get(VALKEY_BACKUPS, backup, self.namespace)
        sources = RestoreSources(self.kube, lambda namespace, name: stored, "operator:test", endpoints)
        return await sources.source(self.namespace, Restore(backup_name=backup))


def held(found: RestoreSource | RestoreHeld, reason: str, words: str) -> RestoreHeld:
    assert isinstance(found, RestoreHeld), found
    assert found.reason == reason and words in found.message, found
    return found


@pytest.fixture
async def bed(kube: Client, namespace: str, object_store: ObjectStoreServer) -> Bed:
    made = Bed(kube, namespace, object_store)
    await made.secret()
    return made


async def test_a_backup_as_written_is_restored(bed: Bed) -> None:
    manifest, _ = await bed.completed("whole")
    found = await bed.source("whole")
    assert isinstance(found, RestoreSource), found
    assert [(shard.object_key, shard.sha256) for shard in found.shards] == [
        (shard.object_key, shard.sha256) for shard in manifest.shards
    ]


async def test_a_manifest_larger_than_the_cap_is_refused_unread(bed: Bed) -> None:
    manifest, _ = await bed.completed("padded")
    bed.put_manifest("padded", json.dumps({**manifest.to_dict(), "pad": "x" * (2 * 1024 * 1024)}).encode())
    held(await bed.source("padded"), "ManifestUnsupported", "more than the 1048576 bytes allowed")


async def test_a_manifest_listing_more_shards_than_admission_allows_is_refused(bed: Bed) -> None:
    manifest, _ = await bed.completed("wide")
    document = manifest.to_dict()
    first = document["shards"][0]
    document["shards"] = [
        {**first, "index": index, "objectKey": f"{bed.prefix('wide')}/{shard_object_name(index)}"}
        for index in range(1000)
    ]
    bed.put_manifest("wide", document)
    held(await bed.source("wide"), "ManifestUnsupported", "lists 1000 shards, more than the 64")


async def test_a_manifest_key_outside_the_backup_s_prefix_is_refused(bed: Bed) -> None:
    """The manifest of "mine" points shard 1 at another backup's object, checksum and size included
    (all the old check compared): that backup's data would load into this cluster."""
    mine, _ = await bed.completed("mine")
    other, _ = await bed.completed("other")
    document = mine.to_dict()
    document["shards"][1] = {
        **document["shards"][1],
        **{key: other.shards[1].to_dict()[key] for key in ("objectKey", "sha256", "bytes")},
    }
    bed.put_manifest("mine", document)
    found = held(await bed.source("mine"), "ManifestUnsupported", "is not under the backup's prefix")
    assert f"{bed.prefix('mine')}/" in found.message
    document["shards"][1]["objectKey"] = f"{bed.prefix('mine')}/../other/{shard_object_name(1)}"
    bed.put_manifest("mine", document)
    held(await bed.source("mine"), "ManifestUnsupported", "'..' segment")


async def test_an_object_and_manifest_rewritten_together_disagree_with_the_status(bed: Bed) -> None:
    """A tenant who can write to the bucket swaps a shard's object and puts its checksum and size in
    the manifest: the download would verify. The ValkeyBackup's status, which only the operator
    writes, still has the original: the restore is held, naming the shard."""
    manifest, _ = await bed.completed("swapped")
    forged = b"REDIS0011 what someone else wants loaded"
    key = manifest.shards[0].object_key
    bed.s3.put_object(Bucket=bed.bucket, Key=key, Body=forged)
    document = manifest.to_dict()
    document["shards"][0] = {
        **document["shards"][0],
        "sha256": hashlib.sha256(forged).hexdigest(),
        "bytes": len(forged),
    }
    bed.put_manifest("swapped", document)
    found = held(await bed.source("swapped"), "ManifestUnsupported", "disagrees with the ValkeyBackup")
    assert "shard 0: the manifest's bytes" in found.message and "sha256" in found.message, found


async def test_an_endpoint_on_loopback_is_refused_unless_allowed(bed: Bed) -> None:
    await bed.completed("local")
    found = held(await bed.source("local", REFUSE_LOCAL), "EndpointRefused", "127.0.0.1 is loopback")
    assert "refused as a backup endpoint" in found.message
    assert isinstance(await bed.source("local", TEST_BED_ENDPOINTS), RestoreSource)
