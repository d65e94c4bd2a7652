"""What TLS nodes hold and accept, read from outside as their users and an admin would.

The operator's status says what it believes the nodes loaded; these helpers
ask the nodes and the pods instead, so a test can hold the status to it:
- the Secret files a pod sees (a kubelet exec, `cat` in the container): the
  positive signal that the kubelet's sync has written a Secret change;
- how often a node was told to reload (INFO commandstats: CONFIG SET is how
  the operator reloads TLS files, and nothing else sets config while a
  cluster stands still);
- whether a node accepts a client certificate (valkey-cli of the TLS image
  with --cert/--key: the node verifies it against the CA bundle it loaded,
  `tls-auth-clients optional`), and whether its server chain verifies against
  a given CA alone;
- which connections an earlier client still holds (CLIENT LIST ids).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
from cluster_support import owned_pods, superuser_client
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from controllers.shared import layout
from valkey_operator.core.client import Client
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed import certs, images
from valkey_testbed.kubelet.control import KubeletControl
from valkey_testbed.wait import NotYet, eventually

TLS_FILES = {
    layout.TLS_CERT_KEY: layout.TLS_CERT_FILE,
    layout.TLS_KEY_KEY: layout.TLS_KEY_FILE,
    layout.TLS_CA_KEY: layout.TLS_CA_FILE,
}
"""Secret key -> the path the Valkey container reads it from."""


async def mounted_files(kubelet: KubeletControl, namespace: str, pod: str) -> dict[str, bytes]:
    """The TLS Secret's keys as the Valkey container sees them now (kubectl exec cat, in effect)."""
    found = {}
    for key, path in TLS_FILES.items():
        result = await kubelet.exec(namespace, pod, layout.CONTAINER_NAME, ["cat", path], timeout=10)
        assert result.exit_code == 0, (pod, path, result.output[-300:])
        found[key] = result.output
    return found


async def every_pod_holds(
    kubelet: KubeletControl, kube: Client, namespace: str, cluster: str, files: Mapping[str, bytes]
) -> float:
    """Seconds until every pod of the cluster sees exactly `files` at its TLS paths."""
    started = time.monotonic()

    async def done() -> bool | NotYet:
        differing = {}
        for pod in await owned_pods(kube, namespace, cluster):
            name = pod["metadata"]["name"]
            seen = await mounted_files(kubelet, namespace, name)
            wrong = sorted(key for key, content in files.items() if seen.get(key) != content)
            if wrong:
                differing[name] = wrong
        return not differing or NotYet(f"pods whose files differ: {differing}")

    await eventually(done, f"every pod of {cluster} holds the expected TLS files", 60, interval=0.5)
    return time.monotonic() - started


async def reload_requests(admin: AdminClient, ip: str) -> dict[str, int]:
    """The node's CONFIG SET counters (calls, rejected, failed): each TLS reload is one CONFIG SET."""
    async with admin.connect(ip) as node:
        stats = await node.info("commandstats")
    fields = dict(
        part.split("=", 1) for part in stats.get("cmdstat_config|set", "").split(",") if "=" in part
    )
    return {name: int(fields.get(name, 0)) for name in ("calls", "rejected_calls", "failed_calls")}


async def client_list(admin: AdminClient, ip: str) -> dict[str, dict[str, str]]:
    """The node's client connections by id, each with its CLIENT LIST fields (user, cmd, age, ...)."""
    async with superuser_client(admin.ca_pem).connect(ip) as node:
        listing = await node.text("CLIENT", "LIST")
    clients = {}
    for line in listing.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "id" in fields:
            clients[fields["id"]] = fields
    return clients


@attrs.frozen
class ClientIdentity:
    """A client certificate and key on disk, issued by one CA, for valkey-cli --cert/--key."""

    cert: Path
    key: Path

    @classmethod
    def issue(
        cls,
        ca: x509.Certificate,
        ca_key: ec.EllipticCurvePrivateKey,
        directory: Path,
        common_name: str = "valkey-client",
    ) -> ClientIdentity:
        """common_name: with tls-auth-clients-user CN, the ACL user the certificate logs in as."""
        cert, key = certs.issue_leaf(ca, ca_key, common_name, client=True)
        directory.mkdir(parents=True, exist_ok=True)
        paths = cls(directory / "client.crt", directory / "client.key")
        paths.cert.write_bytes(certs.pem(cert))
        paths.key.write_bytes(certs.key_pem(key))
        return paths


def write_ca(directory: Path, *cas: x509.Certificate) -> Path:
    """A CA bundle file for valkey-cli --cacert."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ca.crt"
    path.write_bytes(certs.pem(*cas))
    return path


async def cli_ping(
    ip: str, ca: Path, user: str, password: str, identity: ClientIdentity | None = None
) -> str:
    """PING through the TLS image's valkey-cli, verifying the server against `ca` alone; with
    `identity` the client presents that certificate. Returns what valkey-cli printed."""
    entry = images.resolve_image(images.tls_image())
    assert entry is not None
    tls = ["--tls", "--cacert", str(ca)]
    if identity is not None:
        tls += ["--cert", str(identity.cert), "--key", str(identity.key)]
    process = await asyncio.create_subprocess_exec(
        str(entry.executable("valkey-cli")),
        *("-h", ip, "-p", str(layout.VALKEY_PORT), *tls),
        *("--user", user, "--pass", password, "--no-auth-warning", "PING"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), 15)
    except TimeoutError:
        process.kill()
        await process.wait()
        return "valkey-cli timed out"
    return out.decode(errors="replace").strip()


async def answers(
    ips: Sequence[str], ca: Path, user: str, password: str, identity: ClientIdentity | None = None
) -> dict[str, str]:
    """cli_ping on every node: ip -> what valkey-cli printed ("PONG" when the handshake held)."""
    return {ip: await cli_ping(ip, ca, user, password, identity) for ip in ips}
