"""The admin client's pure parts, and its refusal to dial outside the allowed networks."""

from __future__ import annotations

import ipaddress

import pytest

from valkey_operator.valkey.admin import (
    AddressNotAllowed,
    AdminClient,
    Credentials,
    ValkeyAdminError,
    allowed_networks_from_env,
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


def test_default_networks_are_loopback_only() -> None:
    assert allowed_networks_from_env({}) == LOOPBACK
    assert allowed_networks_from_env({"VALKEY_OPERATOR_NODE_NETWORKS": "10.0.0.0/8, 127.0.0.0/8"}) == (
        ipaddress.ip_network("10.0.0.0/8"),
        *LOOPBACK,
    )


@pytest.mark.timeout(10)
async def test_connect_refuses_before_opening_a_socket() -> None:
    admin = AdminClient(credentials=Credentials(username="u", password="p"), allowed_networks=LOOPBACK)
    with pytest.raises(AddressNotAllowed):
        async with admin.connect("192.0.2.1"):
            pass


@pytest.mark.timeout(10)
async def test_an_unreachable_node_fails_within_the_timeout() -> None:
    admin = AdminClient(
        credentials=Credentials(username="u", password="p"),
        allowed_networks=LOOPBACK,
        connect_timeout=0.5,
        command_timeout=0.5,
        port=1,  # nothing listens on port 1
    )
    with pytest.raises(ValkeyAdminError):
        async with admin.connect("127.0.0.1"):
            pass
