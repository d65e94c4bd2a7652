"""restore-fetch's standard-library GET: the operator's retry count and code table, without botocore."""

from __future__ import annotations

import subprocess
import sys

from valkey_operator import s3get
from valkey_operator.objectstore import transfer


def test_restore_fetch_retries_as_often_as_the_operators_client() -> None:
    assert s3get.ATTEMPTS == transfer.ATTEMPTS


def test_the_code_table_loads_without_the_object_store_client() -> None:
    """s3get reads the codes from objectstore.codes; the package loads its S3 client lazily."""
    probe = (
        "import sys\n"
        "import valkey_operator.objectstore.codes\n"
        "from valkey_operator import s3get\n"
        "print(sorted(m for m in sys.modules if m.startswith(('botocore', 'aiobotocore',"
        " 'valkey_operator.objectstore.store', 'valkey_operator.objectstore.errors'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_keys_are_encoded_as_sigv4_asks_and_slashes_kept() -> None:
    assert s3get.object_path("b", "a/b c+d~e_f-g.h(i)") == "/b/a/b%20c%2Bd~e_f-g.h%28i%29"
    assert s3get.object_path("b", "ü") == "/b/%C3%BC"


def test_every_public_name_of_the_package_loads() -> None:
    import valkey_operator.objectstore as package

    assert sorted(package.__all__) == sorted(package._HOMES)
    for name in package.__all__:
        assert getattr(package, name) is not None
