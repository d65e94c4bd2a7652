"""One error type for every object store failure, with a reason a status or an Event can carry.

Botocore raises a dozen exception types and S3 servers answer with codes
that differ between operations (HeadBucket has no body, so a missing bucket
is a bare 404); `classify` maps them all to the few reasons a user can act
on. Pure: it reads only the exception and what the caller says it was doing.
"""

from __future__ import annotations

import re

import botocore.exceptions

from valkey_operator.objectstore.codes import (
    BUCKET_CODES,
    CREDENTIAL_CODES,
    NOT_FOUND_CODES,
    OBJECT_CODES,
    Reason,
)
from valkey_operator.objectstore.endpoints import refused_in

_MAX_MESSAGE = 300


class StorageError(Exception):
    """An object store operation failed. `reason` is one CamelCase word for status and Events;
    str(error) is one line naming the operation and what the server or network said, never a secret."""

    def __init__(self, reason: Reason, message: str) -> None:
        self.reason: Reason = reason
        line = " ".join(message.split())
        super().__init__(line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 3] + "...")


class ObjectTooLarge(StorageError):
    """An object longer than its reader allows (`get_json`'s max_bytes): read no further. Its reason is
    StorageFailed for a caller that does not tell it apart; a restore does (a manifest refused)."""

    def __init__(self, message: str) -> None:
        super().__init__("StorageFailed", message)


def error_code(exc: botocore.exceptions.ClientError) -> str:
    """The S3 error code of an answer (the HTTP status for a body-less HEAD answer)."""
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return str(error.get("Code") or status or "Unknown")


def classify(exc: BaseException, operation: str, *, bucket_operation: bool = False) -> StorageError:
    """The StorageError for exc raised while doing operation ("HeadBucket my-bucket", ...).

    bucket_operation: the request named only a bucket, so a bare 404 means the bucket is missing
    (otherwise it means the object is).
    """
    if isinstance(exc, StorageError):
        return exc
    if (refused := refused_in(exc)) is not None:
        return StorageError("EndpointRefused", f"{operation}: {refused.explain()}")
    if isinstance(exc, botocore.exceptions.ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message") or ""
        said = f"{operation}: {code}" + (f" ({message})" if message else "")
        if code in CREDENTIAL_CODES:
            return StorageError("CredentialsRejected", f"{said}: the access key or secret was rejected")
        if code in BUCKET_CODES or (bucket_operation and code in NOT_FOUND_CODES):
            return StorageError("BucketMissing", f"{said}: the bucket does not exist")
        if code in OBJECT_CODES or code in NOT_FOUND_CODES:
            return StorageError("ObjectMissing", f"{said}: no such object")
        return StorageError("StorageFailed", said)
    if isinstance(exc, botocore.exceptions.SSLError):
        # botocore's text leads with the URL; OpenSSL's verdict, what a user needs, is deep inside.
        verdict = re.search(r"\[SSL: [A-Z_]+\][^'\"\]]*", str(exc))
        said = verdict.group(0).strip() if verdict else str(exc)
        return StorageError("EndpointUnreachable", f"{operation}: TLS verification failed: {said}")
    if isinstance(
        exc,
        botocore.exceptions.EndpointConnectionError
        | botocore.exceptions.ConnectionError
        | botocore.exceptions.ReadTimeoutError
        | botocore.exceptions.ConnectTimeoutError
        | TimeoutError
        | ConnectionError,
    ):
        return StorageError("EndpointUnreachable", f"{operation}: {type(exc).__name__}: {exc}")
    if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError):
        return StorageError("CredentialsRejected", f"{operation}: incomplete credentials")
    return StorageError("StorageFailed", f"{operation}: {type(exc).__name__}: {exc}")
