"""Whose history a restore to a second replays, read from a real S3 server with the credentials of a
Secret in the real API server (ArchiveSources): the topology record in force, each shard's node
whose archive reaches the moment (a replica when the primary is behind), the newest base stored at
or before it; and the holds: an archive behind the moment (read again on a later pass, then found),
a moment before the first record, no base that old.

The bucket is laid out as archivers and the operator write it (layout.py); the bases' dates are
the S3 server's own (LastModified), so the moments are chosen around the time they were put.
"""

from __future__ import annotations

import json
import time

import pytest
from storage_support import storage_secret

from controllers.cluster.archive_source import ArchiveSources
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.render.restore import ArchiveShard
from valkey_operator.api.backup import BackupDestination, Restore
from valkey_operator.archiver import layout
from valkey_operator.core.client import Client
from valkey_operator.core.clock import rfc3339
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.usefixtures("valkey_crds")]

PATH = "vk"
SOURCE = "cache"
SHARDS = [
    {"slots": "0-8191", "primary": "aaaa", "replicas": ["aaab"]},
    {"slots": "8192-16383", "primary": "bbbb", "replicas": []},
]


@pytest.fixture
async def bucket(kube: Client, namespace: str, object_store: ObjectStoreServer) -> str:
    """A bucket and the Secret that opens it, in namespace."""
    await storage_secret(kube, namespace, object_store)
    return object_store.create_bucket()


def restore(object_store: ObjectStoreServer, bucket: str, moment: float) -> Restore:
    destination = BackupDestination(
        endpoint=object_store.endpoint, bucket=bucket, path=PATH, credentials_secret_name="s3"
    )
    return Restore(point_in_time=rfc3339(moment), cluster_name=SOURCE, destination=destination)


def put(object_store: ObjectStoreServer, bucket: str, key: str, body: bytes) -> None:
    object_store.client().put_object(Bucket=bucket, Key=key, Body=body)


def node_folder(namespace: str, node: str) -> str:
    return "/".join((PATH, *layout.node_prefix(namespace, SOURCE, node)))


def archive(
    object_store: ObjectStoreServer, bucket: str, namespace: str, recorded: float, marks: dict[str, float]
) -> None:
    """A topology record at recorded naming SHARDS; each node in marks with bases 1 and 2 (a segment
    each) and progress.json saying marks[node]."""
    archive_folder = "/".join((PATH, *layout.archive_prefix(namespace, SOURCE)))
    document = {"recordedAt": recorded, "shards": SHARDS}
    put(
        object_store,
        bucket,
        f"{archive_folder}/{layout.TOPOLOGY}/{layout.topology_name(recorded)}",
        json.dumps(document).encode(),
    )
    for node, mark in marks.items():
        folder = node_folder(namespace, node)
        for seq in (1, 2):
            put(object_store, bucket, "/".join((folder, *layout.base_name(seq))), b"VALKEY080")
            put(
                object_store,
                bucket,
                "/".join((folder, *layout.segment_name(seq, 0))),
                b"*1\r\n$4\r\nPING\r\n",
            )
        progress = json.dumps({"archivedUntil": mark, "gaps": []}).encode()
        put(object_store, bucket, f"{folder}/{layout.PROGRESS_NAME}", progress)


async def test_each_shard_replays_a_node_archived_past_the_moment_from_its_newest_base(
    kube: Client, namespace: str, object_store: ObjectStoreServer, bucket: str
) -> None:
    now = time.time()
    # The primary of the first shard stopped archiving before the moment: its replica stands in.
    archive(object_store, bucket, namespace, now - 60, {"aaaa": now - 30, "aaab": now + 60, "bbbb": now + 60})
    sources = ArchiveSources(kube, "operator:dev", TEST_BED_ENDPOINTS)
    moment = time.time() + 1  # the bases were stored just before: both are at or before it
    found = await sources.source(namespace, restore(object_store, bucket, moment))
    assert isinstance(found, RestoreSource), found
    assert found.shards == (
        ArchiveShard(index=0, node="aaab", folder=node_folder(namespace, "aaab"), base_seq=2, slots="0-8191"),
        ArchiveShard(
            index=1, node="bbbb", folder=node_folder(namespace, "bbbb"), base_seq=2, slots="8192-16383"
        ),
    )
    assert (found.fetch.until, found.fetch.bucket, found.fetch.credentials_secret) == (
        int(moment),
        bucket,
        "s3",
    )
    assert found.label == f"cluster {SOURCE} at {rfc3339(moment)}"


async def test_an_archive_behind_the_moment_holds_until_it_reaches_it(
    kube: Client, namespace: str, object_store: ObjectStoreServer, bucket: str
) -> None:
    now = time.time()
    archive(object_store, bucket, namespace, now - 60, {"aaaa": now - 30, "aaab": now - 30, "bbbb": now + 60})
    sources = ArchiveSources(kube, "operator:dev", TEST_BED_ENDPOINTS)
    spec = restore(object_store, bucket, time.time() + 1)
    held = await sources.source(namespace, spec)
    assert isinstance(held, RestoreHeld) and held.reason == "ArchiveBehindMoment", held
    assert "slots 0-8191: no node's archive reaches the moment (archived until: aaaa " in held.message
    caught_up = json.dumps({"archivedUntil": now + 60, "gaps": []}).encode()
    put(object_store, bucket, f"{node_folder(namespace, 'aaaa')}/{layout.PROGRESS_NAME}", caught_up)
    found = await sources.source(namespace, spec)
    assert isinstance(found, RestoreSource) and found.shards[0].node == "aaaa", found


async def test_a_moment_before_the_archive_or_its_first_base_is_held(
    kube: Client, namespace: str, object_store: ObjectStoreServer, bucket: str
) -> None:
    now = time.time()
    sources = ArchiveSources(kube, "operator:dev", TEST_BED_ENDPOINTS)
    empty = await sources.source(namespace, restore(object_store, bucket, now))
    assert isinstance(empty, RestoreHeld) and empty.reason == "NoArchiveAtMoment", empty
    assert "it holds no record" in empty.message
    archive(object_store, bucket, namespace, now - 60, {"aaaa": now + 60, "bbbb": now + 60})
    early = await sources.source(namespace, restore(object_store, bucket, now - 120))
    assert isinstance(early, RestoreHeld) and early.reason == "NoArchiveAtMoment", early
    assert f"its first record is from {rfc3339(now - 60)}" in early.message
    # Recorded before the moment, but every base was stored after it.
    no_base = await sources.source(namespace, restore(object_store, bucket, now - 30))
    assert isinstance(no_base, RestoreHeld) and no_base.reason == "NoBaseBeforeMoment", no_base
    assert no_base.message.startswith("slots 0-8191: no node's archive holds a base")


async def test_a_restore_to_a_moment_needs_the_operators_image(
    kube: Client, namespace: str, object_store: ObjectStoreServer, bucket: str
) -> None:
    held = await ArchiveSources(kube, "", TEST_BED_ENDPOINTS).source(
        namespace, restore(object_store, bucket, time.time())
    )
    assert isinstance(held, RestoreHeld) and held.reason == "RestoreImageUnknown", held
