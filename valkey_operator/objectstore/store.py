"""The operator's S3 client: one bucket and key prefix, bounded timeouts, errors as StorageError.

Built on aiobotocore (botocore's request signing, retries and S3 quirks, on
asyncio), never on hand-signed requests. Every request is path-style (the
bucket in the path, so any host:port works), retried at most once, and
bounded by the timeout given to `open_store`, so an unreachable endpoint
fails in seconds rather than botocore's default minutes. Checksums are sent
and validated only where an operation requires them (`when_required`):
botocore's default since 1.36 (a CRC on every upload) is refused by several
S3-compatible services (boto/boto3#4392), and `upload` keeps its own sha256
of every object, which `download` verifies end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from valkey_operator.objectstore import transfer
from valkey_operator.objectstore.endpoints import EndpointPolicy, guarded_socket
from valkey_operator.objectstore.errors import ObjectTooLarge, StorageError, classify
from valkey_operator.objectstore.model import Destination, S3Credentials, Uploaded, object_key

T = TypeVar("T")

DELETE_BATCH = 1000
"""DeleteObjects takes at most 1000 keys."""


class ObjectStore:
    """One destination opened with one credential (see open_store); every method raises StorageError."""

    def __init__(self, client: Any, destination: Destination, timeout: float) -> None:
        self._client = client
        self.destination = destination
        self._timeout = timeout

    @property
    def bucket(self) -> str:
        return self.destination.bucket

    def key(self, *parts: str) -> str:
        """destination.path joined with parts by "/", no leading "/"."""
        return object_key(self.destination.path, *parts)

    async def _call(
        self, operation: str, call: Callable[[], Awaitable[T]], *, bucket_operation: bool = False
    ) -> T:
        """One small request, bounded as a whole (transfer.request_deadline), its failure classified."""
        try:
            async with asyncio.timeout(transfer.request_deadline(self._timeout)):
                return await call()
        except Exception as exc:
            raise classify(exc, operation, bucket_operation=bucket_operation) from exc

    async def check(self) -> None:
        """The endpoint answers, the credentials are accepted and the bucket exists.

        A one-key ListObjectsV2 under the destination's path rather than a HeadBucket: HEAD answers
        carry no error body, and some servers (versitygw) answer an unknown access key with a bare
        404 there, the same as a missing bucket. It needs the ListBucket permission HeadBucket needs.
        """
        prefix = self.key()
        await self._call(
            f"ListObjectsV2 {self.bucket}/{prefix}",
            lambda: self._client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1),
            bucket_operation=True,
        )

    async def upload(
        self, key: str, chunks: AsyncIterable[bytes], part_size: int = transfer.PART_SIZE
    ) -> Uploaded:
        """Stream chunks to key (multipart beyond one part), never holding more than about one part;
        the sha256 is computed on the way. A failure or cancellation aborts the multipart upload."""
        return await transfer.upload(self._client, self.bucket, key, chunks, part_size, self._call)

    async def download(self, key: str, target: Path, sha256: str | None) -> int:
        """Stream key to target (through target.partial, fsynced, renamed into place) and return
        its length; ChecksumMismatch, and no target, when its sha256 is not the one given."""
        return await transfer.download(self._client, self.bucket, key, target, sha256, self._timeout)

    async def put_json(self, key: str, document: Any) -> None:
        """Store document as indented JSON (manifests are read by people too)."""
        body = json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"
        await self._call(
            f"PutObject {self.bucket}/{key}",
            lambda: self._client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType="application/json"
            ),
        )

    async def get_json(self, key: str, max_bytes: int) -> Any:
        """The JSON document at key; ObjectMissing when absent, StorageFailed when not JSON, and
        ObjectTooLarge when longer than max_bytes. The bucket may belong to anyone: never more than
        max_bytes (plus one chunk) is held, whatever Content-Length says."""
        operation = f"GetObject {self.bucket}/{key}"

        async def get() -> bytes:
            response = await self._client.get_object(Bucket=self.bucket, Key=key)
            async with response["Body"] as body:
                said = int(response.get("ContentLength") or 0)
                if said > max_bytes:
                    raise ObjectTooLarge(
                        f"{operation}: {said} bytes, more than the {max_bytes} bytes allowed"
                    )
                data = bytearray()
                while chunk := await body.read(min(transfer.DOWNLOAD_CHUNK, max_bytes + 1 - len(data))):
                    data += chunk
                    if len(data) > max_bytes:
                        raise ObjectTooLarge(f"{operation}: more than the {max_bytes} bytes allowed")
            return bytes(data)

        data = await self._call(operation, get)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise StorageError("StorageFailed", f"{operation}: not a JSON document: {exc}") from exc

    async def exists(self, key: str) -> bool:
        return await self.stored_at(key) is not None

    async def stored_at(self, key: str) -> float | None:
        """When key was written (Unix seconds), None when it does not exist: the first key listed
        from key on is key itself. A listing, not a HeadObject, whose body-less 404 would turn an
        unknown access key into "absent" (see check)."""
        page = await self._call(
            f"ListObjectsV2 {self.bucket}/{key}",
            lambda: self._client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1),
            bucket_operation=True,
        )
        found = [item for item in page.get("Contents", []) if item["Key"] == key]
        return found[0]["LastModified"].timestamp() if found else None

    async def list_folders(self, prefix: str) -> list[str]:
        """The names of the folders right under prefix (taken as a folder), in the store's order:
        one listing page per thousand folders, however many objects they hold."""
        folder = prefix.strip("/") + "/"
        names: list[str] = []
        token: dict[str, str] = {}
        while True:
            page = await self._call(
                f"ListObjectsV2 {self.bucket}/{folder}",
                functools.partial(
                    self._client.list_objects_v2, Bucket=self.bucket, Prefix=folder, Delimiter="/", **token
                ),
                bucket_operation=True,
            )
            names += [item["Prefix"][len(folder) :].rstrip("/") for item in page.get("CommonPrefixes", [])]
            if not page.get("IsTruncated"):
                return names
            token = {"ContinuationToken": page["NextContinuationToken"]}

    async def list_objects(self, prefix: str) -> list[tuple[str, int]]:
        """Every object under prefix, taken as a folder as delete_prefix takes it: (key, size), in
        the store's key order."""
        return [(key, size) for key, size, _ in await self.list_dated(prefix)]

    async def list_dated(self, prefix: str) -> list[tuple[str, int, float]]:
        """list_objects with each object's LastModified (Unix seconds): when it was written."""
        folder = prefix.strip("/") + "/"
        found: list[tuple[str, int, float]] = []
        token: dict[str, str] = {}
        while True:
            page = await self._call(
                f"ListObjectsV2 {self.bucket}/{folder}",
                functools.partial(self._client.list_objects_v2, Bucket=self.bucket, Prefix=folder, **token),
                bucket_operation=True,
            )
            found += [
                (item["Key"], int(item["Size"]), item["LastModified"].timestamp())
                for item in page.get("Contents", [])
            ]
            if not page.get("IsTruncated"):
                return found
            token = {"ContinuationToken": page["NextContinuationToken"]}

    async def delete(self, key: str) -> None:
        """Delete one object (absent already: nothing to do, as S3 answers)."""
        await self._call(
            f"DeleteObject {self.bucket}/{key}",
            functools.partial(self._client.delete_object, Bucket=self.bucket, Key=key),
        )

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object under prefix, taken as a folder ("a/b" deletes "a/b/..." but not
        "a/bc"), and return how many; an empty prefix is refused (it would empty the bucket)."""
        folder = prefix.strip("/")
        if not folder:
            raise ValueError("delete_prefix needs a non-empty prefix")
        folder += "/"
        deleted = 0
        while True:
            page = await self._call(
                f"ListObjectsV2 {self.bucket}/{folder}",
                lambda: self._client.list_objects_v2(Bucket=self.bucket, Prefix=folder, MaxKeys=DELETE_BATCH),
                bucket_operation=True,
            )
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if not keys:
                return deleted
            answer = await self._call(
                f"DeleteObjects {self.bucket}/{folder}",
                functools.partial(
                    self._client.delete_objects, Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True}
                ),
            )
            if errors := answer.get("Errors"):
                first = errors[0]
                raise StorageError(
                    "StorageFailed",
                    f"DeleteObjects {self.bucket}/{folder}: {len(errors)} not deleted, "
                    f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}",
                )
            deleted += len(keys)


@contextlib.contextmanager
def _ca_file(ca_pem: str | None) -> Iterator[str | None]:
    """botocore verifies against a CA file path only, and the operator's image runs on a read-only
    root with no writable /tmp: the PEM lives in an anonymous in-memory file (memfd), named by its
    /proc/self/fd path while the store is open (core/memfile.py does the same for the core; this
    layer imports nothing outside objectstore). It is checked here, so a bad CA is a StorageError
    before any request."""
    if ca_pem is None:
        yield None
        return
    try:
        ssl.create_default_context(cadata=ca_pem)
    except (ssl.SSLError, ValueError) as exc:
        raise StorageError("StorageFailed", f"the CA is not a PEM certificate: {exc}") from exc
    descriptor = os.memfd_create("valkey-operator-s3-ca", os.MFD_CLOEXEC)
    try:
        with open(descriptor, "wb", closefd=False) as file:
            file.write(ca_pem.encode())
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)


@contextlib.asynccontextmanager
async def open_store(
    destination: Destination,
    credentials: S3Credentials,
    ca_pem: str | None = None,
    timeout: float = 10.0,
    *,
    endpoints: EndpointPolicy,
) -> AsyncIterator[ObjectStore]:
    """An ObjectStore on destination with credentials, its connections closed on exit.

    endpoints: the addresses the endpoint may be at (endpoints.py), checked on every socket made, so a
    refused one is StorageError EndpointRefused at the first request; every caller states it.

    ca_pem: verify the endpoint's TLS against this CA only; without it, https endpoints are verified
    against botocore's default (AWS_CA_BUNDLE when set, else its bundled CAs). timeout bounds connecting
    and each wait for an answer; a request is tried at most twice.
    """
    config = AioConfig(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"total_max_attempts": transfer.ATTEMPTS, "mode": "standard"},
        s3={"addressing_style": "path"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        user_agent_extra="valkey-operator",
        connector_args={"socket_factory": guarded_socket(endpoints)},
    )
    async with contextlib.AsyncExitStack() as stack:
        ca_path = stack.enter_context(_ca_file(ca_pem))
        try:
            client = await stack.enter_async_context(
                get_session().create_client(
                    "s3",
                    endpoint_url=destination.endpoint,
                    region_name=destination.region,
                    aws_access_key_id=credentials.access_key_id,
                    aws_secret_access_key=credentials.secret_access_key,
                    verify=ca_path,
                    config=config,
                )
            )
        except Exception as exc:  # a malformed endpoint URL (ValueError), or anything else botocore meets
            raise classify(exc, f"endpoint {destination.endpoint!r}") from exc
        yield ObjectStore(client, destination, timeout)
