"""Certificates and keys for the local control plane: a CA, serving and client certs.

Real TLS and real client-certificate authentication, so RBAC and admission
behave as on any cluster. Everything is valid for 10 years and written once
per state directory.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from pathlib import Path
from typing import Any

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=3650)

Key = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@attrs.frozen
class CertPair:
    cert: Path
    key: Path


@attrs.frozen
class PKI:
    """Paths of every credential the control plane uses."""

    directory: Path

    @property
    def ca(self) -> CertPair:
        return CertPair(self.directory / "ca.crt", self.directory / "ca.key")

    @property
    def apiserver(self) -> CertPair:
        return CertPair(self.directory / "apiserver.crt", self.directory / "apiserver.key")

    @property
    def admin(self) -> CertPair:
        return CertPair(self.directory / "admin.crt", self.directory / "admin.key")

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"

    def exists(self) -> bool:
        paths = [self.ca.cert, self.apiserver.cert, self.admin.cert, self.service_account_key]
        return all(path.exists() for path in paths)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _write_key(key: Key, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: Key,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after or now + _VALIDITY)
    )


def issue_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    *,
    organization: str | None = None,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate signed by the CA, for serving, client auth, or both (valid 10 years unless
    not_before/not_after say otherwise)."""
    key = ec.generate_private_key(ec.SECP256R1())
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        _builder(_name(common_name, organization), ca_cert.subject, key, not_before, not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def pem(*certs: x509.Certificate) -> bytes:
    return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in certs)


def key_pem(key: Key, password: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def tls_secret(name: str, namespace: str, cert: bytes, key: bytes, ca: bytes) -> dict[str, Any]:
    """A kubernetes.io/tls Secret body with tls.crt, tls.key and ca.crt (PEM bytes)."""
    data = {"tls.crt": cert, "tls.key": key, "ca.crt": ca}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key_name: base64.b64encode(value).decode() for key_name, value in data.items()},
    }


def write_pki(directory: Path, service_ip: str) -> PKI:
    """Generate every credential the control plane needs (idempotent)."""
    pki = PKI(directory)
    if pki.exists():
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = issue_ca("valkey-operator-testbed-ca")
    _write_cert(ca_cert, pki.ca.cert)
    _write_key(ca_key, pki.ca.key)

    serving, serving_key = issue_leaf(
        ca_cert,
        ca_key,
        "kube-apiserver",
        dns_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ip_addresses=("127.0.0.1", service_ip),
        server=True,
    )
    _write_cert(serving, pki.apiserver.cert)
    _write_key(serving_key, pki.apiserver.key)

    admin, admin_key = issue_leaf(ca_cert, ca_key, "admin", organization="system:masters", client=True)
    _write_cert(admin, pki.admin.cert)
    _write_key(admin_key, pki.admin.key)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(sa_key, pki.service_account_key)
    pki.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki
