"""What the backup end-to-end tests share: storage credentials, backups and restores, and keys
written and read back through the valkey-py cluster client (the way applications meet the data)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping

from repair_support import primary_of
from valkey.asyncio.cluster import ValkeyCluster

from valkey_operator.api.resources import ADMIN_USER, VALKEY_BACKUPS, VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.testing.objectstore import ObjectStoreServer
from valkey_operator.testing.wait import NotYet, eventually

FINAL = {"Completed", "Failed"}
MAX_LOAD_KEYS = 20000
"""The writer under a backup stops after this many keys (every load loop is bounded)."""


async def read_back(
    status: Obj, password: str, keys: Mapping[bytes, bytes], ca_pem: str | None = None
) -> list[bytes]:
    """The keys the valkey-py cluster client cannot read back as written."""
    client = cluster_client(status, password, ca_pem)
    missing = []
    try:
        items = list(keys.items())
        for start in range(0, len(items), 500):
            batch = items[start : start + 500]
            values = await client.mget_nonatomic([key for key, _ in batch])
            missing += [key for (key, value), got in zip(batch, values, strict=True) if got != value]
    finally:
        await client.aclose()
    return missing


async def storage_secret(
    kube: Client, namespace: str, store: ObjectStoreServer, name: str = "s3", secret: str | None = None
) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {
            "AWS_ACCESS_KEY_ID": store.access_key_id,
            "AWS_SECRET_ACCESS_KEY": secret if secret is not None else store.secret_access_key,
        },
    }
    await kube.create(SECRETS, body)
    return name


def destination(store: ObjectStoreServer, bucket: str, secret: str = "s3", **extra: str) -> Obj:
    return {"endpoint": store.endpoint, "bucket": bucket, "credentialsSecretName": secret, **extra}


async def start_backup(kube: Client, namespace: str, name: str, cluster: str, where: Obj) -> None:
    body = {
        "apiVersion": VALKEY_BACKUPS.api_version,
        "kind": VALKEY_BACKUPS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterName": cluster, "destination": where},
    }
    await kube.create(VALKEY_BACKUPS, body)


async def finished(kube: Client, namespace: str, name: str, timeout: float = 240.0) -> Obj:
    """The backup's status once Completed or Failed."""

    async def done() -> Obj | NotYet:
        backup = await kube.get(VALKEY_BACKUPS, name, namespace)
        status: Obj = backup.get("status") or {}
        return status if status.get("phase") in FINAL else NotYet(status)

    return await eventually(done, f"ValkeyBackup {name} finished", timeout)


async def restore_cluster(
    kube: Client, namespace: str, name: str, config: str, backup: str, shards: int, replicas: int
) -> None:
    """A ValkeyCluster created with spec.restore (restore is set at creation only)."""
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "configRef": config,
            "shards": shards,
            "replicasPerShard": replicas,
            "restore": {"backupName": backup},
        },
    }
    await kube.create(VALKEY_CLUSTERS, body)


def cluster_client(status: Obj, password: str, ca_pem: str | None = None) -> ValkeyCluster:
    """The valkey-py cluster client as the admin user (over TLS, verifying ca_pem, when given)."""
    node = primary_of(status, 0)
    tls: dict[str, object] = {}
    if ca_pem is not None:
        tls = {"ssl": True, "ssl_ca_data": ca_pem, "ssl_check_hostname": False}
    return ValkeyCluster(host=node["ip"], port=6379, username=ADMIN_USER, password=password, **tls)  # type: ignore[arg-type]


async def write(status: Obj, password: str, keys: Mapping[bytes, bytes], ca_pem: str | None = None) -> None:
    """keys written through the valkey-py cluster client (each acknowledged by its primary)."""
    client = cluster_client(status, password, ca_pem)
    try:
        items = list(keys.items())
        for start in range(0, len(items), 500):
            await client.mset_nonatomic(dict(items[start : start + 500]))
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def writing(status: Obj, password: str, prefix: str) -> AsyncIterator[dict[bytes, bytes]]:
    """A valkey-py cluster client writing keys one by one until the block ends (at most
    MAX_LOAD_KEYS); yields the keys acknowledged so far."""
    acknowledged: dict[bytes, bytes] = {}
    client = cluster_client(status, password)

    async def run() -> None:
        for index in range(MAX_LOAD_KEYS):
            key, value = f"{prefix}:{index}".encode(), f"v{index}:{time.time()}".encode()
            await client.set(key, value)
            acknowledged[key] = value
            await asyncio.sleep(0.005)

    task = asyncio.create_task(run())
    try:
        yield acknowledged
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


def keys_of(prefix: str, count: int) -> dict[bytes, bytes]:
    return {f"{prefix}:{i}".encode(): f"value-{i}-{'x' * (i % 64)}".encode() for i in range(count)}
