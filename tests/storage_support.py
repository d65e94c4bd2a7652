"""A tenant's storage Secret for the test bed's S3 server, as integration tests set it up."""

from __future__ import annotations

from valkey_operator.api.destination_keys import CREDENTIAL_KEYS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_testbed.objectstore import ObjectStoreServer


async def storage_secret(kube: Client, namespace: str, server: ObjectStoreServer, name: str = "s3") -> str:
    """A Secret named name holding server's credentials under the keys a destination reads."""
    values = (server.access_key_id, server.secret_access_key)
    await kube.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": dict(zip(CREDENTIAL_KEYS, values, strict=True)),
        },
    )
    return name
