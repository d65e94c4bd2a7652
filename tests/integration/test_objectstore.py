"""The operator's S3 client layer against a real S3-compatible server (versitygw on the test bed).

Streams go up as real multipart uploads (the server sees parts before the
stream ends, and a failed or cancelled stream leaves no upload behind) and
come down byte-exact with their sha256 checked; every bad input a backup can
meet is one StorageError reason: a wrong secret, a missing bucket, a closed
port, a corrupt object, TLS without the CA.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from valkey_operator.objectstore import (
    REFUSE_LOCAL,
    Destination,
    ObjectTooLarge,
    S3Credentials,
    StorageError,
    open_store,
)
from valkey_operator.objectstore.transfer import MIB, partial_path
from valkey_testbed import processes
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PART = 5 * MIB
MAX_JSON = MIB


def destination(server: ObjectStoreServer, bucket: str, path: str = "backups/test") -> Destination:
    return Destination(endpoint=server.endpoint, bucket=bucket, path=path)


def credentials(server: ObjectStoreServer) -> S3Credentials:
    return S3Credentials(access_key_id=server.access_key_id, secret_access_key=server.secret_access_key)


def pseudo_random(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


async def chunked(data: bytes, seed: int = 1) -> AsyncIterator[bytes]:
    """data in chunks of uneven sizes (1 byte to 1 MiB), as a socket would deliver an RDB."""
    rng = random.Random(seed)
    offset = 0
    while offset < len(data):
        size = rng.randint(1, MIB)
        yield data[offset : offset + size]
        offset += size
        await asyncio.sleep(0)


def multipart_uploads(server: ObjectStoreServer, bucket: str) -> list[dict[str, object]]:
    uploads: list[dict[str, object]] = (
        server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    )
    return uploads


async def test_a_stream_goes_up_in_parts_and_comes_down_byte_exact(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    bucket = object_store.create_bucket()
    data = pseudo_random(3 * PART + 12345, seed=7)
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        key = store.key("shard-0.rdb")
        uploaded = await store.upload(key, chunked(data), part_size=PART)
        assert uploaded.bytes == len(data)
        assert uploaded.sha256 == hashlib.sha256(data).hexdigest()
        head = object_store.client().head_object(Bucket=bucket, Key=key)
        assert head["ContentLength"] == len(data)
        assert head["ETag"].strip('"').endswith("-4"), head["ETag"]  # a multipart object of 4 parts
        target = tmp_path / "shard-0.rdb"
        assert await store.download(key, target, uploaded.sha256) == len(data)
    assert target.read_bytes() == data
    assert not partial_path(target).exists()
    assert key == "backups/test/shard-0.rdb"


async def test_parts_reach_the_server_before_the_stream_ends(
    object_store: ObjectStoreServer,
) -> None:
    """Streaming, not buffering: while the source still produces, the server already holds parts."""
    bucket = object_store.create_bucket()
    seen_parts: list[int] = []

    async def source() -> AsyncIterator[bytes]:
        for index in range(4):
            yield pseudo_random(PART, seed=index)
            if index == 2:
                uploads = await asyncio.to_thread(multipart_uploads, object_store, bucket)
                assert len(uploads) == 1, uploads
                parts = await asyncio.to_thread(
                    object_store.client().list_parts,
                    Bucket=bucket,
                    Key=str(uploads[0]["Key"]),
                    UploadId=str(uploads[0]["UploadId"]),
                )
                seen_parts.append(len(parts.get("Parts", [])))

    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        uploaded = await store.upload(store.key("streamed"), source(), part_size=PART)
    assert uploaded.bytes == 4 * PART
    assert seen_parts and seen_parts[0] >= 2, seen_parts
    assert multipart_uploads(object_store, bucket) == []


async def test_an_upload_holds_about_one_part_in_memory(object_store: ObjectStoreServer) -> None:
    """While 12 parts stream through, Python's allocations peak below 2.5 parts (tracemalloc): one
    part held, and its buffer's growth copying it once inside a write. Holding the whole stream
    peaks at 12 parts; handing parts to the HTTP client as bytes, at 3.3 (asyncio's write buffer
    copies them)."""
    bucket = object_store.create_bucket()
    block = pseudo_random(64 * 1024, seed=5)

    async def source() -> AsyncIterator[bytes]:
        for _ in range(12 * PART // len(block)):
            yield block

    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        tracemalloc.start()
        try:
            uploaded = await store.upload(store.key("big"), source(), part_size=PART)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert uploaded.bytes == 12 * PART
    assert peak < 2.5 * PART, f"peak {peak / MIB:.1f} MiB for {PART / MIB:.0f} MiB parts"


async def test_a_failing_stream_aborts_its_multipart_upload(object_store: ObjectStoreServer) -> None:
    bucket = object_store.create_bucket()

    async def broken() -> AsyncIterator[bytes]:
        for index in range(3):
            yield pseudo_random(PART, seed=index)
        raise ConnectionResetError("the valkey replica went away")

    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        with pytest.raises(ConnectionResetError):
            await store.upload(store.key("broken"), broken(), part_size=PART)
        assert not await store.exists(store.key("broken"))
    assert multipart_uploads(object_store, bucket) == []


async def test_a_cancelled_upload_aborts_its_multipart_upload(object_store: ObjectStoreServer) -> None:
    bucket = object_store.create_bucket()
    parts_sent = asyncio.Event()

    async def endless() -> AsyncIterator[bytes]:
        index = 0
        while True:
            yield pseudo_random(MIB, seed=index)
            index += 1
            if index == 2 * PART // MIB + 1:
                parts_sent.set()

    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        task = asyncio.create_task(store.upload(store.key("cancelled"), endless(), part_size=PART))
        await asyncio.wait_for(parts_sent.wait(), 30)
        assert len(multipart_uploads(object_store, bucket)) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert multipart_uploads(object_store, bucket) == []


async def test_a_small_object_is_one_put(object_store: ObjectStoreServer, tmp_path: Path) -> None:
    bucket = object_store.create_bucket()
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        uploaded = await store.upload(store.key("small"), chunked(b"tiny rdb"), part_size=PART)
        empty = await store.upload(store.key("empty"), chunked(b""), part_size=PART)
        assert await store.download(store.key("empty"), tmp_path / "empty", empty.sha256) == 0
    assert (uploaded.bytes, empty.bytes) == (8, 0)
    assert "-" not in object_store.client().head_object(Bucket=bucket, Key="backups/test/small")["ETag"]
    assert (tmp_path / "empty").read_bytes() == b""


async def test_a_corrupt_object_is_a_checksum_mismatch_and_leaves_no_file(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    bucket = object_store.create_bucket()
    data = pseudo_random(2 * MIB, seed=3)
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        key = store.key("shard-1.rdb")
        uploaded = await store.upload(key, chunked(data))
        corrupt = bytearray(data)
        corrupt[MIB] ^= 0xFF
        object_store.client().put_object(Bucket=bucket, Key=key, Body=bytes(corrupt))
        target = tmp_path / "shard-1.rdb"
        with pytest.raises(StorageError) as raised:
            await store.download(key, target, uploaded.sha256)
        assert raised.value.reason == "ChecksumMismatch"
        assert uploaded.sha256 in str(raised.value)
        assert not target.exists()
        assert not partial_path(target).exists()
        # The same download without an expected checksum stores what is there.
        assert await store.download(key, target, None) == len(data)
    assert target.read_bytes() == bytes(corrupt)


async def test_a_download_of_a_missing_object_is_object_missing(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    bucket = object_store.create_bucket()
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        with pytest.raises(StorageError) as raised:
            await store.download(store.key("nope.rdb"), tmp_path / "nope.rdb", None)
    assert raised.value.reason == "ObjectMissing"
    assert os.listdir(tmp_path) == []


async def test_json_documents_round_trip_and_a_missing_one_is_object_missing(
    object_store: ObjectStoreServer,
) -> None:
    bucket = object_store.create_bucket()
    manifest = {"version": 1, "shards": [{"slots": "0-5460", "sha256": "ab" * 32, "bytes": 123}]}
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        key = store.key("manifest.json")
        await store.put_json(store.key("manifest.json.old"), manifest)
        assert not await store.exists(key)
        await store.put_json(key, manifest)
        assert await store.exists(key)
        assert not await store.exists(store.key("manifest"))
        assert await store.get_json(key, MAX_JSON) == manifest
        with pytest.raises(StorageError) as raised:
            await store.get_json(store.key("other", "manifest.json"), MAX_JSON)
        assert raised.value.reason == "ObjectMissing"
        object_store.client().put_object(Bucket=bucket, Key=store.key("garbage.json"), Body=b"{not json")
        with pytest.raises(StorageError) as garbage:
            await store.get_json(store.key("garbage.json"), MAX_JSON)
        assert garbage.value.reason == "StorageFailed"


async def test_delete_prefix_deletes_everything_under_it_and_nothing_beside(
    object_store: ObjectStoreServer,
) -> None:
    bucket = object_store.create_bucket()
    client = object_store.client()
    under = [f"backups/b1/shard-{index}.rdb" for index in range(5)] + ["backups/b1/manifest.json"]
    beside = ["backups/b10/shard-0.rdb", "backups/b1.json", "other/b1/x"]
    for key in under + beside:
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    async with open_store(
        destination(object_store, bucket, path="backups"),
        credentials(object_store),
        endpoints=TEST_BED_ENDPOINTS,
    ) as store:
        assert await store.delete_prefix(store.key("b1")) == len(under)
        assert await store.delete_prefix(store.key("b1")) == 0
        with pytest.raises(ValueError):
            await store.delete_prefix("")
    left = sorted(item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", []))
    assert left == sorted(beside)


async def test_a_wrong_secret_is_credentials_rejected_and_never_shown(
    object_store: ObjectStoreServer,
) -> None:
    bucket = object_store.create_bucket()
    wrong = S3Credentials(access_key_id=object_store.access_key_id, secret_access_key="not-the-secret-42")
    unknown = S3Credentials(access_key_id="nobody", secret_access_key="not-the-secret-42")
    for creds in (wrong, unknown):
        async with open_store(
            destination(object_store, bucket), creds, endpoints=TEST_BED_ENDPOINTS
        ) as store:
            with pytest.raises(StorageError) as checked:
                await store.check()
            with pytest.raises(StorageError) as uploading:
                await store.upload(store.key("x"), chunked(b"data"))
            with pytest.raises(StorageError) as reading:
                await store.get_json(store.key("manifest.json"), MAX_JSON)
            with pytest.raises(StorageError) as probing:
                await store.exists(store.key("manifest.json"))
        for raised in (checked, uploading, reading, probing):
            assert raised.value.reason == "CredentialsRejected", raised.value
            assert "not-the-secret-42" not in str(raised.value)
            assert "\n" not in str(raised.value)
    assert "not-the-secret-42" not in repr(wrong)


async def test_a_json_document_longer_than_allowed_is_refused_without_holding_it(
    object_store: ObjectStoreServer,
) -> None:
    """A 16 MiB "manifest" read with a 1 MiB cap: ObjectTooLarge, and Python's allocations peak
    near the cap (tracemalloc), not near the object; a document at the cap is read."""
    bucket = object_store.create_bucket()
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        huge = b'{"pad": "' + b"x" * (16 * MIB) + b'"}'
        object_store.client().put_object(Bucket=bucket, Key=store.key("huge.json"), Body=huge)
        fits = b'{"pad": "' + b"x" * (MAX_JSON - 11) + b'"}'
        assert len(fits) == MAX_JSON
        object_store.client().put_object(Bucket=bucket, Key=store.key("fits.json"), Body=fits)
        tracemalloc.start()
        try:
            with pytest.raises(ObjectTooLarge) as raised:
                await store.get_json(store.key("huge.json"), MAX_JSON)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len((await store.get_json(store.key("fits.json"), MAX_JSON))["pad"]) == MAX_JSON - 11
    assert raised.value.reason == "StorageFailed"
    assert f"more than the {MAX_JSON}" in str(raised.value), raised.value
    assert peak < 3 * MAX_JSON, f"peak {peak / MIB:.1f} MiB reading a 16 MiB object capped at 1 MiB"


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:{port}",
        "http://localhost:{port}",
        "http://127.9.9.9:{port}",
        "http://[::ffff:127.0.0.1]:{port}",
        "http://0.0.0.0:{port}",
        "http://169.254.169.254:{port}",
        "http://[fe80::1]:{port}",
    ],
)
async def test_a_loopback_or_link_local_endpoint_is_refused_before_any_connection(endpoint: str) -> None:
    """With the product's default policy, an endpoint at a loopback, this-host or link-local
    address (literal, or a name resolving there) is EndpointRefused at the first request, and the
    listener on 127.0.0.1 behind the loopback ones never sees a connection; allowed, it does."""
    connections: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    where = Destination(endpoint=endpoint.format(port=port), bucket="backups")
    creds = S3Credentials(access_key_id="key", secret_access_key="secret")
    try:
        async with open_store(where, creds, timeout=2.0, endpoints=REFUSE_LOCAL) as store:
            with pytest.raises(StorageError) as refused:
                await store.check()
        assert refused.value.reason == "EndpointRefused", refused.value
        assert "refused as a backup endpoint" in str(refused.value)
        assert connections == []
        if endpoint.startswith("http://127.0.0.1"):
            async with open_store(where, creds, timeout=2.0, endpoints=TEST_BED_ENDPOINTS) as store:
                with pytest.raises(StorageError) as allowed:
                    await store.check()
            assert allowed.value.reason != "EndpointRefused", allowed.value
            assert connections, "the allowed network is dialled"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_missing_bucket_is_bucket_missing(object_store: ObjectStoreServer) -> None:
    async with open_store(
        destination(object_store, "no-such-bucket"), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        with pytest.raises(StorageError) as checked:
            await store.check()
        with pytest.raises(StorageError) as uploading:
            await store.upload(store.key("x"), chunked(b"data"))
    assert checked.value.reason == "BucketMissing", checked.value
    assert uploading.value.reason == "BucketMissing", uploading.value


async def test_the_right_bucket_and_credentials_pass_the_check(object_store: ObjectStoreServer) -> None:
    bucket = object_store.create_bucket()
    async with open_store(
        destination(object_store, bucket), credentials(object_store), endpoints=TEST_BED_ENDPOINTS
    ) as store:
        await store.check()


async def test_a_closed_port_is_endpoint_unreachable_within_the_timeout() -> None:
    port = processes.free_port()  # nothing listens on it
    unreachable = Destination(endpoint=f"http://127.0.0.1:{port}", bucket="backups")
    creds = S3Credentials(access_key_id="key", secret_access_key="secret")
    async with open_store(unreachable, creds, timeout=3.0, endpoints=TEST_BED_ENDPOINTS) as store:
        # from the client's first request: making the client (botocore loads its service model, about
        # 1 s of CPU on a loaded 2-core CI machine) is no part of the wait on the endpoint
        started = time.monotonic()
        with pytest.raises(StorageError) as checked:
            await store.check()
        with pytest.raises(StorageError) as uploading:
            await store.upload(store.key("x"), chunked(b"data"))
    assert checked.value.reason == uploading.value.reason == "EndpointUnreachable", checked.value
    assert time.monotonic() - started < 3.0


async def test_a_server_that_never_answers_is_endpoint_unreachable_within_the_timeout() -> None:
    """Connected, then silence: the read timeout bounds each of the two attempts."""
    connections: list[asyncio.StreamWriter] = []

    async def accept_and_ignore(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)

    server = await asyncio.start_server(accept_and_ignore, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    silent = Destination(endpoint=f"http://127.0.0.1:{port}", bucket="backups")
    creds = S3Credentials(access_key_id="key", secret_access_key="secret")
    started = time.monotonic()
    try:
        async with open_store(silent, creds, timeout=1.0, endpoints=TEST_BED_ENDPOINTS) as store:
            with pytest.raises(StorageError) as checked:
                await store.check()
    finally:
        for writer in connections:
            writer.close()
        server.close()
        await server.wait_closed()
    elapsed = time.monotonic() - started
    assert checked.value.reason == "EndpointUnreachable", checked.value
    assert 1.0 <= elapsed < 2 * 1.0 + 3, elapsed  # two read timeouts, a backoff, client set-up
    assert 1 <= len(connections) <= 2  # one retry at most


async def test_tls_is_verified_against_the_given_ca(object_store_tls: ObjectStoreServer) -> None:
    server = object_store_tls
    assert server.ca_pem and server.endpoint.startswith("https://")
    bucket = server.create_bucket()
    async with open_store(
        destination(server, bucket), credentials(server), ca_pem=server.ca_pem, endpoints=TEST_BED_ENDPOINTS
    ) as store:
        await store.check()
        uploaded = await store.upload(store.key("tls"), chunked(b"over tls"))
        assert await store.exists(store.key("tls"))
    assert uploaded.bytes == 8
    async with open_store(
        destination(server, bucket), credentials(server), timeout=3.0, endpoints=TEST_BED_ENDPOINTS
    ) as store:
        with pytest.raises(StorageError) as raised:
            await store.check()
    assert raised.value.reason == "EndpointUnreachable", raised.value
    assert "TLS verification failed: [SSL: CERTIFICATE_VERIFY_FAILED]" in str(raised.value)


async def test_a_private_ca_needs_no_writable_filesystem(
    object_store_tls: ObjectStoreServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The chart's image runs on a read-only root with no writable /tmp: with no usable temporary
    directory, a store with a private CA still verifies, uploads and reads back (it failed with
    "No usable temporary directory" when the CA went through a temp file)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))
    with pytest.raises(FileNotFoundError):
        tempfile.mkstemp()
    server = object_store_tls
    bucket = server.create_bucket()
    async with open_store(
        destination(server, bucket), credentials(server), ca_pem=server.ca_pem, endpoints=TEST_BED_ENDPOINTS
    ) as store:
        await store.check()
        await store.put_json(store.key("ro"), {"read": "only"})
        assert await store.get_json(store.key("ro"), MAX_JSON) == {"read": "only"}
    assert not os.listdir(tmp_path)
