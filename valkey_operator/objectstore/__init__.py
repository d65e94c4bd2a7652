"""The operator's client layer for S3-compatible object storage (backups and restores).

It knows buckets, keys and streams, not Valkey nor Kubernetes: controllers
call it, it imports nothing of theirs. Public names: `open_store` and the
`ObjectStore` it yields (store.py), `Destination`, `S3Credentials`,
`Uploaded` (model.py), `EndpointPolicy` with `REFUSE_LOCAL` and `ANY_ADDRESS`
(endpoints.py: which addresses an endpoint may be at), and `StorageError`
with its `reason`, and `ObjectTooLarge` (errors.py).
"""

from __future__ import annotations

from valkey_operator.objectstore.endpoints import ANY_ADDRESS, REFUSE_LOCAL, EndpointPolicy
from valkey_operator.objectstore.errors import ObjectTooLarge, StorageError
from valkey_operator.objectstore.model import Destination, S3Credentials, Uploaded
from valkey_operator.objectstore.store import ObjectStore, open_store

__all__ = [
    "ANY_ADDRESS",
    "REFUSE_LOCAL",
    "Destination",
    "EndpointPolicy",
    "ObjectStore",
    "ObjectTooLarge",
    "S3Credentials",
    "StorageError",
    "Uploaded",
    "open_store",
]
