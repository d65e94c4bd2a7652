"""The admin client's pure parts, and its refusal to dial outside the allowed networks."""

from __future__ import annotations

import ipaddress
import socket
import time

import pytest

from valkey_operator.valkey.admin import (
    AddressNotAllowed,
    AdminClient,
    Credentials,
    ValkeyAdminError,
    check_address,
    decode_pairs,
    parse_info,
)

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


def test_parse_info_skips_headers_and_blank_lines() -> None:
    text = "# Server\r\nvalkey_version:9.1.2\r\nrole:master\r\n\r\n# Replication\r\nmaster_repl_offset:42\r\n"
    assert parse_info(text) == {"valkey_version": "9.1.2", "role": "master", "master_repl_offset": "42"}


def test_decode_pairs_reads_resp2_flat_lists_and_resp3_maps() -> None:
    assert decode_pairs([b"name", b"m1", b"last_update_time", 7]) == {"name": "m1", "last_update_time": 7}
    assert decode_pairs({b"state": b"success"}) == {"state": "success"}
    assert decode_pairs(None) == {}


@pytest.mark.parametrize("host", ["10.0.0.1", "example.com", "::1", "0.0.0.0"])
def test_addresses_outside_the_allowed_networks_are_refused(host: str) -> None:
    with pytest.raises(AddressNotAllowed):
        check_address(host, LOOPBACK)


def test_loopback_addresses_are_allowed() -> None:
    check_address("127.0.43.7", LOOPBACK)


def test_any_of_several_networks_admits_an_address() -> None:
    networks = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))
    check_address("10.1.2.3", networks)
    check_address("fd00::7", networks)
    with pytest.raises(AddressNotAllowed):
        check_address("127.0.0.1", networks)


def test_the_admin_client_has_no_default_networks() -> None:
    """Where it may dial is always stated by the caller (the operator's --node-networks)."""
    with pytest.raises(TypeError, match="allowed_networks"):
        AdminClient(credentials=Credentials(username="u", password="p"))  # type: ignore[call-arg]


@pytest.mark.timeout(10)
async def test_connect_refuses_before_opening_a_socket() -> None:
    admin = AdminClient(credentials=Credentials(username="u", password="p"), allowed_networks=LOOPBACK)
    with pytest.raises(AddressNotAllowed):
        async with admin.connect("192.0.2.1"):
            pass


@pytest.mark.timeout(10)
async def test_an_unreachable_node_fails_within_the_timeout() -> None:
    """A node that drops packets costs the connect timeout, no more (a refused port would fail at once)."""
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepted: one queued connection fills it, and further SYNs are dropped
        queued.connect(listener.getsockname())
        admin = AdminClient(
            credentials=Credentials(username="u", password="p"),
            allowed_networks=LOOPBACK,
            connect_timeout=0.5,
            command_timeout=0.5,
            port=listener.getsockname()[1],
        )
        started = time.monotonic()
        with pytest.raises(ValkeyAdminError, match=r"(?i)time"):
            async with admin.connect("127.0.0.1"):
                pass
        elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 2.0, f"failed after {elapsed:.2f}s with a 0.5 s connect timeout"
