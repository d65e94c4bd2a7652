"""The pure parts of the object store layer: key joining and the classification of failures."""

from __future__ import annotations

import tempfile
from pathlib import Path

import botocore.exceptions
import pytest

from valkey_operator.objectstore import REFUSE_LOCAL, Destination, S3Credentials, StorageError, open_store
from valkey_operator.objectstore.errors import classify
from valkey_operator.objectstore.model import object_key
from valkey_testbed import certs


@pytest.mark.parametrize(
    ("path", "parts", "key"),
    [
        ("", ("b1", "shard-0.rdb"), "b1/shard-0.rdb"),
        ("backups", ("b1", "manifest.json"), "backups/b1/manifest.json"),
        ("/backups/prod/", ("b1",), "backups/prod/b1"),
        ("backups", ("/b1/", "", "x"), "backups/b1/x"),
        ("backups", (), "backups"),
        ("", (), ""),
    ],
)
def test_keys_join_the_path_and_parts_with_single_slashes(
    path: str, parts: tuple[str, ...], key: str
) -> None:
    assert object_key(path, *parts) == key


def client_error(status: int, code: str | None = None, message: str = "") -> botocore.exceptions.ClientError:
    """An answer as botocore reports it: a HEAD answer has no body, so its code is the status."""
    error = {"Code": code or str(status), "Message": message}
    return botocore.exceptions.ClientError(
        {"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, "Operation"
    )


@pytest.mark.parametrize(
    ("exc", "bucket_operation", "reason"),
    [
        (
            client_error(403, "SignatureDoesNotMatch", "The request signature..."),
            False,
            "CredentialsRejected",
        ),
        (client_error(403, "InvalidAccessKeyId"), True, "CredentialsRejected"),
        (client_error(403, "AccessDenied"), False, "CredentialsRejected"),
        (client_error(403), True, "CredentialsRejected"),
        (client_error(404, "XAdminUserNotFound"), True, "CredentialsRejected"),
        (client_error(404, "NoSuchBucket"), False, "BucketMissing"),
        (client_error(404), True, "BucketMissing"),
        (client_error(404), False, "ObjectMissing"),
        (client_error(404, "NoSuchKey"), False, "ObjectMissing"),
        (client_error(500, "InternalError"), False, "StorageFailed"),
        (client_error(400, "EntityTooSmall"), False, "StorageFailed"),
        (
            botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
            True,
            "EndpointUnreachable",
        ),
        (
            botocore.exceptions.ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"),
            True,
            "EndpointUnreachable",
        ),
        (
            botocore.exceptions.ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
            False,
            "EndpointUnreachable",
        ),
        (
            botocore.exceptions.SSLError(endpoint_url="https://127.0.0.1:1", error="bad cert"),
            True,
            "EndpointUnreachable",
        ),
        (TimeoutError(), False, "EndpointUnreachable"),
        (ValueError("something else"), False, "StorageFailed"),
    ],
)
def test_failures_are_classified_into_the_reasons_a_user_can_act_on(
    exc: BaseException, bucket_operation: bool, reason: str
) -> None:
    error = classify(exc, "Operation bucket/key", bucket_operation=bucket_operation)
    assert error.reason == reason
    assert str(error).startswith("Operation bucket/key")


def test_a_storage_error_passes_through_and_messages_are_one_short_line() -> None:
    original = StorageError("ChecksumMismatch", "first line\nsecond line " + "x" * 1000)
    assert classify(original, "Other") is original
    assert "\n" not in str(original)
    assert len(str(original)) <= 300


def test_the_secret_is_not_in_the_credentials_repr() -> None:
    creds = S3Credentials(access_key_id="AKIAEXAMPLE", secret_access_key="very-secret")
    assert "very-secret" not in repr(creds)
    assert "AKIAEXAMPLE" in repr(creds)


@pytest.mark.parametrize(
    ("endpoint", "ca_pem", "says"),
    [
        ("not a url", None, "endpoint 'not a url'"),
        ("https://127.0.0.1:9", "not a certificate", "the CA is not a PEM certificate"),
    ],
)
async def test_a_malformed_endpoint_or_ca_fails_before_any_request(
    endpoint: str, ca_pem: str | None, says: str
) -> None:
    destination = Destination(endpoint=endpoint, bucket="backups")
    creds = S3Credentials(access_key_id="AKIAEXAMPLE", secret_access_key="very-secret")
    with pytest.raises(StorageError) as raised:
        async with open_store(destination, creds, ca_pem=ca_pem, endpoints=REFUSE_LOCAL):
            pytest.fail("opened")
    assert raised.value.reason == "StorageFailed"
    assert str(raised.value).startswith(says)
    assert "very-secret" not in str(raised.value)


async def test_a_private_ca_opens_with_no_usable_temporary_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The chart's image has a read-only root and no writable /tmp: the CA must not need a file."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))
    ca, _ = certs.issue_ca("store")
    destination = Destination(endpoint="https://127.0.0.1:9", bucket="backups")
    creds = S3Credentials(access_key_id="AKIAEXAMPLE", secret_access_key="very-secret")
    async with open_store(destination, creds, ca_pem=certs.pem(ca).decode(), endpoints=REFUSE_LOCAL) as store:
        assert store.bucket == "backups"
