"""spec.tls.clientAuth Required: every client presents a certificate, and a user logs in by its CN.

Real clients against the chart's operator: valkey-cli of the TLS image and the valkey-py cluster
client, each presenting a certificate whose CN is the ACL user and no password. A client without
a certificate, one whose certificate another CA issued, and one whose CN names no user are refused.
The operator itself presents the TLS Secret's certificate (the cluster could not form otherwise).
Switching clientAuth to Optional (the certificate user removed: admission wants Required for it)
and to Required again is applied to every node at runtime: no pod is replaced. Then the CA is
rotated under Required: first in one step (refused, said in the status, and undone), then in the
documented steps.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    SUPERUSER,
    SUPERUSER_PASSWORD,
    Catalog,
    create_cluster,
    image_config,
    owned_pods,
    put_tls_secret,
    require_image,
    status_of,
    warnings,
)
from tls_support import ClientIdentity, write_ca
from valkey.asyncio.cluster import ClusterNode, ValkeyCluster

from controllers.shared import layout
from controllers.shared.tls import TlsMaterial, read_tls_secret
from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_testbed import certs, images
from valkey_testbed.superuser import SUPERUSER_ROLE, acl_entry
from valkey_testbed.wait import NotYet, eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("valkey_crds"),
    # the test bed's kubelet writes Secret files after 2 s (test_cluster_tls.py)
    pytest.mark.operator_values("operatorConfig.secretSyncSeconds=5"),
]

CERT_USER = "app-by-cert"


async def cli(
    ip: str, trust: Path, identity: ClientIdentity | None, *command: str, password: bool = False
) -> str:
    """What valkey-cli of the TLS image prints (stderr too), presenting identity when given; with
    password, logging in as SUPERUSER too."""
    entry = images.resolve_image(images.tls_image())
    assert entry is not None
    args = ["-h", ip, "-p", str(layout.VALKEY_PORT), "--tls", "--cacert", str(trust)]
    if identity is not None:
        args += ["--cert", str(identity.cert), "--key", str(identity.key)]
    if password:
        args += ["--user", SUPERUSER, "--pass", SUPERUSER_PASSWORD, "--no-auth-warning"]
    process = await asyncio.create_subprocess_exec(
        str(entry.executable("valkey-cli")),
        *args,
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 15)
    return out.decode(errors="replace").strip()


async def client_auth_everywhere(
    kube: Client, namespace: str, ips: list[str], trust: Path, identity: ClientIdentity, value: str
) -> None:
    """Every node runs tls-auth-clients `value` (asked as SUPERUSER, presenting identity)."""

    async def done() -> bool | NotYet:
        found = {
            ip: await cli(ip, trust, identity, "CONFIG", "GET", "tls-auth-clients", password=True)
            for ip in ips
        }
        wrong = {ip: text for ip, text in found.items() if text.split()[-1:] != [value]}
        return not wrong or NotYet((wrong, (await status_of(kube, namespace, "mtls")).get("message")))

    await eventually(done, f"every node runs tls-auth-clients {value}", 60, interval=0.5)


async def rotated(kube: Client, namespace: str, pair: tuple[bytes, bytes], bundle: bytes, step: str) -> None:
    """The Secret `tls` set to pair and bundle, and waited for until every node loaded exactly that
    content (status.tls.secretHash names it) and the cluster is Active."""
    await put_tls_secret(kube, namespace, pair, bundle)
    material = read_tls_secret(await kube.get(SECRETS, "tls", namespace), "tls", time.time())
    assert isinstance(material, TlsMaterial), material

    async def loaded() -> bool | NotYet:
        status = await status_of(kube, namespace, "mtls")
        done = status.get("state") == "Active" and status["tls"]["secretHash"] == material.content_hash
        return done or NotYet((status.get("message"), status.get("tls")))

    await eventually(loaded, f"every node on {step}", 60, interval=0.5)


@pytest.mark.timeout(420)
async def test_clients_need_a_certificate_and_a_certificate_user_logs_in_by_its_cn(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, tmp_path: Path
) -> None:
    require_image(images.tls_image())
    ca, ca_key = certs.issue_ca("mtls-ca")
    other, other_key = certs.issue_ca("mtls-other-ca")
    leaf, leaf_key = certs.issue_leaf(
        ca, ca_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True
    )
    await put_tls_secret(kube, namespace, (certs.pem(leaf), certs.key_pem(leaf_key)), certs.pem(ca))
    trust = write_ca(tmp_path / "trust", ca)
    user = ClientIdentity.issue(ca, ca_key, tmp_path / "user", CERT_USER)
    stranger = ClientIdentity.issue(other, other_key, tmp_path / "stranger", CERT_USER)
    nobody = ClientIdentity.issue(ca, ca_key, tmp_path / "nobody", "nobody-of-ours")
    config = await image_config(catalog, images.tls_image())
    cert_user = {
        "username": CERT_USER,
        "authentication": "Certificate",
        "permissions": [{"roleRef": SUPERUSER_ROLE, "keys": [{"pattern": "*"}]}],
    }
    await create_cluster(
        kube,
        namespace,
        "mtls",
        config,
        3,
        0,
        tls={"secretRef": "tls", "clientAuth": "Required"},
        acl=[cert_user],
    )

    async def active() -> dict[str, object] | NotYet:
        status = await status_of(kube, namespace, "mtls")
        return status if status.get("state") == "Active" else NotYet(status.get("message"))

    status = await eventually(
        active, "mtls Active (the operator presents its certificate)", 120, interval=0.5
    )
    ips = [str(node["ip"]) for node in status["nodes"]]  # type: ignore[index, union-attr]
    lives = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, "mtls")}

    # valkey-cli: the certificate's CN is the user, with no password; every other client is refused.
    for ip in ips:
        assert await cli(ip, trust, user, "ACL", "WHOAMI") == CERT_USER
    assert await cli(ips[0], trust, user, "-c", "SET", "mtls:k", "v") == "OK"
    no_certificate = await cli(ips[0], trust, None, "PING", password=True)
    assert "PONG" not in no_certificate, no_certificate
    from_another_ca = await cli(ips[0], trust, stranger, "PING")
    assert "PONG" not in from_another_ca, from_another_ca
    assert "NOAUTH" in await cli(ips[0], trust, nobody, "PING")
    assert await cli(ips[0], trust, nobody, "ACL", "WHOAMI", password=True) == SUPERUSER  # AUTH still works

    # The valkey-py cluster client, by certificate only, across every shard.
    client = ValkeyCluster(
        startup_nodes=[ClusterNode(ips[0], layout.VALKEY_PORT)],
        ssl=True,
        ssl_ca_certs=str(trust),
        ssl_certfile=str(user.cert),
        ssl_keyfile=str(user.key),
        ssl_check_hostname=False,
        ssl_cert_reqs="required",
    )
    try:
        keys = {f"mtls:{i}": str(i) for i in range(60)}
        for key, value in keys.items():
            await client.set(key, value)
        assert {key: (await client.get(key)).decode() for key in keys} == keys
        assert len({client.get_node_from_key(key).name for key in keys}) == 3  # every shard served
    finally:
        await client.aclose()

    # Optional, then Required again: applied at runtime, no pod replaced.
    # Optional admits no certificate user (admission): the user goes with it.
    optional = {"tls": {"clientAuth": "Optional"}, "acl": [acl_entry()]}
    await kube.patch(VALKEY_CLUSTERS, "mtls", {"spec": optional}, namespace)
    await client_auth_everywhere(kube, namespace, ips, trust, user, "optional")
    assert await cli(ips[0], trust, None, "PING", password=True) == "PONG"
    required = {"tls": {"clientAuth": "Required"}, "acl": [cert_user, acl_entry()]}
    await kube.patch(VALKEY_CLUSTERS, "mtls", {"spec": required}, namespace)
    await client_auth_everywhere(kube, namespace, ips, trust, user, "yes")
    assert "PONG" not in await cli(ips[0], trust, None, "PING", password=True)

    # A CA rotation under Required. In one step (a leaf of a new CA beside the bundle of both) the
    # operator presents that leaf, which nodes on the old bundle refuse: the status says so and how
    # out, and no slot is reported lost. The way out (the previous leaf back beside the bundle) and
    # then the documented steps: the new leaf once every node loaded the bundle, the old CA dropped.
    # A client certificate of either CA logs in while both are trusted; the dropped CA's no longer.
    new_ca, new_ca_key = certs.issue_ca("mtls-new-ca")
    new_leaf, new_leaf_key = certs.issue_leaf(
        new_ca, new_ca_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True
    )
    new_user = ClientIdentity.issue(new_ca, new_ca_key, tmp_path / "new-user", CERT_USER)
    old_pair, new_pair = (
        (certs.pem(leaf), certs.key_pem(leaf_key)),
        (certs.pem(new_leaf), certs.key_pem(new_leaf_key)),
    )
    await put_tls_secret(kube, namespace, new_pair, certs.pem(ca, new_ca))

    async def refused() -> str | NotYet:
        message = str((await status_of(kube, namespace, "mtls")).get("message"))
        return message if "refuse the operator's client certificate" in message else NotYet(message)

    message = await eventually(refused, "the status to say the nodes refuse the operator", 60, interval=0.5)
    assert "data lost" not in message and "not assigned" not in message, message
    await rotated(kube, namespace, old_pair, certs.pem(ca, new_ca), "the way out: the previous leaf back")
    await rotated(kube, namespace, new_pair, certs.pem(ca, new_ca), "the new CA's leaf")
    both = write_ca(tmp_path / "both", ca, new_ca)
    for ip in ips:
        assert await cli(ip, both, new_user, "ACL", "WHOAMI") == CERT_USER
        assert await cli(ip, both, user, "ACL", "WHOAMI") == CERT_USER
    await rotated(kube, namespace, new_pair, certs.pem(new_ca), "the old CA dropped")
    new_only = write_ca(tmp_path / "new-only", new_ca)
    for ip in ips:
        assert await cli(ip, new_only, new_user, "ACL", "WHOAMI") == CERT_USER
        dropped = await cli(ip, new_only, user, "ACL", "WHOAMI")
        assert CERT_USER not in dropped, f"{ip} still trusts the dropped CA: {dropped}"
    assert not await warnings(kube, namespace, "DataLost")
    assert {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, "mtls")} == lives
