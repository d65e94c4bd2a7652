"""What the backup end-to-end tests share: storage credentials, backups and restores, and keys
written and read back through the valkey-py cluster client (the way applications meet the data)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from cluster_support import create_cluster
from keys_support import cluster_client

from valkey_operator.api.resources import VALKEY_BACKUPS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.wait import NotYet, eventually

FINAL = {"Completed", "Failed"}
MAX_LOAD_KEYS = 20000
"""The writer under a backup stops after this many keys (every load loop is bounded)."""


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


async def start_backup(
    kube: Client, namespace: str, name: str, cluster: str, where: Obj, **spec: str
) -> None:
    body = {
        "apiVersion": VALKEY_BACKUPS.api_version,
        "kind": VALKEY_BACKUPS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterName": cluster, "destination": where, **spec},
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
    kube: Client, namespace: str, name: str, config: str, backup: str, shards: int, replicas: int, **spec: Obj
) -> None:
    """A ValkeyCluster created with spec.restore (restore is set at creation only)."""
    await create_cluster(
        kube, namespace, name, config, shards, replicas, restore={"backupName": backup}, **spec
    )


@contextlib.asynccontextmanager
async def writing(status: Obj, prefix: str) -> AsyncIterator[dict[bytes, bytes]]:
    """A valkey-py cluster client writing keys one by one until the block ends (at most
    MAX_LOAD_KEYS); yields the keys acknowledged so far."""
    acknowledged: dict[bytes, bytes] = {}
    client = cluster_client(status)

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
