"""A request that gets no answer is a TransportError on the core's own transport (what the operator
runs: load_config, RestConfig, our aiohttp session), whether the connection is refused, reset
mid-request, or never answered. The faults come from the test bed's TCP proxy in front of the real
API server; after each, the same client works again once the proxy does (the error is transient)."""

from __future__ import annotations

import asyncio
import errno
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from valkey_operator.core.resource import CONFIG_MAPS
from valkey_operator.core.rest import ApiError, RestClient, TransportError
from valkey_operator.core.restconfig import load_config
from valkey_operator.core.transport import HttpTransport
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.tcpproxy import TcpProxy
from valkey_testbed.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TIMEOUT = 1.0
"""The request timeout of the no-answer tests: the error must come at it, not at a default 30 s."""


@pytest_asyncio.fixture
async def proxy(kube_control_plane: ControlPlane) -> AsyncIterator[TcpProxy]:
    endpoints = kube_control_plane.endpoints()
    assert endpoints is not None
    async with TcpProxy(endpoints.apiserver_port) as started:
        yield started


@pytest_asyncio.fixture
async def rest(kubeconfig_path: Path, proxy: TcpProxy) -> AsyncIterator[RestClient]:
    """The default transport (a RestConfig, not an ApiClient), its connections through the proxy."""
    config = await load_config(str(kubeconfig_path))
    config.host = proxy.url
    async with RestClient(config) as client:
        assert isinstance(client.transport, HttpTransport)
        yield client


async def kept_alive(rest: RestClient, proxy: TcpProxy, namespace: str) -> None:
    """One answered request: the session now holds an open TLS connection through the proxy."""
    await rest.request("GET", f"/api/v1/namespaces/{namespace}")
    assert proxy.live_connections == 1


async def works_again(rest: RestClient, proxy: TcpProxy, namespace: str) -> None:
    proxy.resume()
    answer = await rest.request("GET", f"/api/v1/namespaces/{namespace}")
    assert answer["metadata"]["name"] == namespace


def config_map(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"v": "1"}}


async def test_a_refused_connection_is_a_transport_error(
    rest: RestClient, proxy: TcpProxy, namespace: str
) -> None:
    proxy.pause()
    with pytest.raises(TransportError) as caught:
        await rest.request("GET", f"/api/v1/namespaces/{namespace}")
    assert proxy.connections_refused >= 1 and proxy.connections_accepted == 0
    assert str(caught.value).startswith(f"GET /api/v1/namespaces/{namespace}: ")
    assert isinstance(caught.value.__cause__, aiohttp.ClientError), repr(caught.value.__cause__)
    await works_again(rest, proxy, namespace)


async def test_a_connection_reset_mid_request_is_a_transport_error(
    rest: RestClient, proxy: TcpProxy, namespace: str
) -> None:
    """A POST (never retried by aiohttp) is held by the proxy, then its connection is reset: the
    server never saw it, and the caller hears ECONNRESET as a TransportError, not a hang."""
    await kept_alive(rest, proxy, namespace)
    proxy.stall()
    posting = asyncio.ensure_future(
        rest.request("POST", CONFIG_MAPS.path(namespace), body=config_map("held"))
    )
    await eventually(lambda: proxy.held_bytes > 0, "the POST held in the proxy", 10, interval=0.01)
    assert not posting.done()
    proxy.pause()  # no second connection either
    assert proxy.cut(reset=True) == 1
    with pytest.raises(TransportError) as caught:
        await asyncio.wait_for(posting, 10)
    cause = caught.value.__cause__
    assert isinstance(cause, aiohttp.ClientOSError) and cause.errno == errno.ECONNRESET, repr(cause)
    assert str(caught.value).startswith(f"POST {CONFIG_MAPS.path(namespace)}: ClientOSError")
    await works_again(rest, proxy, namespace)
    with pytest.raises(ApiError) as missing:
        await rest.request("GET", CONFIG_MAPS.path(namespace, "held"))
    assert missing.value.not_found, "the reset request never reached the server"


async def test_a_request_never_answered_is_a_transport_error_at_its_timeout(
    rest: RestClient, proxy: TcpProxy, namespace: str
) -> None:
    """On a kept-alive connection the request is sent and black-holed: only the timeout ends it."""
    await kept_alive(rest, proxy, namespace)
    proxy.stall()
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        await rest.request("GET", f"/api/v1/namespaces/{namespace}", timeout=TIMEOUT)
    took = time.monotonic() - started
    assert proxy.held_bytes > 0, "the request reached the black hole"
    assert isinstance(caught.value.__cause__, TimeoutError), repr(caught.value.__cause__)
    assert "TimeoutError" in str(caught.value)
    assert TIMEOUT <= took < TIMEOUT + 1.0, took
    await works_again(rest, proxy, namespace)


async def test_a_connection_never_set_up_is_a_transport_error_at_the_timeout(
    rest: RestClient, proxy: TcpProxy, namespace: str
) -> None:
    """A new connection the proxy accepts but never relays: the TLS handshake gets no answer."""
    proxy.stall()
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        await rest.request("GET", f"/api/v1/namespaces/{namespace}", timeout=TIMEOUT)
    took = time.monotonic() - started
    assert proxy.connections_accepted == 1 and proxy.held_bytes > 0, "the ClientHello was held"
    assert isinstance(caught.value.__cause__, TimeoutError), repr(caught.value.__cause__)
    assert TIMEOUT <= took < TIMEOUT + 1.0, took
    proxy.cut()  # the half-done handshake is of no use after the stall
    await works_again(rest, proxy, namespace)
