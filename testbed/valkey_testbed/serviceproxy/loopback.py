"""Loopback only: the proxy listens and dials on 127.0.0.0/8 and nowhere else (TESTBED.md).

The load-balancer pool, 127.0.200.0/21, is apart from the nodes' 127.0.100.N and the pods'
127.1.0.0/16. Several test beds may run on one machine at once, so an address is only taken after
binding it succeeded (`AddressPool.candidates` offers, the caller binds): a bed never hands out an
address another bed listens on, whatever order the two start in.
"""

from __future__ import annotations

import ipaddress
import random
import time
from collections.abc import Iterator

import attrs

from valkey_testbed.kubelet.ipam import listening_ipv4_addresses

LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
LB_POOL = ipaddress.IPv4Network("127.0.200.0/21")
"""Ingress addresses of LoadBalancer Services: 127.0.200.1 .. 127.0.207.254."""
QUARANTINE_SECONDS = 600.0


class NotLoopback(ValueError):
    """An address outside 127.0.0.0/8: the proxy never listens or dials there."""


def require_loopback(host: str) -> str:
    """host itself, once it is known to be a 127.x address (anything else raises NotLoopback)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError as exc:
        raise NotLoopback(f"{host!r} is not an IP address") from exc
    if address not in LOOPBACK:
        raise NotLoopback(f"{host} is outside {LOOPBACK}: the test bed never leaves the machine")
    return host


@attrs.define
class AddressPool:
    """Round-robin over the pool from a random start; a released address rests a while (a client
    still holding it must not reach the next Service), and one already listened on is skipped."""

    network: ipaddress.IPv4Network = LB_POOL
    quarantine: float = QUARANTINE_SECONDS
    _next: int = attrs.field(init=False, factory=lambda: random.randrange(LB_POOL.num_addresses))
    _held: set[str] = attrs.field(init=False, factory=set)
    _released: dict[str, float] = attrs.field(init=False, factory=dict)

    def candidates(self, preferred: str | None = None) -> Iterator[str]:
        """Addresses worth trying, preferred (a Service's current one) first; `hold` the one that bound."""
        busy = listening_ipv4_addresses()
        if preferred and self.contains(preferred) and preferred not in self._held | busy:
            yield require_loopback(preferred)
        now = time.monotonic()
        self._released = {ip: at for ip, at in self._released.items() if now - at < self.quarantine}
        size = self.network.num_addresses
        for _ in range(size):
            candidate = self.network[self._next % size]
            self._next = (self._next + 1) % size
            ip = str(candidate)
            if int(candidate) & 0xFF in (0, 255) or ip in self._held or ip in self._released or ip in busy:
                continue
            yield require_loopback(ip)

    def contains(self, ip: str) -> bool:
        try:
            return ipaddress.ip_address(ip) in self.network
        except ValueError:
            return False

    def hold(self, ip: str) -> None:
        self._held.add(ip)

    def release(self, ip: str) -> None:
        if ip in self._held:
            self._held.discard(ip)
            self._released[ip] = time.monotonic()
