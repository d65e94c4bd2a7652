"""restore-fetch's standard-library GET reads S3's error codes as the operator's client does."""

from __future__ import annotations

from valkey_operator import s3get
from valkey_operator.objectstore import errors


def test_the_error_codes_match_the_objectstore_classification() -> None:
    assert s3get.CREDENTIAL_CODES == errors.CREDENTIAL_CODES
    assert s3get.BUCKET_CODES == errors.BUCKET_CODES
    assert s3get.OBJECT_CODES == errors.OBJECT_CODES | errors.NOT_FOUND_CODES
    assert s3get.ATTEMPTS == 2


def test_keys_are_encoded_as_sigv4_asks_and_slashes_kept() -> None:
    assert s3get.object_path("b", "a/b c+d~e_f-g.h(i)") == "/b/a/b%20c%2Bd~e_f-g.h%28i%29"
    assert s3get.object_path("b", "ü") == "/b/%C3%BC"
