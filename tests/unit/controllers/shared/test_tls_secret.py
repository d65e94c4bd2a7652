"""A TLS Secret is checked the way Valkey and the nodes' peers will use it, before any node gets it."""

from __future__ import annotations

import datetime
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import dsa

from controllers.shared.tls import Certificate, TlsMaterial, TlsProblem, read_tls_secret
from valkey_testbed import certs

CA, CA_KEY = certs.issue_ca("test-ca")
LEAF, LEAF_KEY = certs.issue_leaf(CA, CA_KEY, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True)


def secret(cert: bytes = certs.pem(LEAF), key: bytes | None = None, ca: bytes = certs.pem(CA)) -> dict:
    return certs.tls_secret("tls", "ns", cert, key if key is not None else certs.key_pem(LEAF_KEY), ca)


def problem(body: dict | None) -> str:
    checked = read_tls_secret(body, "tls", time.time())
    assert isinstance(checked, TlsProblem), checked
    return checked.message


def test_a_good_secret_gives_the_leaf_the_ca_and_a_content_hash() -> None:
    checked = read_tls_secret(secret(), "tls", time.time())
    assert isinstance(checked, TlsMaterial)
    assert checked.leaf == Certificate.of(LEAF)
    assert checked.leaf.serial == format(LEAF.serial_number, "X")
    assert checked.ca_pem == certs.pem(CA).decode()
    other_ca, _ = certs.issue_ca("next-ca")
    bundle = read_tls_secret(secret(ca=certs.pem(CA, other_ca)), "tls", time.time())
    assert isinstance(bundle, TlsMaterial)
    assert bundle.leaf == checked.leaf and bundle.content_hash != checked.content_hash


def test_a_leaf_issued_by_the_second_ca_of_a_bundle_is_accepted() -> None:
    new_ca, new_key = certs.issue_ca("new-ca")
    leaf, key = certs.issue_leaf(new_ca, new_key, "valkey", server=True)
    body = secret(certs.pem(leaf), certs.key_pem(key), certs.pem(CA, new_ca))
    checked = read_tls_secret(body, "tls", time.time())
    assert isinstance(checked, TlsMaterial)


def test_a_missing_secret_or_key_is_named() -> None:
    assert problem(None) == "Secret tls not found"
    body = secret()
    del body["data"]["ca.crt"]
    body["data"]["tls.key"] = ""
    assert problem(body) == "Secret tls has no tls.key, ca.crt"


def test_what_is_not_pem_is_named() -> None:
    assert problem(secret(cert=b"hello")) == "Secret tls: tls.crt holds no PEM certificate"
    assert problem(secret(ca=b"hello")) == "Secret tls: ca.crt holds no PEM certificate"
    assert problem(secret(key=b"hello")) == "Secret tls: tls.key holds no PEM private key Valkey can load"
    body = secret()
    body["data"]["tls.crt"] = "!!"
    assert problem(body) == "Secret tls: a value is not base64"


def test_a_key_that_does_not_match_the_certificate_is_refused() -> None:
    _, other = certs.issue_leaf(CA, CA_KEY, "other", server=True)
    assert problem(secret(key=certs.key_pem(other))) == (
        "Secret tls: tls.key does not match the certificate in tls.crt"
    )


def test_an_encrypted_or_unusable_key_is_refused() -> None:
    assert problem(secret(key=certs.key_pem(LEAF_KEY, b"secret"))) == (
        "Secret tls: tls.key is encrypted: Valkey is given no passphrase"
    )
    dsa_key = dsa.generate_private_key(2048)
    assert "which TLS servers do not use" in problem(secret(key=certs.key_pem(dsa_key)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [(-10, -1, "tls.crt expired at"), (1, 10, "tls.crt is not valid before")],
)
def test_a_certificate_outside_its_validity_is_refused(start: int, end: int, expected: str) -> None:
    now = datetime.datetime.now(datetime.UTC)
    leaf, key = certs.issue_leaf(
        CA,
        CA_KEY,
        "valkey",
        server=True,
        not_before=now + datetime.timedelta(days=start),
        not_after=now + datetime.timedelta(days=end),
    )
    assert expected in problem(secret(certs.pem(leaf), certs.key_pem(key)))


def test_a_certificate_no_ca_of_the_secret_issued_is_refused() -> None:
    stranger, _ = certs.issue_ca("stranger")
    assert problem(secret(ca=certs.pem(stranger))) == (
        "Secret tls: no CA in ca.crt issued tls.crt (issuer CN=test-ca)"
    )


def test_a_served_certificate_is_read_from_der() -> None:
    from cryptography.hazmat.primitives import serialization

    der = LEAF.public_bytes(serialization.Encoding.DER)
    assert Certificate.from_der(der) == Certificate.of(LEAF)
    assert Certificate.from_der(b"junk") is None
