"""The operator reads each archiver's progress.json, and nothing else of the history (ArchiveProgressReader
on the real API server and the test bed's S3 server): a node without one is absent, a document that
is not an archiver's is ignored, a read is kept REFRESH_S, a missing Secret or a refused endpoint
is a reason."""

from __future__ import annotations

import json

import pytest
from storage_support import storage_secret

from controllers.cluster import archive_progress
from controllers.cluster.archive_progress import ArchiveProgressReader
from controllers.cluster.decision.archive import NodeProgress
from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import REFUSE_LOCAL
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PATH = "team-a"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def destination(kube: Client, namespace: str, object_store: ObjectStoreServer) -> Obj:
    """A new bucket under PATH, opened by a Secret in namespace."""
    secret = await storage_secret(kube, namespace, object_store)
    bucket = object_store.create_bucket()
    return {
        "endpoint": object_store.endpoint,
        "bucket": bucket,
        "path": PATH,
        "credentialsSecretName": secret,
    }


async def test_progress_is_read_per_node_and_kept_for_its_refresh(
    kube: Client, namespace: str, object_store: ObjectStoreServer, destination: Obj
) -> None:
    s3 = object_store.client()
    bucket = destination["bucket"]

    def put(node: str, document: object) -> None:
        key = "/".join((PATH, *layout.node_prefix(namespace, "cache", node), layout.PROGRESS_NAME))
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode())

    put("a" * 40, {"archivedUntil": 1790000000.5, "gaps": []})
    put("b" * 40, {"archivedUntil": 1790000003.0, "gaps": [2]})
    put("c" * 40, {"archivedUntil": "yesterday"})
    clock = Clock()
    reader = ArchiveProgressReader(kube, TEST_BED_ENDPOINTS, clock)
    nodes = ["a" * 40, "b" * 40, "c" * 40, "d" * 40]
    read = await reader.progress(namespace, "cache", destination, nodes)
    assert read.reason is None, read.message
    assert dict(read.nodes) == {
        "a" * 40: NodeProgress(1790000000.5),
        "b" * 40: NodeProgress(1790000003.0, (2,)),
    }

    put("d" * 40, {"archivedUntil": 1790000009.0, "gaps": []})
    assert (await reader.progress(namespace, "cache", destination, nodes)) is read, "kept within REFRESH_S"
    clock.now += archive_progress.REFRESH_S
    again = await reader.progress(namespace, "cache", destination, nodes)
    assert again.nodes["d" * 40] == NodeProgress(1790000009.0)

    missing = await ArchiveProgressReader(kube, TEST_BED_ENDPOINTS).progress(
        namespace, "cache", {**destination, "credentialsSecretName": "nope"}, nodes
    )
    assert missing.reason == "CredentialsMissing" and not missing.nodes
    refused = await ArchiveProgressReader(kube, REFUSE_LOCAL).progress(namespace, "cache", destination, nodes)
    assert refused.reason == "EndpointRefused" and not refused.nodes, refused


async def test_a_topology_is_recorded_once_per_change_even_across_a_restart(
    kube: Client, namespace: str, object_store: ObjectStoreServer, destination: Obj
) -> None:
    s3 = object_store.client()
    bucket = destination["bucket"]
    folder = "/".join((PATH, *layout.archive_prefix(namespace, "cache"), layout.TOPOLOGY))
    one = {"shards": [{"slots": "0-16383", "primary": "a" * 40, "replicas": ["b" * 40]}]}
    failed_over = {"shards": [{"slots": "0-16383", "primary": "b" * 40, "replicas": ["a" * 40]}]}

    def records() -> list[tuple[str, object]]:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=folder + "/").get("Contents", [])
        return [
            (
                item["Key"].rsplit("/", 1)[1],
                json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()),
            )
            for item in listed
        ]

    reader = ArchiveProgressReader(kube, TEST_BED_ENDPOINTS)
    await reader.record_topology(namespace, "cache", destination, one, 1_790_000_000.0)
    await reader.record_topology(namespace, "cache", destination, one, 1_790_000_010.0)
    restarted = ArchiveProgressReader(kube, TEST_BED_ENDPOINTS)
    await restarted.record_topology(namespace, "cache", destination, one, 1_790_000_020.0)
    assert records() == [("001790000000.json", {"recordedAt": 1_790_000_000.0, **one})]
    await restarted.record_topology(namespace, "cache", destination, failed_over, 1_790_000_030.0)
    assert [name for name, _ in records()] == ["001790000000.json", "001790000030.json"]
    assert records()[-1][1] == {"recordedAt": 1_790_000_030.0, **failed_over}
