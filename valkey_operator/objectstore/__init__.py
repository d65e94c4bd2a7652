"""The operator's client layer for S3-compatible object storage (backups and restores).

It knows buckets, keys and streams, not Valkey nor Kubernetes: controllers
call it, it imports nothing of theirs. Public names: `open_store` and the
`ObjectStore` it yields (store.py), `Destination`, `S3Credentials`,
`Uploaded` (model.py), `EndpointPolicy` with `REFUSE_LOCAL` and `ANY_ADDRESS`
(endpoints.py: which addresses an endpoint may be at), and `StorageError`
with its `reason`, and `ObjectTooLarge` (errors.py).

The names load on first use (PEP 562): restore-fetch imports `codes` from
here and must not pay for botocore, which store.py and errors.py import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from valkey_operator.objectstore.endpoints import ANY_ADDRESS, REFUSE_LOCAL, EndpointPolicy
    from valkey_operator.objectstore.errors import ObjectTooLarge, StorageError
    from valkey_operator.objectstore.model import Destination, S3Credentials, Uploaded
    from valkey_operator.objectstore.store import ObjectStore, open_store

_HOMES = {
    "ANY_ADDRESS": "endpoints",
    "REFUSE_LOCAL": "endpoints",
    "EndpointPolicy": "endpoints",
    "ObjectTooLarge": "errors",
    "StorageError": "errors",
    "Destination": "model",
    "S3Credentials": "model",
    "Uploaded": "model",
    "ObjectStore": "store",
    "open_store": "store",
}

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


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
