"""Loopback pod IPs: unique, and not handed out again soon after release.

Pods share the host's network namespace, so each gets its own 127.x address
and binds it (TESTBED.md, "Network safety"). Addresses come round-robin from
127.1.0.0/16, starting at a random point (two test beds on one machine rarely
collide) and persisted, so a restarted kubelet does not reissue recent IPs. A
released address also sits in quarantine for a while, and an address some
process already listens on is skipped.
"""

from __future__ import annotations

import ipaddress
import json
import random
import time
from pathlib import Path

import attrs

POOL = ipaddress.IPv4Network("127.1.0.0/16")
QUARANTINE_SECONDS = 600.0


def listening_ipv4_addresses() -> set[str]:
    """IPv4 addresses with a TCP listener on this host (from /proc/net/tcp)."""
    addresses: set[str] = set()
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return addresses
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A":  # LISTEN
            host = fields[1].split(":", 1)[0]
            addresses.add(str(ipaddress.IPv4Address(bytes.fromhex(host)[::-1])))
    return addresses


@attrs.define
class IPAllocator:
    """Round-robin allocation over POOL with a quarantine for released addresses."""

    state_file: Path | None = None
    quarantine: float = QUARANTINE_SECONDS
    _next: int = attrs.field(init=False, default=-1)
    _in_use: set[str] = attrs.field(init=False, factory=set)
    _released: dict[str, float] = attrs.field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.state_file is not None and self.state_file.exists():
            try:
                self._next = int(json.loads(self.state_file.read_text())["next"])
            except (ValueError, KeyError, OSError):
                self._next = -1
        if self._next < 0:
            self._next = random.randrange(POOL.num_addresses)

    def allocate(self) -> str:
        """A fresh address: never one in use, in quarantine, or already listened on."""
        now = time.monotonic()
        self._released = {ip: at for ip, at in self._released.items() if now - at < self.quarantine}
        busy = listening_ipv4_addresses()
        for _ in range(POOL.num_addresses):
            candidate = POOL[self._next % POOL.num_addresses]
            self._next = (self._next + 1) % POOL.num_addresses
            last_octet = int(candidate) & 0xFF
            ip = str(candidate)
            if last_octet in (0, 255) or ip in self._in_use or ip in self._released or ip in busy:
                continue
            self._in_use.add(ip)
            self._persist()
            return ip
        raise RuntimeError(f"no free pod IP left in {POOL}")

    def release(self, ip: str | None) -> None:
        """Give an address back; it is not handed out again for `quarantine` seconds."""
        if ip and ip in self._in_use:
            self._in_use.discard(ip)
            self._released[ip] = time.monotonic()

    def _persist(self) -> None:
        if self.state_file is not None:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            self.state_file.write_text(json.dumps({"next": self._next}))
