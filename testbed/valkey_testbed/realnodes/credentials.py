"""The real nodes' credentials, signed by the control plane's CA: what kubeadm's join would issue."""

from __future__ import annotations

from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from valkey_testbed import certs
from valkey_testbed.certs import PKI, CertPair


def _ca(pki: PKI) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    key = serialization.load_pem_private_key(pki.ca.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertPair:
    directory.mkdir(parents=True, exist_ok=True)
    pair = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
    pair.cert.write_bytes(certs.pem(cert))
    pair.key.write_bytes(certs.key_pem(key))
    pair.key.chmod(0o600)
    return pair


def node_client(pki: PKI, directory: Path, node: str) -> CertPair:
    """The kubelet's client certificate: user system:node:<node> in group system:nodes."""
    cert, key = certs.issue_leaf(*_ca(pki), f"system:node:{node}", organization="system:nodes", client=True)
    return _write(directory, "kubelet-client", cert, key)


def node_serving(pki: PKI, directory: Path, node: str, address: str) -> CertPair:
    """The kubelet's serving certificate, for its name and its address on the bridge."""
    cert, key = certs.issue_leaf(*_ca(pki), node, dns_names=(node,), ip_addresses=(address,), server=True)
    return _write(directory, "kubelet-serving", cert, key)


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testbed", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "node", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "node"}}],
        "current-context": "testbed",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
