"""Secure /metrics on the real API server: HTTPS, and only for a token the API server authenticates
(TokenReview) and allows `get /metrics` (SubjectAccessReview): ServiceAccount tokens from TokenRequest."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from rbac_support import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, RBAC, SERVICE_ACCOUNTS, service_account_token

from valkey_operator.core.client import Client
from valkey_operator.core.manager import Manager
from valkey_operator.core.restconfig import from_kubeconfig
from valkey_testbed.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def token_of(kube: Client, namespace: str, account: str) -> str:
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": account, "namespace": namespace}})
    return await service_account_token(kube, namespace, account)


@pytest_asyncio.fixture
async def reader_role(kube: Client) -> AsyncIterator[str]:
    """A ClusterRole like the chart's metrics-reader: get on the /metrics URL."""
    name = f"metrics-reader-{uuid.uuid4().hex[:6]}"
    rule = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": [rule]})
    try:
        yield name
    finally:
        await kube.delete(CLUSTER_ROLE_BINDINGS, name)
        await kube.delete(CLUSTER_ROLES, name)


@pytest_asyncio.fixture
async def manager(kubeconfig_path: Path) -> AsyncIterator[Manager]:
    running = Manager(
        await from_kubeconfig(str(kubeconfig_path)),
        field_manager="test",
        namespace="nowhere",
        metrics_bind_address="127.0.0.1:0",
        metrics_secure=True,
        health_probe_bind_address="0",
    )
    task = asyncio.create_task(running.run())
    try:
        await eventually(lambda: running.metrics_endpoint is not None, "the metrics listener", 30)
        yield running
    finally:
        running.stop()
        await task


async def scrape(session: aiohttp.ClientSession, port: int, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(f"https://127.0.0.1:{port}/metrics", headers=headers) as response:
        return response.status, await response.text()


async def test_only_an_allowed_token_reads_metrics_over_https(
    kube: Client, namespace: str, reader_role: str, manager: Manager
) -> None:
    scraper = await token_of(kube, namespace, "scraper")
    stranger = await token_of(kube, namespace, "stranger")
    subject = {"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": reader_role},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": reader_role},
            "subjects": [subject],
        },
    )
    assert manager.metrics_endpoint is not None
    port = manager.metrics_endpoint.port
    # The certificate is self-signed: the scraper checks nothing of the server, the server checks it.
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=insecure)) as session:
        assert (await scrape(session, port, None))[0] == 401
        assert (await scrape(session, port, "not-a-token"))[0] == 401
        status, body = await scrape(session, port, stranger)
        assert status == 403 and f"system:serviceaccount:{namespace}:stranger" in body, body
        status, body = await scrape(session, port, scraper)
        assert status == 200 and "python_info" in body, body
    # Plain HTTP is not served on the secure port.
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                await response.read()
