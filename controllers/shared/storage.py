"""Where a backup goes, and with which credentials: spec.destination and its Secrets, read when needed.

The Secrets are read with one GET when a backup runs or a restore starts (not
a hot path, and a user's Secret need not be in the operator's cache). Their
values never reach a log, a status or an Event: only the Secret's name and
which key is missing do.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import AsyncIterator

import attrs

from valkey_operator.api.destination_keys import CA_KEY, CREDENTIAL_KEYS, DEFAULT_REGION
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import (
    Destination,
    EndpointPolicy,
    ObjectStore,
    S3Credentials,
    StorageError,
    open_store,
)

ACCESS_KEY_ID, SECRET_ACCESS_KEY = CREDENTIAL_KEYS


@attrs.frozen(kw_only=True)
class StorageAccess:
    destination: Destination
    credentials: S3Credentials
    ca_pem: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class AccessProblem:
    """The destination cannot be used as written: a reason word and a message without secrets."""

    reason: str
    message: str


def destination_of(spec: Obj) -> Destination:
    """spec.destination (a backup's, or a cluster's spec.backup) as the object store reads it."""
    return Destination(
        endpoint=str(spec["endpoint"]),
        bucket=str(spec["bucket"]),
        path=str(spec.get("path") or "").strip("/"),
        region=str(spec.get("region") or DEFAULT_REGION),
    )


async def storage_access(client: Client, namespace: str, spec: Obj) -> StorageAccess | AccessProblem:
    """The destination with its credentials (and CA), or what is missing."""
    name = str(spec.get("credentialsSecretName") or "")
    secret = await client.get_or_none(SECRETS, name, namespace) if name else None
    if secret is None:
        return AccessProblem(
            "CredentialsMissing", f"Secret {namespace}/{name} with the storage credentials not found"
        )
    values = _decoded(secret)
    missing = [key for key in (ACCESS_KEY_ID, SECRET_ACCESS_KEY) if not values.get(key)]
    if missing:
        return AccessProblem("CredentialsMissing", f"Secret {namespace}/{name} has no {' or '.join(missing)}")
    ca_pem: str | None = None
    ca_name = spec.get("caSecretName")
    if ca_name:
        ca_secret = await client.get_or_none(SECRETS, str(ca_name), namespace)
        ca_pem = _decoded(ca_secret).get(CA_KEY) if ca_secret is not None else None
        if not ca_pem:
            return AccessProblem("CaMissing", f"Secret {namespace}/{ca_name} has no {CA_KEY}")
    return StorageAccess(
        destination=destination_of(spec),
        credentials=S3Credentials(
            access_key_id=values[ACCESS_KEY_ID], secret_access_key=values[SECRET_ACCESS_KEY]
        ),
        ca_pem=ca_pem,
    )


def _decoded(secret: Obj) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            found[key] = base64.b64decode(value).decode().strip()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
    for key, value in (secret.get("stringData") or {}).items():
        found[key] = str(value).strip()
    return found


class StoreUnavailable(Exception):
    """A destination that cannot be used as written, or what its store refused: a reason word
    (CredentialsMissing, CaMissing, or a StorageError's) and a message without secrets."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@contextlib.asynccontextmanager
async def destination_store(
    client: Client, namespace: str, spec: Obj, endpoints: EndpointPolicy
) -> AsyncIterator[ObjectStore]:
    """spec's store (a destination), opened with its Secrets' credentials and CA, dialled only where
    endpoints allow; StoreUnavailable for a destination that cannot be used and for a StorageError
    raised in the block."""
    access = await storage_access(client, namespace, spec)
    if isinstance(access, AccessProblem):
        raise StoreUnavailable(access.reason, access.message)
    try:
        async with open_store(
            access.destination, access.credentials, access.ca_pem, endpoints=endpoints
        ) as store:
            yield store
    except StorageError as exc:
        raise StoreUnavailable(exc.reason, str(exc)) from exc
