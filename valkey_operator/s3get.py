"""One signed S3 GetObject streamed into a file, with the standard library only.

restore-fetch runs in every restoring pod, several at once on a node, on the
restore's critical path. With valkey_operator.objectstore (aiobotocore) each
one spent about a second of CPU importing and setting up its client before
the first byte came (bench/restore_fetch.py); this module imports in
milliseconds. It does only what that one request needs: AWS Signature
Version 4 with an unsigned payload (the sha256 the manifest records is
checked instead), path-style addressing, TLS verified against a given CA
(else the system's and botocore's bundled ones), one retry of a request that
failed before any byte of the body arrived, and the same failure reasons as
objectstore.errors, from the same table of codes (objectstore/codes.py).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import http.client
import importlib.util
import os
import re
import ssl
import urllib.parse
from pathlib import Path

from valkey_operator.objectstore.codes import (
    BUCKET_CODES,
    CREDENTIAL_CODES,
    NOT_FOUND_CODES,
    OBJECT_CODES,
    Reason,
)

CHUNK = 1 << 20
ATTEMPTS = 2
"""Total attempts per request, as objectstore.transfer: a blip is absorbed, a dead endpoint fails fast."""
UNSIGNED = "UNSIGNED-PAYLOAD"

_MAX_ERROR_BODY = 64 * 1024


class GetFailed(Exception):
    """The GET failed; `reason` is one of objectstore.codes.Reason, str() one line without secrets."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(" ".join(message.split())[:300])
        self.reason = reason


def signed_headers(
    *,
    host: str,
    path: str,
    region: str,
    access_key_id: str,
    secret_access_key: str,
    now: datetime.datetime,
) -> dict[str, str]:
    """The headers of a SigV4-signed GET of path (already URI-encoded) with an unsigned payload."""
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": host, "x-amz-content-sha256": UNSIGNED, "x-amz-date": stamp}
    names = ";".join(sorted(headers))
    canonical = "\n".join(
        ["GET", path, "", *(f"{name}:{headers[name]}" for name in sorted(headers)), "", names, UNSIGNED]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret_access_key}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={access_key_id}/{scope}, SignedHeaders={names}, Signature={signature}"
    )
    return {
        "Host": host,
        "x-amz-content-sha256": UNSIGNED,
        "x-amz-date": stamp,
        "Authorization": authorization,
    }


def object_path(bucket: str, key: str) -> str:
    """Path-style, each character outside RFC 3986's unreserved set percent-encoded ('/' kept)."""
    return "/" + urllib.parse.quote(bucket, safe="") + "/" + urllib.parse.quote(key, safe="/")


def tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """Verify against ca_file only when given; otherwise AWS_CA_BUNDLE when set, else the system's
    CAs and botocore's bundle (what the objectstore client trusted), found without importing it."""
    if ca_file is not None:
        return ssl.create_default_context(cafile=str(ca_file))
    if bundle := os.environ.get("AWS_CA_BUNDLE"):
        return ssl.create_default_context(cafile=bundle)
    context = ssl.create_default_context()
    spec = importlib.util.find_spec("botocore")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "cacert.pem").is_file():
            context.load_verify_locations(cafile=str(Path(location) / "cacert.pem"))
    return context


def download(
    *,
    endpoint: str,
    bucket: str,
    key: str,
    region: str,
    access_key_id: str,
    secret_access_key: str,
    target: Path,
    ca_file: Path | None = None,
    timeout: float = 10.0,
) -> tuple[int, str]:
    """Stream the object into target (created or truncated) and fsync it: (bytes, sha256 hex).

    timeout bounds connecting and each wait for data; GetFailed names the reason on any failure."""
    url = urllib.parse.urlsplit(endpoint)
    if url.scheme not in {"http", "https"} or not url.hostname:
        raise GetFailed("StorageFailed", f"endpoint {endpoint!r}: not an http(s)://host[:port] URL")
    where = f"GetObject {bucket}/{key}"
    for attempt in range(1, ATTEMPTS + 1):
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(
                url.hostname, url.port, timeout=timeout, context=tls_context(ca_file)
            )
        else:
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        path = object_path(bucket, key)
        headers = signed_headers(
            host=url.netloc,
            path=path,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            now=datetime.datetime.now(datetime.UTC),
        )
        try:
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
            except ssl.SSLCertVerificationError as exc:
                raise GetFailed("EndpointUnreachable", f"{where}: TLS verification failed: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                if attempt < ATTEMPTS:
                    continue
                raise GetFailed("EndpointUnreachable", f"{where}: {type(exc).__name__}: {exc}") from None
            if response.status != 200:
                raise _refused(where, response)
            return _stream(response, target, where)
        finally:
            connection.close()
    raise AssertionError("unreachable")  # pragma: no cover


def _stream(response: http.client.HTTPResponse, target: Path, where: str) -> tuple[int, str]:
    digest, total = hashlib.sha256(), 0
    try:
        with target.open("wb") as file:
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                total += len(chunk)
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
    except (OSError, http.client.HTTPException) as exc:
        with contextlib.suppress(OSError):
            target.unlink()
        if isinstance(exc, OSError) and exc.filename is not None:
            raise  # the local file, not the network: restore-fetch reports it as RestoreFailed
        raise GetFailed(
            "EndpointUnreachable", f"{where}: {type(exc).__name__} after {total} bytes: {exc}"
        ) from None
    expected = response.getheader("Content-Length")
    if expected is not None and int(expected) != total:
        target.unlink()
        raise GetFailed("EndpointUnreachable", f"{where}: the body ended after {total} of {expected} bytes")
    return total, digest.hexdigest()


def _refused(where: str, response: http.client.HTTPResponse) -> GetFailed:
    body = response.read(_MAX_ERROR_BODY).decode("utf-8", "replace")
    code = _element(body, "Code") or str(response.status)
    message = _element(body, "Message")
    said = f"{where}: {code}" + (f" ({message})" if message else "")
    if code in CREDENTIAL_CODES:
        return GetFailed("CredentialsRejected", f"{said}: the access key or secret was rejected")
    if code in BUCKET_CODES:
        return GetFailed("BucketMissing", f"{said}: the bucket does not exist")
    if code in OBJECT_CODES or code in NOT_FOUND_CODES:
        return GetFailed("ObjectMissing", f"{said}: no such object")
    return GetFailed("StorageFailed", said)


def _element(body: str, name: str) -> str:
    found = re.search(rf"<{name}>([^<]*)</{name}>", body)
    return found.group(1).strip() if found else ""
