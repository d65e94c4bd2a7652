"""The S3 error codes each failure reason stands for, and the reasons themselves (pure, no imports).

One home for both S3 clients: the operator's (errors.classify, over botocore) and restore-fetch's
standard-library GET (valkey_operator/s3get.py), which must start without botocore; importing
this module loads nothing else of the object store layer (objectstore/__init__ is lazy).
"""

from __future__ import annotations

from typing import Literal

Reason = Literal[
    "CredentialsRejected",
    "EndpointUnreachable",
    "EndpointRefused",
    "BucketMissing",
    "ObjectMissing",
    "ChecksumMismatch",
    "StorageFailed",
]

CREDENTIAL_CODES = frozenset(
    {
        "403",
        "AccessDenied",
        "Forbidden",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "InvalidSecurity",
        "AuthorizationHeaderMalformed",
        "XAdminUserNotFound",  # versitygw's answer (404) to an unknown access key
    }
)
BUCKET_CODES = frozenset({"NoSuchBucket"})
OBJECT_CODES = frozenset({"NoSuchKey", "NoSuchUpload"})
NOT_FOUND_CODES = frozenset({"404", "NotFound"})
"""A body-less 404 (HEAD): a missing bucket or a missing object, depending on what was asked."""
