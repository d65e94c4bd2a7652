"""Startup, readiness and liveness probes (tcpSocket, httpGet, exec) with the kubelet's counting.

A probe runs every periodSeconds after initialDelaySeconds; successThreshold
consecutive successes make it pass, failureThreshold consecutive failures make
it fail. Network probes only ever dial loopback addresses (the pod IP unless
the probe names another 127.x host): anything else fails without a packet
sent (TESTBED.md, "Network safety").
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

Obj = dict[str, Any]
Exec = Callable[[Sequence[str], float], Awaitable[tuple[int, bytes]]]
"""(argv, timeout) -> (exit code, output); exit code -1 on timeout."""


@attrs.frozen
class Outcome:
    ok: bool
    message: str = ""


def resolve_port(port: int | str, container: Obj) -> int:
    """A probe port, by number or by the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"port {port!r} is not a named port of container {container['name']!r}")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def tcp_check(host: str, port: int, timeout: float) -> Outcome:
    if not _loopback(host):
        return Outcome(False, f"refusing to dial non-loopback host {host}")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as exc:
        return Outcome(False, f"dial tcp {host}:{port}: {exc or 'timeout'}")
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return Outcome(True)


async def http_check(
    host: str, port: int, path: str, scheme: str, headers: Sequence[Obj], timeout: float
) -> Outcome:
    """GET like kube-probe: 200..399 passes; TLS is not verified (neither is it by the kubelet)."""
    if not _loopback(host):
        return Outcome(False, f"refusing to dial non-loopback host {host}")
    context = None
    if scheme.upper() == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    request_headers = {
        "Host": f"{host}:{port}",
        "User-Agent": "kube-probe/1.37",
        "Accept": "*/*",
        "Connection": "close",
    }
    for header in headers:
        request_headers[header["name"]] = header.get("value", "")

    async def get() -> Outcome:
        reader, writer = await asyncio.open_connection(host, port, ssl=context)
        try:
            head = "".join(f"{name}: {value}\r\n" for name, value in request_headers.items())
            writer.write(f"GET {path or '/'} HTTP/1.1\r\n{head}\r\n".encode())
            await writer.drain()
            status_line = (await reader.readline()).decode(errors="replace")
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        parts = status_line.split()
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        return Outcome(200 <= code < 400, f"HTTP probe failed with statuscode: {code}")

    try:
        return await asyncio.wait_for(get(), timeout)
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        return Outcome(False, f"Get {scheme.lower()}://{host}:{port}{path}: {exc or 'timeout'}")


@attrs.define
class Probe:
    """One probe of one container: `run_once` checks, `observe` counts toward the thresholds."""

    kind: str  # startup | readiness | liveness
    spec: Obj
    container: Obj
    pod_ip: str
    exec_: Exec
    successes: int = 0
    failures: int = 0
    passing: bool | None = None
    last_message: str = ""

    @property
    def initial_delay(self) -> float:
        return float(self.spec.get("initialDelaySeconds") or 0)

    @property
    def period(self) -> float:
        return float(self.spec.get("periodSeconds") or 10)

    @property
    def timeout(self) -> float:
        return float(self.spec.get("timeoutSeconds") or 1)

    @property
    def success_threshold(self) -> int:
        return int(self.spec.get("successThreshold") or 1)

    @property
    def failure_threshold(self) -> int:
        return int(self.spec.get("failureThreshold") or 3)

    async def run_once(self) -> Outcome:
        spec = self.spec
        try:
            if "exec" in spec:
                code, output = await self.exec_(spec["exec"].get("command") or [], self.timeout)
                if code == -1:
                    return Outcome(False, f"command timed out after {self.timeout:g}s")
                return Outcome(code == 0, output.decode(errors="replace")[-512:])
            if "tcpSocket" in spec:
                tcp = spec["tcpSocket"]
                port = resolve_port(tcp["port"], self.container)
                return await tcp_check(tcp.get("host") or self.pod_ip, port, self.timeout)
            if "httpGet" in spec:
                http = spec["httpGet"]
                port = resolve_port(http["port"], self.container)
                return await http_check(
                    http.get("host") or self.pod_ip,
                    port,
                    http.get("path", "/"),
                    http.get("scheme", "HTTP"),
                    http.get("httpHeaders") or [],
                    self.timeout,
                )
        except ValueError as exc:
            return Outcome(False, str(exc))
        return Outcome(False, "unsupported probe handler (this kubelet knows exec, tcpSocket, httpGet)")

    def observe(self, outcome: Outcome) -> bool | None:
        """Count an outcome; returns the new verdict when it changed, else None."""
        self.last_message = outcome.message
        if outcome.ok:
            self.successes, self.failures = self.successes + 1, 0
            verdict = True if self.successes >= self.success_threshold else self.passing
        else:
            self.successes, self.failures = 0, self.failures + 1
            verdict = False if self.failures >= self.failure_threshold else self.passing
        if verdict is not None and verdict != self.passing:
            self.passing = verdict
            return verdict
        return None

    async def loop(self, on_verdict: Callable[[Probe, bool], None]) -> None:
        """Probe until cancelled, reporting each change of verdict."""
        await asyncio.sleep(self.initial_delay)
        while True:
            verdict = self.observe(await self.run_once())
            if verdict is not None:
                on_verdict(self, verdict)
            await asyncio.sleep(self.period)
