"""Which addresses an object store endpoint may be at: never the host's own, nor link-local, unless allowed.

A backup's endpoint is a URL a tenant writes in its own ValkeyBackup or
ValkeyCluster, and the operator, shared by every tenant, dials it. Pointed at
loopback it reaches the operator pod's own ports; pointed at link-local it
reaches the node's cloud metadata service (169.254.169.254; AWS's IPv6 one,
fd00:ec2::254, is refused by name), which hands out the node's credentials.
So those ranges are refused unless the operator is told to allow a network
within them (`--backup-endpoint-allowed-networks`: a test bed whose store
listens on 127.0.0.1).

The check runs where the socket is made (`guarded_socket`, aiohttp's
socket_factory), on the address actually dialled: a literal IP, every address a
name resolves to, and a name that resolves elsewhere the second time (DNS
rebinding) are all caught. Pure apart from creating the socket.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import attrs

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

REFUSED: tuple[tuple[Network, str], ...] = (
    (ipaddress.ip_network("127.0.0.0/8"), "loopback"),
    (ipaddress.ip_network("::1/128"), "loopback"),
    (ipaddress.ip_network("0.0.0.0/8"), "this host"),  # Linux connects 0.0.0.0 to the host itself
    (ipaddress.ip_network("::/128"), "this host"),
    (ipaddress.ip_network("169.254.0.0/16"), "link-local"),
    (ipaddress.ip_network("fe80::/10"), "link-local"),
    (ipaddress.ip_network("fd00:ec2::254/128"), "a cloud metadata address"),
)
"""Ranges an endpoint may not be in, with the word a refusal uses."""


class EndpointRefused(ConnectionRefusedError):
    """The address is in a refused range (an OSError, so the HTTP stack treats it as a failed connect).

    Its text is the same for every address: when a name resolves to several refused addresses
    (localhost: 127.0.0.1 and ::1), the connection layer raises the first error itself only if all
    read alike, and folds them into one plain OSError otherwise. The address is an attribute."""

    def __init__(self, address: str, why: str) -> None:
        super().__init__(errno.EACCES, MESSAGE)
        self.address = address
        self.why = why

    def explain(self) -> str:
        return f"{self.address} is {self.why}: refused as a backup endpoint"


MESSAGE = "a loopback or link-local address: refused as a backup endpoint"


@attrs.frozen
class EndpointPolicy:
    """Addresses refused as endpoints: REFUSED, except within `allowed`."""

    allowed: tuple[Network, ...] = ()

    def refusal(self, address: str) -> str | None:
        """What the address is ("loopback", "link-local", ...) when refused; None when it may be dialled."""
        try:
            parsed: Address = ipaddress.ip_address(address.split("%", 1)[0])  # fe80::1%eth0: the scope goes
        except ValueError:
            return None  # not an IP address (a Unix socket path): nothing of ours
        if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
            parsed = parsed.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
        for network, why in REFUSED:
            if parsed.version == network.version and parsed in network:
                if any(parsed.version == ok.version and parsed in ok for ok in self.allowed):
                    return None
                return why
        return None

    def check(self, address: str) -> None:
        """Raise EndpointRefused when the address is refused."""
        why = self.refusal(address)
        if why is not None:
            raise EndpointRefused(address, why)


REFUSE_LOCAL = EndpointPolicy()
"""The default: loopback, this-host and link-local addresses are refused."""
ANY_ADDRESS = EndpointPolicy((ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")))
"""Every address allowed: for a client that runs with no more reach than its caller already has (a
restoring pod's init container, in the tenant's own pod), or a local benchmark."""

AddrInfo = tuple[int, int, int, str, Any]


def guarded_socket(policy: EndpointPolicy) -> Callable[[AddrInfo], socket.socket]:
    """aiohttp's socket_factory: a socket for an address the policy allows, EndpointRefused otherwise."""

    def make(addr_info: AddrInfo) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        policy.check(str(sockaddr[0]))
        return socket.socket(family=family, type=type_, proto=proto)

    return make


def refused_in(exc: BaseException) -> EndpointRefused | None:
    """The EndpointRefused behind exc, if any: botocore and aiohttp wrap the socket's error in their own
    (EndpointConnectionError's `error`, aiohttp's `os_error`, or the exception chain)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, EndpointRefused):
            return current
        kwargs = getattr(current, "kwargs", None)
        nested = [
            getattr(current, "os_error", None),
            kwargs.get("error") if isinstance(kwargs, dict) else None,
            current.__cause__,
            current.__context__,
            *(current.exceptions if isinstance(current, BaseExceptionGroup) else ()),
        ]
        pending.extend(item for item in nested if isinstance(item, BaseException))
    return None
