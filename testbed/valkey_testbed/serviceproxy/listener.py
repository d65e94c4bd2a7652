"""One listening address (a node's nodePort, or a load-balancer ingress address and port).

Each accepted connection goes to one endpoint of the listener's current route, tried in random
order (a refused dial tries the next, as the userspace kube-proxy did); with none, or none that
answers, the client is reset. The route is swapped in place when the Service changes, and the
proxy resets connections whose endpoint went away.

Accepting is our own, synchronous on the socket's readiness, not asyncio.start_server or a
`sock_accept` loop: both can lose a connection accepted just as the listener closes (3.11's server
fails an assertion making its transport; a cancelled `sock_accept` drops its result), and its
client then hangs instead of being reset. Here every accepted socket gets its handler, which
resets it if the listener closed meanwhile; those still queued are reset by the kernel's close.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import attrs
import structlog

from valkey_testbed.serviceproxy.endpoints import Backend, Route
from valkey_testbed.serviceproxy.loopback import NotLoopback, require_loopback
from valkey_testbed.serviceproxy.pipe import reset, splice

log = structlog.get_logger(__name__)

CONNECT_TIMEOUT = 3.0
BACKLOG = 128
ACCEPT_PAUSE = 0.1
"""Seconds before accepting again after accept failed (out of file descriptors)."""


@attrs.define(eq=False)
class Connection:
    """A client connection and the one to its endpoint."""

    backend: Backend
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter

    def reset(self) -> None:
        reset(self.client)
        reset(self.upstream)


@attrs.define(eq=False)
class Listener:
    """Listens on ip:port once `open` returned (OSError, e.g. EADDRINUSE, if it could not bind)."""

    ip: str
    port: int
    route: Route
    candidates: Callable[[Route], list[Backend]]
    """endpoints worth dialling for a new connection, in order"""
    current: Callable[[Route, Backend], bool]
    """whether an endpoint still belongs to the route (checked once a dial succeeded)"""
    connections: set[Connection] = attrs.field(init=False, factory=set)
    _socket: socket.socket | None = attrs.field(init=False, default=None)
    _handlers: set[asyncio.Task[Any]] = attrs.field(init=False, factory=set)
    _closed: bool = attrs.field(init=False, default=False)

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    async def open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((require_loopback(self.ip), self.port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._socket = sock
        asyncio.get_running_loop().add_reader(sock, self._accept_ready, sock)

    async def close(self) -> None:
        """Stop listening and reset every connection (and every one still queued)."""
        self._closed = True
        if self._socket is not None:
            asyncio.get_running_loop().remove_reader(self._socket)
            self._socket.close()
        for connection in list(self.connections):
            connection.reset()

    def reset_where(self, gone: Callable[[Backend], bool]) -> int:
        """Reset the connections whose endpoint `gone` says left; how many."""
        doomed = [c for c in self.connections if gone(c.backend)]
        for connection in doomed:
            connection.reset()
        return len(doomed)

    def _accept_ready(self, sock: socket.socket) -> None:
        """Accept every queued connection and hand each to its own task."""
        loop = asyncio.get_running_loop()
        while not self._closed:
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: pause rather than spin
                log.warning("service_proxy_accept_failed", listen=self.address, error=str(exc))
                loop.remove_reader(sock)
                loop.call_later(ACCEPT_PAUSE, self._resume, sock)
                return
            conn.setblocking(False)
            task = loop.create_task(self._accept(conn))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    def _resume(self, sock: socket.socket) -> None:
        if not self._closed:
            asyncio.get_running_loop().add_reader(sock, self._accept_ready, sock)

    async def _accept(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn)
        except OSError:
            conn.close()
            return
        if self._closed:
            reset(writer)
            return
        try:
            await self._forward(reader, writer)
        except Exception:
            log.exception("service_proxy_connection_failed", listen=self.address)
            reset(writer)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        route = self.route
        for backend in self.candidates(route):
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    upstream = await asyncio.open_connection(require_loopback(backend.ip), backend.port)
            except (OSError, TimeoutError, NotLoopback) as exc:
                log.info(
                    "service_proxy_dial_failed", listen=self.address, endpoint=backend.ip, error=str(exc)
                )
                continue
            if self._closed or not self.current(route, backend):
                reset(upstream[1])
                break
            connection = Connection(backend, writer, upstream[1])
            self.connections.add(connection)
            try:
                await splice((reader, writer), upstream)
            finally:
                self.connections.discard(connection)
            return
        reset(writer)
