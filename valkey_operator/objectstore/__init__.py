"""The operator's client layer for S3-compatible object storage (backups and restores).

It knows buckets, keys and streams, not Valkey nor Kubernetes: controllers
call it, it imports nothing of theirs. Public names: `open_store` and the
`ObjectStore` it yields (store.py), `Destination`, `S3Credentials`,
`Uploaded` (model.py), and `StorageError` with its `reason` (errors.py).
"""

from __future__ import annotations

from valkey_operator.objectstore.errors import StorageError
from valkey_operator.objectstore.model import Destination, S3Credentials, Uploaded
from valkey_operator.objectstore.store import ObjectStore, open_store

__all__ = ["Destination", "ObjectStore", "S3Credentials", "StorageError", "Uploaded", "open_store"]
