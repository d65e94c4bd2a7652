"""`valkey-operator restore-fetch`, the restoring pod's init container, against the real S3 server.

It runs as a process, as in the pod (`python -m valkey_operator restore-fetch`), against versitygw
on 127.0.0.1 (plain HTTP and TLS): what it writes, and the one-line reasons it exits with, which
the cluster's status quotes. Its request is signed by valkey_operator.s3get, so a signature the
server rejects fails here.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from valkey_operator.valkey.rdb_layout import AOF_BASE, AOF_MANIFEST, APPENDDIRNAME, DBFILENAME
from valkey_testbed import processes
from valkey_testbed.objectstore import ObjectStoreServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def run_fetch(
    server: ObjectStoreServer,
    bucket: str,
    key: str,
    sha256: str,
    data_dir: Path,
    *extra: str,
    secret: str | None = None,
    endpoint: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ACCESS_KEY_ID": server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret if secret is not None else server.secret_access_key,
    }
    argv = [
        sys.executable, "-m", "valkey_operator", "restore-fetch",
        "--endpoint", endpoint or server.endpoint, "--bucket", bucket, "--key", key,
        "--sha256", sha256, "--dir", str(data_dir), *extra,
    ]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def put(server: ObjectStoreServer, bucket: str, key: str, size: int, seed: int = 1) -> tuple[bytes, str]:
    body = random.Random(seed).randbytes(size)
    server.client().put_object(Bucket=bucket, Key=key, Body=body)
    return body, hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize(
    "key",
    ["backups/c/20261204T205500Z/shard-0.rdb", "odd names/shard 0+1=ü;x~y(z)*'.rdb"],
    ids=["plain", "every-character-class"],
)
def test_the_object_lands_byte_exact_as_dump_rdb(
    object_store: ObjectStoreServer, tmp_path: Path, key: str
) -> None:
    """Several MiB (more than one read), and a key whose characters SigV4 must encode exactly."""
    bucket = object_store.create_bucket()
    body, digest = put(object_store, bucket, key, 5 * (1 << 20) + 123)
    done = run_fetch(object_store, bucket, key, digest, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / DBFILENAME).read_bytes() == body
    assert sorted(path.name for path in tmp_path.iterdir()) == [DBFILENAME]  # nothing partial left
    assert f"restore of {key}: {tmp_path / DBFILENAME}" in done.stdout


def test_the_aof_layout_writes_a_base_and_its_manifest(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    bucket = object_store.create_bucket()
    body, digest = put(object_store, bucket, "shard.rdb", 4096)
    done = run_fetch(object_store, bucket, "shard.rdb", digest, tmp_path, "--layout", "aof")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / APPENDDIRNAME / AOF_BASE).read_bytes() == body
    assert (tmp_path / APPENDDIRNAME / AOF_MANIFEST).read_text() == f"file {AOF_BASE} seq 1 type b\n"
    assert not (tmp_path / DBFILENAME).exists()


def test_a_wrong_checksum_fails_and_leaves_no_file(object_store: ObjectStoreServer, tmp_path: Path) -> None:
    bucket = object_store.create_bucket()
    put(object_store, bucket, "shard.rdb", 4096)
    done = run_fetch(object_store, bucket, "shard.rdb", "0" * 64, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("ChecksumMismatch: shard.rdb: sha256 "), done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_object_is_object_missing(object_store: ObjectStoreServer, tmp_path: Path) -> None:
    bucket = object_store.create_bucket()
    done = run_fetch(object_store, bucket, "nowhere.rdb", "0" * 64, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("ObjectMissing: nowhere.rdb: GetObject "), done.stderr
    assert "NoSuchKey" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_bucket_is_bucket_missing(object_store: ObjectStoreServer, tmp_path: Path) -> None:
    done = run_fetch(object_store, "no-such-bucket-here", "shard.rdb", "0" * 64, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("BucketMissing: "), done.stderr


def test_a_wrong_secret_is_credentials_rejected_and_never_shown(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    bucket = object_store.create_bucket()
    _, digest = put(object_store, bucket, "shard.rdb", 4096)
    wrong = "not-the-secret-" + "x" * 20
    done = run_fetch(object_store, bucket, "shard.rdb", digest, tmp_path, secret=wrong)
    assert done.returncode == 1
    assert done.stderr.startswith("CredentialsRejected: "), done.stderr
    assert "SignatureDoesNotMatch" in done.stderr
    assert wrong not in done.stderr + done.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_holds_data_is_left_alone(object_store: ObjectStoreServer, tmp_path: Path) -> None:
    bucket = object_store.create_bucket()
    _, digest = put(object_store, bucket, "shard.rdb", 4096)
    (tmp_path / DBFILENAME).write_bytes(b"the node's own data")
    done = run_fetch(object_store, bucket, "shard.rdb", digest, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / DBFILENAME).read_bytes() == b"the node's own data"
    assert "already holds data" in done.stdout


def test_a_closed_port_is_endpoint_unreachable(object_store: ObjectStoreServer, tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{processes.free_port()}"  # nothing listens on it
    done = run_fetch(object_store, "bucket", "shard.rdb", "0" * 64, tmp_path, endpoint=endpoint)
    assert done.returncode == 1
    assert done.stderr.startswith("EndpointUnreachable: "), done.stderr
    assert "ConnectionRefusedError" in done.stderr


def test_tls_is_verified_against_the_given_ca(object_store_tls: ObjectStoreServer, tmp_path: Path) -> None:
    server = object_store_tls
    assert server.ca_pem and server.endpoint.startswith("https://")
    bucket = server.create_bucket()
    body, digest = put(server, bucket, "shard.rdb", 70_000)
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text(server.ca_pem)
    with_ca, without_ca = tmp_path / "with-ca", tmp_path / "without-ca"
    with_ca.mkdir()
    without_ca.mkdir()
    done = run_fetch(server, bucket, "shard.rdb", digest, with_ca, "--ca-file", str(ca_file))
    assert done.returncode == 0, done.stderr
    assert (with_ca / DBFILENAME).read_bytes() == body
    refused = run_fetch(server, bucket, "shard.rdb", digest, without_ca)
    assert refused.returncode == 1
    assert refused.stderr.startswith("EndpointUnreachable: "), refused.stderr
    assert "TLS verification failed" in refused.stderr and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    assert list(without_ca.iterdir()) == []
