"""spec.tls.clientAuth Required: every client presents a certificate, and a user logs in by its CN.

Real clients against the chart's operator: valkey-cli of the TLS image and the valkey-py cluster
client, each presenting a certificate whose CN is the ACL user and no password. A client without
a certificate, one whose certificate another CA issued, and one whose CN names no user are refused.
The operator itself presents the TLS Secret's certificate (the cluster could not form otherwise).
Switching clientAuth to Optional (the certificate user removed: admission wants Required for it)
and to Required again is applied to every node at runtime: no pod is replaced.
"""

from __future__ import annotations

import asyncio
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
)
from tls_support import ClientIdentity, write_ca
from valkey.asyncio.cluster import ClusterNode, ValkeyCluster

from controllers.shared import layout
from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_testbed import certs, images
from valkey_testbed.superuser import SUPERUSER_ROLE, acl_entry
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

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
    await kube.patch(VALKEY_CLUSTERS, "mtls", {"spec": {"tls": {"clientAuth": "Required"}}}, namespace)
    await client_auth_everywhere(kube, namespace, ips, trust, user, "yes")
    assert "PONG" not in await cli(ips[0], trust, None, "PING", password=True)
    assert {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, "mtls")} == lives
