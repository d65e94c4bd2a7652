"""open_rdb_stream never dials an address outside the allowed networks."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from valkey_operator.valkey.admin import AddressNotAllowed, Credentials
from valkey_operator.valkey.rdb_stream import open_rdb_stream

CREDENTIALS = Credentials(username="backup", password="secret")


@pytest.mark.parametrize("host", ["10.0.0.1", "node-0.example.com", "::1"])
async def test_addresses_outside_the_allowed_networks_are_refused(host: str) -> None:
    with pytest.raises(AddressNotAllowed):
        async with open_rdb_stream(
            host, 6379, CREDENTIALS, ca_pem=None, allowed_networks=[ipaddress.ip_network("127.0.0.0/8")]
        ):
            pass


async def test_the_refusal_comes_before_any_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        with pytest.raises(AddressNotAllowed):
            async with open_rdb_stream(
                "127.0.0.1",
                port,
                CREDENTIALS,
                ca_pem=None,
                allowed_networks=[ipaddress.ip_network("10.0.0.0/8")],
            ):
                pass
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing ever connected
