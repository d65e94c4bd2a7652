"""What the operator tells the object store layer: where objects go and who it is there."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class Destination:
    """Where a backup's objects live; mirrors the CRD's spec.destination (credentials aside)."""

    endpoint: str
    """http(s)://host:port of an S3-compatible service (path-style requests: no bucket in the host)."""
    bucket: str
    path: str = ""
    """The key prefix inside the bucket, may be empty; slashes at its ends do not matter."""
    region: str = "us-east-1"
    """The signing region; S3-compatible servers mostly accept us-east-1."""


@attrs.frozen(kw_only=True)
class S3Credentials:
    """An access key pair, from a Secret; the secret never appears in a repr, a log or an error."""

    access_key_id: str
    secret_access_key: str = attrs.field(repr=False)


@attrs.frozen
class Uploaded:
    """What an upload stored: its length and the hex sha256 of its bytes, computed on the way."""

    bytes: int
    sha256: str


def object_key(path: str, *parts: str) -> str:
    """path and parts joined by "/": each piece without slashes at its ends, empty pieces dropped,
    so the key never starts with "/" nor holds "//" at a join."""
    pieces = [piece.strip("/") for piece in (path, *parts)]
    return "/".join(piece for piece in pieces if piece)
