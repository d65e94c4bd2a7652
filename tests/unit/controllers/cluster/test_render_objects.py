"""Service, ConfigMap, internal Secret, PodDisruptionBudgets and the internal credentials."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest
from render_support import UID, context, parse_acl_file, parse_valkey_conf, resolved

from controllers.cluster.render.acl import RenderedAcl, render_acl
from controllers.cluster.render.config import render_valkey_conf
from controllers.cluster.render.objects import (
    render_client_service,
    render_config_map,
    render_internal_secret,
    render_pdb,
    render_pdbs,
    render_service,
)
from controllers.shared import names
from controllers.shared.credentials import (
    PASSWORD_ALPHABET,
    DamagedSecret,
    InternalCredentials,
    generate_credentials,
    read_credentials,
)

Obj = dict[str, Any]
CREDENTIALS = generate_credentials(random.Random(42))


def owned_correctly(obj: Obj) -> None:
    meta = obj["metadata"]
    assert meta["namespace"] == "team-a"
    assert meta["labels"]["valkey.gomomento.com/cluster"] == "cache"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "valkey-operator"
    [owner] = meta["ownerReferences"]
    assert owner["uid"] == UID and owner["kind"] == "ValkeyCluster" and owner["name"] == "cache"
    assert owner["controller"] is True and owner["blockOwnerDeletion"] is True


def test_the_peer_service_names_every_pod_ready_or_not() -> None:
    service = render_service(context())
    owned_correctly(service)
    assert service["metadata"]["name"] == "cache"
    spec = service["spec"]
    assert spec["clusterIP"] == "None"
    assert spec["publishNotReadyAddresses"] is True
    assert spec["selector"] == names.cluster_selector("cache")
    assert spec["ports"] == [{"name": "valkey", "port": 6379, "targetPort": "valkey", "protocol": "TCP"}]


def test_the_client_service_selects_ready_members_only() -> None:
    service = render_client_service(context())
    owned_correctly(service)
    assert service["metadata"]["name"] == names.client_service_name("cache") == "cache-client"
    spec = service["spec"]
    assert spec["clusterIP"] == "None"
    assert "publishNotReadyAddresses" not in spec  # false by default; the server drops a false one
    assert spec["selector"] == {**names.cluster_selector("cache"), "valkey.gomomento.com/member": "true"}
    assert spec["ports"] == render_service(context())["spec"]["ports"]


def test_config_map_holds_the_rendered_conf() -> None:
    ctx = context(tls={"secretRef": "t"})
    config_map = render_config_map(ctx)
    owned_correctly(config_map)
    assert config_map["metadata"]["name"] == "cache-config"
    assert config_map["data"] == {"valkey.conf": render_valkey_conf(ctx.config, tls=True)}


def decoded(secret: Obj) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_internal_secret() -> None:
    acl = render_acl([], {}.get, CREDENTIALS)
    assert isinstance(acl, RenderedAcl)
    secret = render_internal_secret(context(), CREDENTIALS, acl)
    owned_correctly(secret)
    assert secret["metadata"]["name"] == "cache-internal"
    assert secret["type"] == "Opaque"
    data = decoded(secret)
    assert data["admin-password"] == CREDENTIALS.admin_password
    assert data["replication-password"] == CREDENTIALS.replication_password
    assert data["users.acl"] == acl.text
    assert list(parse_acl_file(data["users.acl"])) == ["default", "valkey-operator", "valkey-replication"]
    assert parse_valkey_conf(data["replication.conf"]) == [
        ["primaryuser", "valkey-replication"],
        ["primaryauth", CREDENTIALS.replication_password],
    ]


def test_credentials_are_generated_once_and_read_back() -> None:
    assert generate_credentials(random.Random(42)) == CREDENTIALS
    assert CREDENTIALS.admin_password != CREDENTIALS.replication_password
    for password in (CREDENTIALS.admin_password, CREDENTIALS.replication_password):
        assert len(password) == 40 and set(password) <= set(PASSWORD_ALPHABET)
    acl = render_acl([], {}.get, CREDENTIALS)
    assert isinstance(acl, RenderedAcl)
    assert read_credentials(render_internal_secret(context(), CREDENTIALS, acl)) == CREDENTIALS
    assert read_credentials(None) is None
    assert CREDENTIALS.admin_password not in repr(CREDENTIALS)  # never in logs


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"admin-password": base64.b64encode(b"a" * 40).decode()},
        {"admin-password": "!!!", "replication-password": "!!!"},
        {
            "admin-password": base64.b64encode(b"short").decode(),
            "replication-password": base64.b64encode(b"r" * 40).decode(),
        },
    ],
)
def test_damaged_secret_is_reported_not_regenerated(data: dict[str, str]) -> None:
    assert isinstance(read_credentials({"data": data}), DamagedSecret)


@pytest.mark.parametrize(("replicas", "expected"), [(0, 0), (1, 1), (2, 2), (5, 5)])
def test_pdb_per_shard_with_integer_min_available(replicas: int, expected: int) -> None:
    pdb = render_pdb(context(replicasPerShard=replicas), 2)
    owned_correctly(pdb)
    assert pdb["metadata"]["name"] == "cache-2"
    assert pdb["spec"]["minAvailable"] == expected
    assert type(pdb["spec"]["minAvailable"]) is int
    assert "maxUnavailable" not in pdb["spec"]
    assert pdb["spec"]["selector"] == {"matchLabels": names.shard_selector("cache", 2)}


def test_one_pdb_per_shard() -> None:
    pdbs = render_pdbs(context(shards=4))
    assert [pdb["metadata"]["name"] for pdb in pdbs] == ["cache-0", "cache-1", "cache-2", "cache-3"]


def test_objects_do_not_depend_on_the_config_beyond_the_conf() -> None:
    """Service and PDBs never change with the config, so a config edit touches only the ConfigMap."""
    a, b = context(), context(config=resolved(tag="9.1.0", valkey={"timeout": "5"}))
    assert render_service(a) == render_service(b)
    assert render_client_service(a) == render_client_service(b)
    assert render_pdbs(a) == render_pdbs(b)


def test_credentials_hashes() -> None:
    creds = InternalCredentials(admin_password="x" * 20, replication_password="y" * 20)
    assert len(creds.admin_hash) == 64 and creds.admin_hash != creds.replication_hash
