"""What the node alerts need on the test bed: a Valkey cluster that is not a cache filled to its
maxmemory, a replica whose link to its primary is broken, and load (hits and misses) on a primary.

Real servers only: the cluster is a ValkeyCluster the operator runs; the writes, the broken link
and the load go through the cluster's own admin credentials to the pods' IPs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from cluster_support import NODE_TIMEOUT_MS, Catalog, admin_client, owned_pods, superuser_client

from valkey_operator.api.resources import VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import (
    AdminClient,
    ValkeyAdminError,
    ValkeyCommandError,
    parse_info,
    text_of,
)

STORE_MAXMEMORY = 16 * 1024 * 1024
"""maxmemory of the store cluster: small, so filling it takes a second."""
VALUE = "v" * 8192


async def store_config(catalog: Catalog, name: str, image_ref: str) -> str:
    """A ValkeyConfig of a store, not a cache: maxmemory-policy noeviction and a small maxmemory."""
    spec = {
        "imageRef": image_ref,
        "valkey": {
            "cluster-node-timeout": NODE_TIMEOUT_MS,
            "maxmemory": str(STORE_MAXMEMORY),
            "maxmemory-policy": "noeviction",
        },
    }
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": catalog(name)}, "spec": spec})
    return str(catalog(name))


async def roles(kube: Client, namespace: str, cluster: str) -> dict[str, tuple[str, str]]:
    """Pod name -> (INFO role, pod IP) as each node says."""
    admin = await admin_client(kube, namespace, cluster)
    found = {}
    for pod in await owned_pods(kube, namespace, cluster):
        ip = pod["status"]["podIP"]
        async with admin.connect(ip) as node:
            role = str((await node.info("replication"))["role"])
            found[pod["metadata"]["name"]] = (role, ip)
    return found


async def fill(admin: AdminClient, ip: str) -> int:
    """Write 8 KiB values into the primary at ip until it refuses with OOM (noeviction); keys written."""
    written = 0
    async with superuser_client(admin.ca_pem).connect(ip) as node:
        for batch in range(STORE_MAXMEMORY // len(VALUE) // 50 + 10):
            keys = [f"{{fill}}{batch}-{index}" for index in range(50)]
            replies = await node.pipeline(*(("SET", key, VALUE) for key in keys))
            written += sum(1 for reply in replies if not isinstance(reply, ValkeyAdminError))
            # valkey-py drops the OOM prefix: "command not allowed when used memory > 'maxmemory'".
            if any(isinstance(reply, ValkeyCommandError) and "maxmemory" in str(reply) for reply in replies):
                return written
    raise AssertionError(f"{ip} took {written} keys without refusing a write: maxmemory is not set")


async def memory_ratio(admin: AdminClient, ip: str) -> float:
    async with admin.connect(ip) as node:
        info = parse_info(text_of(await node.command("INFO", "memory")))
    return int(info["used_memory"]) / int(info["maxmemory"])


async def break_link(admin: AdminClient, ip: str) -> None:
    """A replica that can no longer authenticate to its primary: master_link_status stays down."""
    async with superuser_client(admin.ca_pem).connect(ip) as node:
        await node.command("CONFIG", "SET", "primaryauth", "not-the-password")
        await node.command("CLIENT", "KILL", "TYPE", "master")


async def link_status(admin: AdminClient, ip: str) -> str:
    async with admin.connect(ip) as node:
        return str((await node.info("replication")).get("master_link_status", ""))


@contextlib.asynccontextmanager
async def load(admin: AdminClient, ip: str) -> AsyncIterator[list[int]]:
    """Reads on the primary at ip for the with-block: hits on the filled keys and misses on others.
    Yields [commands sent]."""
    sent = [0]

    async def run() -> None:
        async with superuser_client(admin.ca_pem).connect(ip) as node:
            while True:
                commands = [("GET", f"{{fill}}0-{index % 50}") for index in range(20)]
                commands += [("GET", f"{{fill}}missing-{index}") for index in range(10)]
                await node.pipeline(*commands)
                sent[0] += len(commands)
                await asyncio.sleep(0.05)

    task = asyncio.create_task(run())
    try:
        yield sent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ValkeyAdminError):
            await task
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise AssertionError(f"the load stopped: {task.exception()}")


def ready_ips(pods: list[Obj]) -> dict[str, str]:
    return {p["metadata"]["name"]: p["status"]["podIP"] for p in pods if p.get("status", {}).get("podIP")}
