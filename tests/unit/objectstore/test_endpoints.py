"""Which addresses a backup endpoint may be at (objectstore/endpoints.py): pure rules, and the socket
factory that applies them to the address actually dialled."""

from __future__ import annotations

import ipaddress
import socket

import aiohttp
import botocore.exceptions
import pytest

from valkey_operator.objectstore import ANY_ADDRESS, REFUSE_LOCAL, EndpointPolicy
from valkey_operator.objectstore.endpoints import EndpointRefused, guarded_socket, refused_in
from valkey_operator.objectstore.errors import classify

TEST_BED = EndpointPolicy((ipaddress.ip_network("127.0.0.0/8"),))


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.200.0.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("0.0.0.0", "this host"),
        ("::", "this host"),
        ("169.254.169.254", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fd00:ec2::254", "a cloud metadata address"),
    ],
)
def test_loopback_this_host_and_link_local_are_refused_by_default(address: str, why: str) -> None:
    assert REFUSE_LOCAL.refusal(address) == why
    with pytest.raises(EndpointRefused) as raised:
        REFUSE_LOCAL.check(address)
    assert raised.value.explain() == f"{address} is {why}: refused as a backup endpoint"
    assert ANY_ADDRESS.refusal(address) is None


@pytest.mark.parametrize(
    "address", ["10.0.0.5", "192.168.1.1", "52.95.110.1", "fd00:ec2::253", "2001:db8::1", "/run/s3.sock"]
)
def test_other_addresses_are_never_refused(address: str) -> None:
    assert REFUSE_LOCAL.refusal(address) is None


def test_an_allowed_network_lifts_only_its_own_addresses() -> None:
    assert TEST_BED.refusal("127.0.0.1") is None
    assert TEST_BED.refusal("::ffff:127.0.0.1") is None
    assert TEST_BED.refusal("::1") == "loopback"  # another family, another network
    assert TEST_BED.refusal("169.254.169.254") == "link-local"


def test_the_socket_factory_refuses_before_a_socket_exists_and_makes_one_otherwise() -> None:
    make = guarded_socket(REFUSE_LOCAL)
    with pytest.raises(EndpointRefused):
        make((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80)))
    with pytest.raises(EndpointRefused):
        make((socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 80, 0, 0)))
    made = make((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 80)))
    try:
        assert made.family == socket.AF_INET
    finally:
        made.close()


def test_a_refusal_wrapped_by_aiohttp_and_botocore_is_endpoint_refused() -> None:
    refused = EndpointRefused("169.254.169.254", "link-local")
    connector = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("169.254.169.254", 80, False, True, None, None, None), refused
    )
    wrapped = botocore.exceptions.EndpointConnectionError(
        endpoint_url="http://169.254.169.254", error=connector
    )
    assert refused_in(wrapped) is refused
    error = classify(wrapped, "ListObjectsV2 b/")
    assert error.reason == "EndpointRefused"
    assert "169.254.169.254 is link-local" in str(error)
    assert refused_in(botocore.exceptions.EndpointConnectionError(endpoint_url="x", error=OSError())) is None
    assert classify(ConnectionRefusedError(), "op").reason == "EndpointUnreachable"
