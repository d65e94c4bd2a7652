"""A TLS cluster's certificate material (pure): the Secret checked before any node is given it, and
the certificate a node serves, read from a real handshake.

A Secret is refused (the cluster is blocked, nothing is reloaded or started with it) when it is
missing, lacks a key, holds something that is not PEM, a certificate that is expired or not yet
valid, a key that does not match the certificate, an encrypted key (Valkey is given no
passphrase), or a certificate that no CA in its `ca.crt` issued (the nodes verify each other
against that file on the replication links and the cluster bus).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib

import attrs
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa

from controllers.shared import layout
from valkey_operator.core.clock import rfc3339
from valkey_operator.core.rest import Obj

KEYS = (layout.TLS_CERT_KEY, layout.TLS_KEY_KEY, layout.TLS_CA_KEY)


@attrs.frozen(kw_only=True)
class Certificate:
    """What identifies a certificate across a Secret and a handshake."""

    fingerprint: str
    """SHA-256 of the DER encoding, hex."""
    serial: str
    """Hex, upper case, as Valkey's INFO tls prints it."""
    not_after: float
    """Unix seconds."""

    @classmethod
    def of(cls, cert: x509.Certificate) -> Certificate:
        der = cert.public_bytes(serialization.Encoding.DER)
        return cls(
            fingerprint=hashlib.sha256(der).hexdigest(),
            serial=format(cert.serial_number, "X"),
            not_after=cert.not_valid_after_utc.timestamp(),
        )

    @classmethod
    def from_der(cls, der: bytes) -> Certificate | None:
        try:
            return cls.of(x509.load_der_x509_certificate(der))
        except ValueError:
            return None


@attrs.frozen(kw_only=True)
class TlsMaterial:
    """A Secret that passed every check."""

    secret: str
    leaf: Certificate
    ca_pem: str
    content_hash: str
    """Of the three keys together: a change of any (a CA bundle too) is a change to reload."""
    identity_pem: str = attrs.field(default="", repr=False)
    """tls.crt then tls.key: what the operator presents where nodes require client certificates."""


@attrs.frozen
class TlsProblem:
    """Why the Secret cannot be used; `message` names the Secret and the key."""

    message: str


def read_tls_secret(secret: Obj | None, name: str, now: float) -> TlsMaterial | TlsProblem:
    """Check the Secret `name` (None: not found) the way Valkey and the nodes' peers will use it."""
    where = f"Secret {name}"
    if secret is None:
        return TlsProblem(f"{where} not found")
    data = secret.get("data") or {}
    missing = [key for key in KEYS if not data.get(key)]
    if missing:
        return TlsProblem(f"{where} has no {', '.join(missing)}")
    try:
        raw = {key: base64.b64decode(data[key], validate=True) for key in KEYS}
    except (binascii.Error, ValueError):
        return TlsProblem(f"{where}: a value is not base64")
    try:
        chain = x509.load_pem_x509_certificates(raw[layout.TLS_CERT_KEY])
    except ValueError:
        return TlsProblem(f"{where}: {layout.TLS_CERT_KEY} holds no PEM certificate")
    try:
        cas = x509.load_pem_x509_certificates(raw[layout.TLS_CA_KEY])
    except ValueError:
        return TlsProblem(f"{where}: {layout.TLS_CA_KEY} holds no PEM certificate")
    problem = _key_problem(raw[layout.TLS_KEY_KEY], chain[0])
    if problem is not None:
        return TlsProblem(f"{where}: {problem}")
    leaf = chain[0]
    if leaf.not_valid_after_utc.timestamp() <= now:
        return TlsProblem(f"{where}: {layout.TLS_CERT_KEY} expired at {_when(leaf.not_valid_after_utc)}")
    if leaf.not_valid_before_utc.timestamp() > now:
        return TlsProblem(
            f"{where}: {layout.TLS_CERT_KEY} is not valid before {_when(leaf.not_valid_before_utc)}"
        )
    if not _issued_by_any(chain, cas):
        return TlsProblem(
            f"{where}: no CA in {layout.TLS_CA_KEY} issued {layout.TLS_CERT_KEY} "
            f"(issuer {leaf.issuer.rfc4514_string()})"
        )
    content = hashlib.sha256(b"\0".join(raw[key] for key in KEYS)).hexdigest()[:16]
    return TlsMaterial(
        secret=name,
        leaf=Certificate.of(leaf),
        ca_pem=raw[layout.TLS_CA_KEY].decode("ascii", errors="replace"),
        content_hash=content,
        identity_pem=(raw[layout.TLS_CERT_KEY].rstrip(b"\n") + b"\n" + raw[layout.TLS_KEY_KEY]).decode(
            "ascii", errors="replace"
        ),
    )


_PUBLIC_KEY_TYPES = (
    rsa.RSAPublicKey,
    ec.EllipticCurvePublicKey,
    ed25519.Ed25519PublicKey,
    ed448.Ed448PublicKey,
)


def _key_problem(pem: bytes, leaf: x509.Certificate) -> str | None:
    key_name = layout.TLS_KEY_KEY
    if b"ENCRYPTED" in pem:
        return f"{key_name} is encrypted: Valkey is given no passphrase"
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:
        return f"{key_name} is encrypted: Valkey is given no passphrase"
    except (ValueError, UnsupportedAlgorithm):
        return f"{key_name} holds no PEM private key Valkey can load"
    if isinstance(key, dsa.DSAPrivateKey):
        return f"{key_name} is a DSA key, which TLS servers do not use"
    public = leaf.public_key()
    if not isinstance(public, _PUBLIC_KEY_TYPES):
        return f"{layout.TLS_CERT_KEY} has a public key of a kind TLS servers do not use"
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != public.public_bytes(*spki):
        return f"{key_name} does not match the certificate in {layout.TLS_CERT_KEY}"
    return None


def _issued_by_any(chain: list[x509.Certificate], cas: list[x509.Certificate]) -> bool:
    """Some certificate of the chain (the leaf, or an intermediate sent with it) is a CA's own or
    was signed by one."""
    trusted = {ca.public_bytes(serialization.Encoding.DER) for ca in cas}
    for cert in chain:
        if cert.public_bytes(serialization.Encoding.DER) in trusted:
            return True
        for ca in cas:
            try:
                cert.verify_directly_issued_by(ca)
                return True
            except (ValueError, TypeError, InvalidSignature):
                continue
    return False


def _when(moment: datetime.datetime) -> str:
    return rfc3339(moment.timestamp())
