"""Streaming an object up (multipart) and down (to a file), with the sha256 of its bytes.

An RDB can be larger than the operator's memory, so neither direction ever
holds a whole object: `upload` holds one part (plus less than a chunk of the
next; growing the buffer briefly copies it once) and `download` writes each
chunk as it arrives. Both compute the sha256 on the way. A multipart upload
that fails or is cancelled is aborted, or the store would keep (and bill) its
parts; a download goes to `<target>.partial` and only a complete, verified,
fsynced file is renamed to the target.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
from collections.abc import AsyncIterable, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog

from valkey_operator.objectstore.errors import StorageError, classify
from valkey_operator.objectstore.model import Uploaded

log = structlog.get_logger(__name__)

T = TypeVar("T")

MIB = 1024 * 1024
PART_SIZE = 8 * MIB
"""The default part: S3's minimum is 5 MiB, 10,000 parts of 8 MiB is an 80 GB object."""
MIN_PART_SIZE = 5 * MIB
"""S3 refuses smaller parts, except the last."""
MAX_PARTS = 10_000
DOWNLOAD_CHUNK = 1 * MIB
ATTEMPTS = 2
"""Total attempts per request (one retry): a blip is absorbed, a dead endpoint fails fast."""


def request_deadline(timeout: float) -> float:
    """The bound on one small request: every attempt's timeout and the backoff between (at most 1 s)."""
    return timeout * ATTEMPTS + 2


class Call(Protocol):
    """ObjectStore._call: one small request, bounded, its failure classified."""

    def __call__(
        self, operation: str, call: Callable[[], Awaitable[T]], *, bucket_operation: bool = False
    ) -> Awaitable[T]: ...


async def upload(
    client: Any, bucket: str, key: str, chunks: AsyncIterable[bytes], part_size: int, call: Call
) -> Uploaded:
    """Upload chunks to bucket/key: one PutObject if everything fits in one part, else a multipart
    upload of part_size parts, aborted on any failure (cancellation included)."""
    if part_size < MIN_PART_SIZE:
        raise ValueError(f"part_size {part_size} is below S3's minimum of {MIN_PART_SIZE}")
    where = f"{bucket}/{key}"
    digest = hashlib.sha256()
    total = 0
    buffer = io.BytesIO()
    upload_id: str | None = None
    parts: list[dict[str, Any]] = []

    async def send_part(body: io.BytesIO) -> None:
        nonlocal upload_id
        if upload_id is None:
            created = await call(
                f"CreateMultipartUpload {where}",
                lambda: client.create_multipart_upload(Bucket=bucket, Key=key),
            )
            upload_id = created["UploadId"]
        number = len(parts) + 1
        if number > MAX_PARTS:
            raise StorageError("StorageFailed", f"UploadPart {where}: more than {MAX_PARTS} parts")
        body.seek(0)
        try:
            answer = await client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
            )
        except Exception as exc:
            raise classify(exc, f"UploadPart {where} part {number}") from exc
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    try:
        async for chunk in chunks:
            digest.update(chunk)
            total += len(chunk)
            buffer.write(chunk)
            while buffer.tell() >= part_size:
                part, buffer = _split(buffer, part_size)
                await send_part(part)
        if upload_id is None:
            body = buffer.getvalue()
            await call(f"PutObject {where}", lambda: client.put_object(Bucket=bucket, Key=key, Body=body))
        else:
            if buffer.tell():
                await send_part(buffer)
            await call(
                f"CompleteMultipartUpload {where}",
                lambda: client.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                ),
            )
    except BaseException:
        if upload_id is not None:
            await _abort(client, bucket, key, upload_id)
        raise
    return Uploaded(total, digest.hexdigest())


def _split(buffer: io.BytesIO, size: int) -> tuple[io.BytesIO, io.BytesIO]:
    """The first size bytes (buffer itself, truncated: no copy) and a new buffer, positioned at its
    end, holding the rest (less than a chunk, copied).

    A part goes to the HTTP client as a file, not as bytes: it is then written to the socket a
    block at a time, where bytes would be copied whole into the transport's write buffer.
    """
    with buffer.getbuffer() as view:
        rest = io.BytesIO(view[size:])
    rest.seek(0, io.SEEK_END)
    buffer.truncate(size)
    return buffer, rest


async def _abort(client: Any, bucket: str, key: str, upload_id: str) -> None:
    """Abort a multipart upload, shielded from the cancellation that may have caused it; a failure
    to abort is logged, not raised (the original error is what the caller needs)."""
    aborting = asyncio.ensure_future(
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    )
    try:
        await asyncio.shield(aborting)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("multipart upload not aborted", bucket=bucket, key=key, error=str(classify(exc, "Abort")))


def partial_path(target: Path) -> Path:
    """Where a download is written until it is complete and verified."""
    return target.with_name(target.name + ".partial")


async def download(
    client: Any, bucket: str, key: str, target: Path, sha256: str | None, timeout: float
) -> int:
    """Stream bucket/key into partial_path(target), check its sha256 (when given), fsync, rename it to
    target, fsync the directory; return its length. On any failure no partial file is left and target
    is untouched."""
    where = f"{bucket}/{key}"
    partial = partial_path(target)
    digest = hashlib.sha256()
    total = 0
    try:
        try:
            async with asyncio.timeout(request_deadline(timeout)):
                response = await client.get_object(Bucket=bucket, Key=key)
            async with response["Body"] as body:
                with partial.open("wb") as file:
                    while chunk := await body.read(DOWNLOAD_CHUNK):
                        digest.update(chunk)
                        total += len(chunk)
                        file.write(chunk)
                    file.flush()
                    os.fsync(file.fileno())
        except Exception as exc:
            raise classify(exc, f"GetObject {where}") from exc
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise StorageError(
                "ChecksumMismatch",
                f"GetObject {where}: sha256 {digest.hexdigest()} of {total} bytes, expected {sha256}",
            )
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)
    return total


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (the directory entry, not only the file's data)."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(handle)
    finally:
        os.close(handle)
