"""kubernetes-asyncio's config loaders (through load_config) and the core's transport against the real
API server: client certificates, a bearer token, and a ServiceAccount's token (from the TokenRequest
API) through a tokenFile, an exec plugin and an in-cluster directory, each rotated after a 401. The
account may only read (ClusterRole `view`), so a 403 on a write proves the token was sent and the
admin's certificates were not."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import pytest_asyncio
import yaml
from exec_plugin_support import V1, ExecPluginScript, exec_credential
from prometheus_client import CollectorRegistry
from rbac_support import ROLE_BINDINGS, SERVICE_ACCOUNTS, presenting, service_account_token

from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import Client
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.resource import CONFIG_MAPS
from valkey_operator.core.rest import ApiError, RestClient
from valkey_operator.core.restconfig import RestConfig, load_config
from valkey_operator.core.transport import HttpTransport, proxy_for
from valkey_testbed.wait import eventually

pytestmark = pytest.mark.integration

READER = "reader"


def on_loopback(config: RestConfig) -> RestConfig:
    """Every connection of these tests goes to the test bed on 127.0.0.1, never through a proxy."""
    assert urlsplit(config.host).hostname == "127.0.0.1", config.host
    assert config.proxy is None and proxy_for(config.host, config.proxy) is None
    return config


def config_map(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


@pytest_asyncio.fixture
async def admin(kubeconfig_path: Path) -> RestConfig:
    return on_loopback(await load_config(str(kubeconfig_path)))


VIEW_ROLES = ("view", "system:aggregate-to-view")
"""`view`, and the rules it aggregates, bound directly: the test then need not wait for the
clusterrole-aggregation controller to fill `view`."""


@pytest_asyncio.fixture
async def reader_token(kube: Client, namespace: str) -> AsyncIterator[str]:
    """A TokenRequest token of a ServiceAccount bound to ClusterRole `view` in namespace."""
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": READER, "namespace": namespace}})
    for role in VIEW_ROLES:
        await kube.create(
            ROLE_BINDINGS,
            {
                "metadata": {"name": f"{READER}-{role.replace(':', '-')}", "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": READER, "namespace": namespace}],
            },
        )
    yield await service_account_token(kube, namespace, READER)


def ca_of(admin: RestConfig, directory: Path) -> Path:
    assert admin.ssl_ca_cert is not None
    return Path(shutil.copy(admin.ssl_ca_cert, directory / "ca.crt"))


async def can_read(rest: RestClient, namespace: str) -> bool:
    """The RoleBinding may reach the authorizer's cache a moment after it was created."""
    try:
        await Client(rest, "tests").list(CONFIG_MAPS, namespace)
    except ApiError as exc:
        if exc.status == 403:
            return False
        raise
    return True


async def assert_reads_but_cannot_write(rest: RestClient, namespace: str) -> None:
    await eventually(lambda: can_read(rest, namespace), f"{READER} can list ConfigMaps", timeout=30)
    with pytest.raises(ApiError) as forbidden:
        await Client(rest, "tests").create(CONFIG_MAPS, config_map("denied", namespace))
    assert forbidden.value.status == 403
    assert f"system:serviceaccount:{namespace}:{READER}" in forbidden.value.message


async def next_added(rest: RestClient, namespace: str, resource_version: str, name: str) -> dict[str, Any]:
    query = {"watch": True, "resourceVersion": resource_version, "timeoutSeconds": 30}
    async with (
        asyncio.timeout(30),
        rest.stream(f"/api/v1/namespaces/{namespace}/configmaps", query=query) as r,
    ):
        async for line in r.content:
            event = orjson.loads(line)
            if event["type"] == "ADDED" and event["object"]["metadata"]["name"] == name:
                return dict(event["object"])
    raise AssertionError(f"the watch ended without ADDED {name}")


async def test_client_certificates_list_create_and_watch(admin: RestConfig, namespace: str) -> None:
    assert admin.cert_file and admin.key_file and not admin.api_key
    async with RestClient(admin) as rest:
        kube = Client(rest, "restconfig-tests")
        await kube.create(CONFIG_MAPS, config_map("first", namespace))
        listed = await rest.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
        assert "first" in {item["metadata"]["name"] for item in listed["items"]}
        watching = asyncio.create_task(
            next_added(rest, namespace, listed["metadata"]["resourceVersion"], "second")
        )
        created = await kube.create(CONFIG_MAPS, config_map("second", namespace))
        assert (await watching)["metadata"]["uid"] == created["metadata"]["uid"]
        assert isinstance(rest.transport, HttpTransport)
    assert rest.transport._session is None  # closed by the context manager


async def test_a_token_file_kubeconfig_sends_the_token_and_rereads_it_after_a_401(
    admin: RestConfig, reader_token: str, namespace: str, tmp_path: Path
) -> None:
    ca_of(admin, tmp_path)
    token = tmp_path / "token"
    token.write_text("not-a-valid-token")
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": admin.host, "certificate-authority": "ca.crt"}}
                ],
                "users": [{"name": "u", "user": {"tokenFile": "token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    config = on_loopback(await load_config(str(kubeconfig)))
    assert config.cert_file is None and config.api_key == {"BearerToken": "Bearer not-a-valid-token"}
    async with RestClient(config) as rest:
        with pytest.raises(ApiError) as unauthorized:  # the file still holds a bad token
            await rest.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
        assert unauthorized.value.status == 401
        token.write_text(reader_token)  # rotated: the 401 makes the client read it again at once
        await assert_reads_but_cannot_write(rest, namespace)


async def test_a_bearer_token_kubeconfig(
    admin: RestConfig, reader_token: str, namespace: str, tmp_path: Path
) -> None:
    ca_of(admin, tmp_path)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": admin.host, "certificate-authority": "ca.crt"}}
                ],
                "users": [{"name": "u", "user": {"token": reader_token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    config = on_loopback(await load_config(str(kubeconfig)))
    assert config.cert_file is None
    async with RestClient(config) as rest:
        await assert_reads_but_cannot_write(rest, namespace)


async def test_an_exec_plugin_token_is_run_again_after_a_401(
    admin: RestConfig, reader_token: str, namespace: str, tmp_path: Path
) -> None:
    ca_of(admin, tmp_path)
    script = ExecPluginScript.write(
        tmp_path, [exec_credential("expired-token"), exec_credential(reader_token)]
    )
    config = on_loopback(await load_config(str(exec_kubeconfig(admin, tmp_path, script))))
    assert config.cert_file is None and len(script.runs()) == 1  # run once by the loader
    async with RestClient(config) as rest:
        listed = await rest.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")  # 401, re-run, 200
        assert listed["kind"] == "ConfigMapList"
        assert len(script.runs()) == 2
        await assert_reads_but_cannot_write(rest, namespace)
        assert len(script.runs()) == 2  # a token without expiry is kept


def exec_kubeconfig(admin: RestConfig, directory: Path, script: ExecPluginScript) -> Path:
    path = directory / "config"
    # kubernetes-asyncio runs a relative command from the working directory, not the kubeconfig's
    exec_spec = {"apiVersion": V1, "command": str(script.path), "interactiveMode": "Never"}
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": admin.host, "certificate-authority": "ca.crt"}}
                ],
                "users": [{"name": "u", "user": {"exec": exec_spec}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def test_an_in_cluster_directory_and_environment_and_a_rotated_token(
    admin: RestConfig, reader_token: str, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca_of(admin, tmp_path)
    token = tmp_path / "token"
    token.write_text("not-a-valid-token")
    server = urlsplit(admin.host)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    config = on_loopback(await load_config(service_account_dir=tmp_path))
    assert config.host == admin.host and config.ssl_ca_cert == str(tmp_path / "ca.crt")
    async with RestClient(config) as rest:
        with pytest.raises(ApiError) as unauthorized:  # the file holds a bad token
            await rest.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
        assert unauthorized.value.status == 401
        token.write_text(reader_token)  # the kubelet rotated it: the next 401 reads it again at once
        await assert_reads_but_cannot_write(rest, namespace)
        listed = await rest.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
        async with RestClient(admin) as writer:
            watching = asyncio.create_task(
                next_added(rest, namespace, listed["metadata"]["resourceVersion"], "seen")
            )
            await Client(writer, "tests").create(CONFIG_MAPS, config_map("seen", namespace))
            assert (await watching)["metadata"]["name"] == "seen"  # the reader may watch


async def test_a_bad_token_is_a_401(admin: RestConfig, namespace: str) -> None:
    config = on_loopback(presenting(admin, "not-a-token"))
    async with RestClient(config) as rest:
        with pytest.raises(ApiError) as unauthorized:
            await rest.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert unauthorized.value.status == 401
    assert unauthorized.value.reason == "Unauthorized"


class Seen:
    def __init__(self) -> None:
        self.requests: set[Request] = set()

    async def reconcile(self, request: Request) -> Result:
        self.requests.add(request)
        return Result()


async def test_a_manager_from_a_rest_config_reconciles_and_closes_its_session(
    admin: RestConfig, namespace: str
) -> None:
    manager = Manager(
        admin,
        field_manager="restconfig-tests",
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    seen = Seen()
    build_controller(manager, "seen").for_(CONFIG_MAPS).complete(seen)
    running = asyncio.create_task(manager.run())
    await manager.client.create(CONFIG_MAPS, config_map("watched", namespace))
    await eventually(lambda: Request("watched", namespace) in seen.requests, "the ConfigMap reconciled")
    transport = manager.rest.transport
    assert isinstance(transport, HttpTransport) and transport._session is not None
    manager.stop()
    await asyncio.wait_for(running, 30)
    assert transport._session is None
