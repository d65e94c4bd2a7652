"""A request that gets no answer is one transient error type, whatever the transport said."""

from __future__ import annotations

import socket

import pytest
from kubernetes_asyncio import client

from valkey_operator.core.rest import RestClient, TransportError


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_is_a_transport_error() -> None:
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{closed_port()}"
    configuration.verify_ssl = False
    async with client.ApiClient(configuration) as api:
        with pytest.raises(TransportError) as caught:
            await RestClient(api).request("GET", "/api/v1/namespaces", timeout=5)
    assert "GET /api/v1/namespaces" in str(caught.value)
    assert isinstance(caught.value, ConnectionError)  # code catching OSError still catches it
