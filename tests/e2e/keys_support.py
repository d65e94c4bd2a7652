"""Keys written and read back through the valkey-py cluster client, the way applications meet the
data (as the tests' SUPERUSER, a spec.acl user; over TLS, verifying the cluster's CA, when given one)."""

from __future__ import annotations

from collections.abc import Mapping

from cluster_support import SUPERUSER, SUPERUSER_PASSWORD
from repair_support import primary_of
from valkey.asyncio.cluster import ValkeyCluster

from valkey_operator.core.rest import Obj


def cluster_client(status: Obj, ca_pem: str | None = None) -> ValkeyCluster:
    """The valkey-py cluster client as SUPERUSER (over TLS, verifying ca_pem, when given)."""
    node = primary_of(status, 0)
    tls: dict[str, object] = {}
    if ca_pem is not None:
        tls = {"ssl": True, "ssl_ca_data": ca_pem, "ssl_check_hostname": False}
    return ValkeyCluster(host=node["ip"], port=6379, username=SUPERUSER, password=SUPERUSER_PASSWORD, **tls)  # type: ignore[arg-type]


async def write(status: Obj, keys: Mapping[bytes, bytes], ca_pem: str | None = None) -> None:
    """keys written through the valkey-py cluster client (each acknowledged by its primary)."""
    client = cluster_client(status, ca_pem)
    try:
        items = list(keys.items())
        for start in range(0, len(items), 500):
            await client.mset_nonatomic(dict(items[start : start + 500]))
    finally:
        await client.aclose()


async def read_back(status: Obj, keys: Mapping[bytes, bytes], ca_pem: str | None = None) -> list[bytes]:
    """The keys the valkey-py cluster client cannot read back as written."""
    client = cluster_client(status, ca_pem)
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


def keys_of(prefix: str, count: int) -> dict[bytes, bytes]:
    return {f"{prefix}:{i}".encode(): f"value-{i}-{'x' * (i % 64)}".encode() for i in range(count)}
