"""The backup schedule controller on the real API server and a real S3-compatible server (versitygw):
a schedule creates one ValkeyBackup per fire time, retention deletes old backups and their objects,
and a store that refuses the credentials keeps the backup with a RetentionFailed Event.

Only this controller runs (no ValkeyBackup controller): backups it creates stay Pending, and the
tests write the phases of the backups they arrange themselves.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s
from prometheus_client import CollectorRegistry

from controllers.backup_schedule import (
    ARCHIVE_RETENTION_EVERY_S,
    RETRY_SECONDS,
    BackupScheduleReconciler,
    setup,
)
from controllers.backup_schedule_decision import backup_name
from controllers.indexes import ReferenceIndex
from controllers.options import ControllerOptions
from controllers.shared.backups import SCHEDULED_AT_ANNOTATION, SCHEDULED_LABEL
from controllers.shared.names import CLUSTER_LABEL
from valkey_operator.api.resources import VALKEY_BACKUPS, VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.clock import rfc3339
from valkey_operator.core.events import EventRecorder
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request
from valkey_operator.core.resource import EVENTS, SECRETS
from valkey_operator.core.rest import Obj
from valkey_testbed import objectstore as testbed_store
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS
from valkey_testbed.wait import NotYet, eventually

ObjectStoreServer = testbed_store.ObjectStoreServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240), pytest.mark.usefixtures("valkey_crds")]

CLUSTER = "cache"


@pytest_asyncio.fixture
async def schedule_controller(kube_api: k8s.ApiClient, namespace: str) -> AsyncIterator[Manager]:
    manager = Manager(
        kube_api,
        field_manager="valkey-operator",
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    setup(manager, ReferenceIndex.install(manager), 1, ControllerOptions(backup_endpoints=TEST_BED_ENDPOINTS))
    task = asyncio.create_task(manager.run())
    await eventually(manager.ready, "the schedule controller ready", 30, interval=0.05)
    yield manager
    manager.stop()
    await asyncio.wait_for(task, 60)


def destination(server: ObjectStoreServer, bucket: str) -> Obj:
    return {"endpoint": server.endpoint, "bucket": bucket, "path": "nightly", "credentialsSecretName": "s3"}


async def credentials_secret(kube: Client, namespace: str, server: ObjectStoreServer, secret: str) -> None:
    await credentials_secret_named(kube, namespace, server, "s3", secret)


async def credentials_secret_named(
    kube: Client, namespace: str, server: ObjectStoreServer, name: str, secret: str
) -> None:
    data = {"AWS_ACCESS_KEY_ID": server.access_key_id, "AWS_SECRET_ACCESS_KEY": secret}
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    await kube.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": encoded,
        },
    )


def cluster(namespace: str, backup: Obj) -> Obj:
    """A cluster whose config does not exist: it runs no pod, which the schedule does not need."""
    return {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": CLUSTER, "namespace": namespace},
        "spec": {"configRef": "absent", "shards": 1, "replicasPerShard": 0, "backup": backup},
    }


async def arrange_backup(
    kube: Client, server: ObjectStoreServer, namespace: str, bucket: str, fire: float, phase: str
) -> str:
    """A scheduled ValkeyBackup of an earlier fire time in phase, with its two objects in the bucket."""
    name = backup_name(CLUSTER, fire)
    await kube.create(
        VALKEY_BACKUPS,
        {
            "apiVersion": VALKEY_BACKUPS.api_version,
            "kind": VALKEY_BACKUPS.kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {CLUSTER_LABEL: CLUSTER, SCHEDULED_LABEL: "true"},
                "annotations": {SCHEDULED_AT_ANNOTATION: rfc3339(fire)},
            },
            "spec": {"clusterName": CLUSTER, "destination": destination(server, bucket)},
        },
    )
    await kube.patch_status(VALKEY_BACKUPS, name, {"status": {"phase": phase}}, namespace)
    root = server.client()
    for part in ("shard-0.rdb", "manifest.json"):
        root.put_object(Bucket=bucket, Key=f"nightly/{namespace}/{CLUSTER}/{name}/{part}", Body=b"x")
    return name


def objects(server: ObjectStoreServer, bucket: str, namespace: str, name: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=bucket, Prefix=f"nightly/{namespace}/{CLUSTER}/{name}/")
    return sorted(item["Key"].rsplit("/", 1)[1] for item in listed.get("Contents", []))


async def backup_names(kube: Client, namespace: str) -> list[str]:
    found = await kube.list(VALKEY_BACKUPS, namespace, label_selector=f"{SCHEDULED_LABEL}=true")
    return sorted(backup["metadata"]["name"] for backup in found)


async def event(kube: Client, namespace: str, reason: str) -> Obj:
    async def found() -> Obj | NotYet:
        events = await kube.list(EVENTS, namespace)
        matching = [e for e in events if e.get("reason") == reason and e["regarding"]["name"] == CLUSTER]
        return matching[0] if matching else NotYet([e.get("reason") for e in events])

    return await eventually(found, f"an Event {reason} on the cluster", 60, interval=0.2)


def created_at(obj: Obj) -> float:
    return datetime.datetime.fromisoformat(obj["metadata"]["creationTimestamp"]).timestamp()


def day(days_ago: int) -> float:
    today = datetime.datetime.now(datetime.UTC).replace(hour=3, minute=0, second=0, microsecond=0)
    return (today - datetime.timedelta(days=days_ago)).timestamp()


async def test_a_schedule_creates_one_backup_named_after_its_fire_time_and_owned_by_the_cluster(
    schedule_controller: Manager, kube: Client, namespace: str, object_store: ObjectStoreServer
) -> None:
    bucket = object_store.create_bucket()
    await credentials_secret(kube, namespace, object_store, object_store.secret_access_key)
    backup = {"schedule": "* * * * *", "keep": 2, "destination": destination(object_store, bucket)}
    created = await kube.create(VALKEY_CLUSTERS, cluster(namespace, backup))

    async def one() -> list[str] | NotYet:
        names = await backup_names(kube, namespace)
        return names if names else NotYet(names)

    # The first fire time after the cluster's creation: the next minute.
    (name,) = await eventually(one, "a scheduled ValkeyBackup", 75, interval=0.2)
    made = await kube.get(VALKEY_BACKUPS, name, namespace)
    fire = datetime.datetime.fromisoformat(made["metadata"]["annotations"][SCHEDULED_AT_ANNOTATION])
    assert name == backup_name(CLUSTER, fire.timestamp())
    assert created_at(created) < fire.timestamp() <= time.time()
    assert made["metadata"]["labels"] == {CLUSTER_LABEL: CLUSTER, SCHEDULED_LABEL: "true"}
    assert "ownerReferences" not in made["metadata"], "not owned: a deleted cluster keeps its backups"
    assert made["spec"] == {"clusterName": CLUSTER, "destination": destination(object_store, bucket)}
    assert name in (await event(kube, namespace, "BackupScheduled"))["note"]
    # It stays Pending (no backup controller runs here): later passes, whatever the minute, make none.
    for keep in (3, 4):
        patch = {"spec": {"backup": {**backup, "keep": keep}}}
        await kube.patch(VALKEY_CLUSTERS, CLUSTER, patch, namespace)
        await asyncio.sleep(1.5)
        assert await backup_names(kube, namespace) == [name]


async def test_retention_deletes_the_oldest_completed_backups_with_their_objects(
    schedule_controller: Manager, kube: Client, namespace: str, object_store: ObjectStoreServer
) -> None:
    bucket = object_store.create_bucket()
    await credentials_secret(kube, namespace, object_store, object_store.secret_access_key)
    oldest = await arrange_backup(kube, object_store, namespace, bucket, day(4), "Completed")
    running = await arrange_backup(kube, object_store, namespace, bucket, day(3), "Running")
    older = await arrange_backup(kube, object_store, namespace, bucket, day(2), "Completed")
    newest = await arrange_backup(kube, object_store, namespace, bucket, day(1), "Completed")
    backup = {"schedule": "0 3 * * *", "keep": 1, "destination": destination(object_store, bucket)}
    await kube.create(VALKEY_CLUSTERS, cluster(namespace, backup))

    async def retired() -> list[str] | NotYet:
        names = await backup_names(kube, namespace)
        return names if names == sorted([running, newest]) else NotYet(names)

    await eventually(retired, "the two oldest Completed backups deleted", 60, interval=0.2)
    assert objects(object_store, bucket, namespace, oldest) == []
    assert objects(object_store, bucket, namespace, older) == []
    assert objects(object_store, bucket, namespace, newest) == ["manifest.json", "shard-0.rdb"]
    assert objects(object_store, bucket, namespace, running) == ["manifest.json", "shard-0.rdb"]

    async def announced() -> list[str] | NotYet:
        events = await kube.list(EVENTS, namespace)
        notes = sorted(e["note"] for e in events if e.get("reason") == "BackupDeleted")
        return notes if len(notes) == 2 else NotYet(notes)

    first, second = await eventually(announced, "a BackupDeleted Event per deleted backup", 30, interval=0.2)
    assert oldest in first + second and older in first + second


async def test_a_store_refusing_the_credentials_keeps_the_backup_and_says_why(
    schedule_controller: Manager, kube: Client, namespace: str, object_store: ObjectStoreServer
) -> None:
    bucket = object_store.create_bucket()
    await credentials_secret(kube, namespace, object_store, "not-the-secret")
    old = await arrange_backup(kube, object_store, namespace, bucket, day(2), "Completed")
    new = await arrange_backup(kube, object_store, namespace, bucket, day(1), "Completed")
    backup = {"schedule": "0 3 * * *", "keep": 1, "destination": destination(object_store, bucket)}
    await kube.create(VALKEY_CLUSTERS, cluster(namespace, backup))

    failed = await event(kube, namespace, "RetentionFailed")
    assert failed["type"] == "Warning"
    assert old in failed["note"] and "CredentialsRejected" in failed["note"]
    assert "not-the-secret" not in failed["note"]
    assert await backup_names(kube, namespace) == sorted([old, new])
    assert objects(object_store, bucket, namespace, old) == ["manifest.json", "shard-0.rdb"]


async def test_archive_retention_keeps_what_the_window_needs_and_drops_departed_nodes(
    kube: Client, namespace: str, object_store: ObjectStoreServer
) -> None:
    """The reconciler itself with a clock 48 h ahead of the bucket's: everything stored so far is
    older than a 24h window. A node in the cluster keeps its newest sequence (the base a restore at
    the window's start replays from) and loses the older ones; a node gone from the cluster goes
    whole; a node that is back in the cluster is never dropped whole; of the topology records, the
    one in force at the window's start stays. Storage that refuses the
    credentials is an ArchiveRetentionFailed Event, and nothing is deleted."""
    bucket = object_store.create_bucket()
    await credentials_secret(kube, namespace, object_store, object_store.secret_access_key)
    s3 = object_store.client()
    folder = f"nightly/{namespace}/{CLUSTER}/archive"
    live, gone = "a" * 40, "b" * 40
    for node in (live, gone):
        for seq in (1, 2, 3):
            for part in (f"{seq:010d}/base", f"{seq:010d}/incr/{0:016d}"):
                s3.put_object(Bucket=bucket, Key=f"{folder}/{node}/{part}", Body=b"x")
        s3.put_object(Bucket=bucket, Key=f"{folder}/{node}/progress.json", Body=b"{}")
    for record in ("001790000000.json", "001790000030.json"):  # both stored before the window
        s3.put_object(Bucket=bucket, Key=f"{folder}/topology/{record}", Body=b"{}")
    backup = {
        "schedule": "0 3 * * *",
        "keep": 1,
        "destination": destination(object_store, bucket),
        "pointInTime": {"retention": "24h"},
    }
    await kube.create(VALKEY_CLUSTERS, cluster(namespace, backup))
    nodes = {"status": {"nodes": [{"pod": "cache-0-abcde", "shard": 0, "nodeId": live}]}}
    stored = await kube.patch_status(VALKEY_CLUSTERS, CLUSTER, nodes, namespace)
    recorder = EventRecorder(kube, "test", "test")

    def reconciler(obj: Obj) -> BackupScheduleReconciler:
        return BackupScheduleReconciler(
            kube,
            recorder,
            lambda _namespace, _name: obj,
            lambda _namespace, _cluster: [],
            lambda _namespace, _backup: False,
            lambda: time.time() + 48 * 3600,
            TEST_BED_ENDPOINTS,
        )

    def left() -> list[str]:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=folder + "/").get("Contents", [])
        return sorted(item["Key"][len(folder) + 1 :] for item in listed)

    before = left()
    await credentials_secret_named(kube, namespace, object_store, "wrong", "not-the-secret")
    wrong = {**destination(object_store, bucket), "credentialsSecretName": "wrong"}
    refused = {**backup, "destination": wrong}
    result = await reconciler({**stored, "spec": {**stored["spec"], "backup": refused}}).reconcile(
        Request(CLUSTER, namespace)
    )
    assert 0 < (result.requeue_after or 0) <= RETRY_SECONDS
    assert (await event(kube, namespace, "ArchiveRetentionFailed"))["note"].startswith("object storage: ")
    assert left() == before, "a refused store deletes nothing"

    result = await reconciler(stored).reconcile(Request(CLUSTER, namespace))
    assert result.requeue_after is not None and result.requeue_after <= ARCHIVE_RETENTION_EVERY_S
    assert left() == [
        f"{live}/0000000003/base",
        f"{live}/0000000003/incr/{0:016d}",
        f"{live}/progress.json",
        "topology/001790000030.json",
    ]
